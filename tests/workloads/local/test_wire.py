"""The batch wire format: exact round trips, and every malformed input refused with a WireError naming the part."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.local.wire import MAGIC, WireError, decode_batch, encode_batch


def _batch(count: int = 5, p: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"xx": rng.normal(size=(count, p * (p + 1) // 2)), "xy": rng.normal(size=(count, p)) * 1e200}


def _with_header(header: dict, body: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<4sBI", MAGIC, 1, len(raw)) + raw + body


def _header(**changes: object) -> dict:
    return {"round": 0, "count": 1, "dtype": "<f8", "fields": [{"name": "value", "shape": []}], "pseudonyms": 0,
            **changes}


def test_float64_round_trip_is_exact_with_fields_in_order() -> None:
    batch = _batch()
    decoded = decode_batch(encode_batch(batch, round_index=3))
    assert decoded.round_index == 3 and decoded.count == 5 and decoded.pseudonyms is None
    assert list(decoded.fields) == ["xx", "xy"]
    for name, value in batch.items():
        assert decoded.fields[name].dtype == np.float64 and np.array_equal(decoded.fields[name], value)


def test_scalar_and_matrix_fields_and_an_empty_batch() -> None:
    batch = {"value": np.array([1.5, -2.0]), "m": np.arange(12.0).reshape(2, 2, 3)}
    decoded = decode_batch(encode_batch(batch, 0))
    assert decoded.fields["value"].shape == (2,) and np.array_equal(decoded.fields["m"], batch["m"])
    empty = decode_batch(encode_batch({"value": np.zeros(0)}, 1))
    assert empty.count == 0 and empty.fields["value"].shape == (0,)


def test_float32_halves_the_body_and_rounds_to_single_precision() -> None:
    batch = {"xy": np.random.default_rng(1).normal(size=(1000, 10))}
    wide, narrow = encode_batch(batch, 0), encode_batch(batch, 0, dtype="<f4")
    assert len(wide) - len(narrow) == 1000 * 10 * 4 + (len(b'"<f8"') - len(b'"<f4"'))
    decoded = decode_batch(narrow).fields["xy"]
    assert decoded.dtype == np.float64
    np.testing.assert_allclose(decoded, batch["xy"], rtol=2**-24)  # float32 keeps 24 significant bits


def test_pseudonyms_travel_with_the_batch() -> None:
    names = ["alice", "bob", "ünïcode", "x" * 200]
    decoded = decode_batch(encode_batch({"value": np.arange(4.0)}, 0, pseudonyms=names))
    assert decoded.pseudonyms == names


def test_a_bytearray_or_memoryview_decodes_too() -> None:
    payload = encode_batch(_batch(), 0)
    assert np.array_equal(decode_batch(bytearray(payload)).fields["xy"], _batch()["xy"])
    assert np.array_equal(decode_batch(memoryview(payload)).fields["xx"], _batch()["xx"])


@pytest.mark.parametrize("fields, kwargs, fragment", [
    ({"a": np.zeros(3), "b": np.zeros(4)}, {}, "same leading number"),
    ({"a": 1.0}, {}, "same leading number"),
    ({}, {}, "non-empty mapping"),
    ({"a": np.zeros(2)}, {"pseudonyms": ["x"]}, "list of 2 strings"),
    ({"a": np.zeros(2)}, {"pseudonyms": ["x", "y\nz"]}, "pseudonym 1 must be"),
    ({"a": np.zeros(1)}, {"pseudonyms": [""]}, "pseudonym 0 must be"),
    ({"a": np.zeros(1)}, {"dtype": "<f2"}, "dtype must be one of"),
    ({"a": np.zeros(1)}, {"round_index": -1}, "round must be a non-negative integer"),
    ({"a": np.zeros(1)}, {"round_index": True}, "round must be a non-negative integer"),
])
def test_encoding_refuses_what_it_cannot_send(fields, kwargs, fragment) -> None:  # noqa: ANN001
    kwargs = {"round_index": 0, **kwargs}
    with pytest.raises(WireError, match=fragment):
        encode_batch(fields, **kwargs)


GOOD = encode_batch({"value": np.array([1.0, 2.0])}, 0, pseudonyms=["a", "b"])


@pytest.mark.parametrize("payload, fragment", [
    (b"", "starts with 9 bytes"),
    (b"PK\x03\x04" + GOOD[4:], "not a report batch"),
    (GOOD[:4] + b"\x02" + GOOD[5:], "unsupported batch version 2"),
    (GOOD[:-1], "announces"),
    (GOOD + b"\x00", "announces"),
    (GOOD[:5] + struct.pack("<I", 10**9) + GOOD[9:], "announces 1000000000 bytes"),
    (_with_header(_header())[:-1] + b"!", "not UTF-8 JSON"),
    (_with_header([1, 2]), "must be an object with the keys"),
    (_with_header({**_header(), "extra": 1}), "must be an object with the keys"),
    (_with_header(_header(count=-1)), "count must be an integer"),
    (_with_header(_header(count=True)), "count must be an integer"),
    (_with_header(_header(round="0")), "round must be a non-negative integer"),
    (_with_header(_header(dtype="<i8")), "dtype must be one of"),
    (_with_header(_header(fields=[])), "non-empty list"),
    (_with_header(_header(fields=[{"name": "", "shape": []}])), "non-empty 'name'"),
    (_with_header(_header(fields=[{"name": "a", "shape": [0]}])), "shape must be a list"),
    (_with_header(_header(fields=[{"name": "a", "shape": [2.5]}])), "shape must be a list"),
    (_with_header(_header(fields=[{"name": "a", "shape": []}, {"name": "a", "shape": []}])), "names repeat"),
    (_with_header(_header(count=10**7, fields=[{"name": "a", "shape": [10**4]}])), "too large"),
    (_with_header(_header(count=2, pseudonyms=4), np.zeros(2).tobytes() + b"a\nb"), "announces"),
    (_with_header(_header(count=2, pseudonyms=1), np.zeros(2).tobytes() + b"a"), "2 reports but 1 pseudonyms"),
    (_with_header(_header(count=1, pseudonyms=2), np.zeros(1).tobytes() + b"\xff\xfe"), "not UTF-8"),
    (_with_header(_header(count=2, pseudonyms=2), np.zeros(2).tobytes() + b"a\n"), "pseudonym 1 must be"),
])
def test_decoding_refuses_malformed_batches(payload: bytes, fragment: str) -> None:
    with pytest.raises(WireError, match=fragment):
        decode_batch(payload)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_corrupted_batch_decodes_or_is_refused_with_a_wire_error(data: st.DataObject) -> None:
    """Flipping, cutting or inserting bytes anywhere never raises anything but WireError."""
    payload = bytearray(encode_batch(_batch(3, 2), 1, pseudonyms=["p", "q", "r"]))
    for _ in range(data.draw(st.integers(1, 4))):
        where = data.draw(st.integers(0, len(payload)))
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip" and where < len(payload):
            payload[where] ^= data.draw(st.integers(1, 255))
        elif action == "cut":
            del payload[where:where + data.draw(st.integers(1, 16))]
        else:
            payload[where:where] = data.draw(st.binary(min_size=1, max_size=8))
    try:
        decoded = decode_batch(bytes(payload))
    except WireError:
        return
    assert all(a.dtype == np.float64 and a.shape[0] == decoded.count for a in decoded.fields.values())
