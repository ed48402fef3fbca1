"""Issue 29 section 4: a model fitted on the encoding reads exactly on the codes, and a code on the target's values.

The per-code reading must be the same model (not an approximation): ``code_matrix @ coef + intercept`` equals the
encoded model's score (logistic) or its prediction decoded to target codes (linear), on every row of the domain.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from workloads import data_scale
from workloads.binning import ColumnBins
from workloads.code_values import code_values, interval_label, label_value, number_text, values_of_codes
from workloads.domain import Domain, DomainError, labels_from_json
from workloads.encodings import DesignEncoding

DOMAIN = Domain.from_sizes({"a": 4, "b": 3, "c": 2, "y": 16}, categorical=["b"])


def every_row() -> dict[str, np.ndarray]:
    grid = np.array(list(itertools.product(range(4), range(3), range(2))))
    return {"a": grid[:, 0], "b": grid[:, 1], "c": grid[:, 2]}


@pytest.mark.parametrize("intercept", [True, False])
def test_a_linear_model_reads_on_the_codes_exactly(intercept: bool) -> None:
    design = DesignEncoding(DOMAIN, ["a", "b", "c"], "y", "linear", intercept)
    rng = np.random.default_rng(1)
    coef, constant = rng.normal(size=design.n_features), (0.3 if intercept else 0.0)
    rows = every_row()
    encoded = design.encode_features(rows) @ coef + constant
    per_code, per_code_intercept = data_scale.per_code(design, coef, constant)
    on_codes = data_scale.code_matrix(design, rows) @ per_code + per_code_intercept
    np.testing.assert_allclose(on_codes, data_scale.target_codes(design, encoded), rtol=0, atol=1e-12)
    np.testing.assert_allclose(data_scale.target_codes(design, encoded), (encoded + 1) * 15 / 2)
    # an ordinal feature's coefficient is per code: a has 4 codes, y 16, so b_a (2/3) per code of a, times 15/2
    assert per_code[0] == pytest.approx(coef[0] * (2 / 3) * 15 / 2)
    # a categorical level's stays the change from level 0, in target codes
    assert per_code[1:3] == pytest.approx(coef[1:3] * 15 / 2)
    columns = data_scale.code_columns(design)
    assert [(c.attribute, c.level) for c in columns] == [("a", None), ("b", 1), ("b", 2), ("c", None)]


def test_a_logistic_model_reads_on_the_log_odds() -> None:
    domain = Domain.from_sizes({"a": 5, "b": 3, "y": 2}, categorical=["b"])
    design = DesignEncoding(domain, ["a", "b"], "y", "logistic")
    coef = np.array([0.7, -0.2, 0.4])
    grid = np.array(list(itertools.product(range(5), range(3))))
    rows = {"a": grid[:, 0], "b": grid[:, 1]}
    per_code, intercept = data_scale.per_code(design, coef, -0.1)
    np.testing.assert_allclose(data_scale.code_matrix(design, rows) @ per_code + intercept,
                               design.encode_features(rows) @ coef - 0.1, atol=1e-12)
    with pytest.raises(data_scale.DataScaleError, match="linear"):
        data_scale.target_codes(design, np.zeros(2))


def test_a_custom_encoding_has_no_reading_per_code() -> None:
    design = DesignEncoding(DOMAIN, ["a"], "y", overrides={"a": [[0.0, 1.0, 4.0, 9.0]]})
    with pytest.raises(data_scale.DataScaleError, match="'a'"):
        data_scale.per_code(design, np.ones(1), 0.0)


def test_labels_read_back_as_the_numbers_they_name() -> None:
    bins = ColumnBins("age", "ordinal", edges=(-np.inf, 17, 25.5, 1234567.0, np.inf))
    assert bins.labels == ("[-inf, 17)", "[17, 25.5)", "[25.5, 1234567.0)", "[1234567.0, inf]")
    assert [label_value(label) for label in bins.labels] == [17, 21.25, (25.5 + 1234567) / 2, 1234567]
    assert label_value("16") == 16 and label_value("Private") is None and label_value("[-inf, inf]") is None
    assert interval_label(0.1, 0.3, closed=True) == "[0.1, 0.3]" and number_text(1e-7) == "1e-07"
    np.testing.assert_array_equal(code_values(None, 3), [0, 1, 2])
    assert code_values(["Private", "State-gov"], 2) is None


def test_a_prediction_between_codes_reads_between_their_values() -> None:
    values = np.array([5.0, 15.0, 30.0])
    np.testing.assert_allclose(values_of_codes(values, np.array([0, 0.5, 1.5, 2, -1, 3])),
                               [5, 10, 22.5, 30, -5, 45])  # beyond the ends: along the end segments
    np.testing.assert_allclose(values_of_codes(np.array([4.0]), np.array([0.3, 7])), [4, 4])


def test_a_domain_file_may_label_its_codes() -> None:
    text = '{"sex": {"size": 2, "kind": "categorical", "labels": ["female", "male"]}, "age": 5}'
    assert Domain.from_json(text).sizes() == {"sex": 2, "age": 5}
    assert labels_from_json(text) == {"sex": ["female", "male"]}
    with pytest.raises(DomainError, match="2 distinct"):
        Domain.from_json('{"sex": {"size": 2, "labels": ["x", "x"]}}')
