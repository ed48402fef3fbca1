"""The API's JSON encoder: the fast pydantic-core path must decode to exactly what the strict encoder's output decodes
to (every float round-trips), as ASCII, and everything the strict encoder refuses or escapes must still be refused or
escaped."""

from __future__ import annotations

import json

import numpy as np
import pydantic_core
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.api.errors import SafeJSONResponse, strict_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def render(content: object) -> bytes:
    return SafeJSONResponse(content).body


@given(json_values)
@settings(suppress_health_check=[HealthCheck.too_slow])  # generation speed on a busy machine, not the property
def test_decodes_to_what_the_strict_encoder_gives(content: object) -> None:
    body = render(content)
    assert body.isascii()
    assert json.loads(body) == json.loads(strict_json(content)) == content


def test_small_exponents_round_trip() -> None:
    value = 1.6133459639661377e-9
    assert json.loads(render({"x": value}))["x"] == value


def test_a_marginal_sized_answer_is_encoded_by_the_fast_path_and_round_trips() -> None:
    counts = np.random.default_rng(0).normal(100.0, 30.0, size=(52, 56)).tolist()
    content = {"release_id": 1, "attributes": ["a", "b"], "counts": counts, "standard_errors": counts,
               "coverage": {"measured": True, "warning": None}, "labels": {}}
    assert render(content) == pydantic_core.to_json(content)  # the fast path answered
    assert json.loads(render(content)) == content


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_infinity_are_refused(bad: float) -> None:
    with pytest.raises(ValueError):
        render({"counts": [1.0, bad]})


def test_non_ascii_is_escaped_and_a_lone_surrogate_does_not_break_the_encoding() -> None:
    assert render({"label": "Sé"}) == b'{"label":"S\\u00e9"}'
    assert render({"message": "bad \udc80"}) == b'{"message":"bad \\udc80"}'


def test_the_words_nan_and_infinity_inside_strings_are_kept() -> None:
    content = {"labels": ["NaN", "Infinity", "-Infinity"]}
    assert json.loads(render(content)) == content
