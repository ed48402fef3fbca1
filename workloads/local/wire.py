"""The compact wire format of a batch of local-DP reports: columnar arrays, no pickle (numpy only).

A simulator or a gateway sends hundreds of thousands of reports in one request; as JSON lists of numbers each float
costs ~20 bytes and a Python object on both sides. This format sends each field as one little-endian array, so
encoding is ``tobytes`` and decoding is ``numpy.frombuffer`` (no copy, no per-report work):

.. code-block:: text

    magic   b"MGLB"          4 bytes
    version 1                1 byte (uint8)
    length  n                4 bytes (uint32, little-endian): the header's size
    header  JSON, UTF-8      n bytes: {"round": t, "count": k, "dtype": "<f8" | "<f4",
                                       "fields": [{"name": ..., "shape": [...]}, ...],
                                       "pseudonyms": bytes of the pseudonym block (0 when absent)}
    fields  in header order  k * prod(shape) values of dtype each, row-major (report by report)
    pseudonyms               UTF-8, joined by "\\n" (a gateway's batch only)

``round`` is the round the reports were randomized for: a report made with round ``t``'s public state must never be
counted in another round, so the server refuses a batch whose round is not the open one. ``"<f4"`` halves the size
(relative rounding 6e-8, far below the noise of any report) at the cost of precision in the running sums of very large
rounds; the decoder always returns float64. What the values may be is not checked here: that is the protocol's
:meth:`~workloads.local.protocols.ReportSchema.validate`, which names the field and the report.

Decoding refuses, with a :class:`WireError` naming the part: a wrong magic or version, a header that is not the JSON
object above (unknown or missing keys, bad types, a negative count, repeated field names), and a body whose size is
not exactly what the header announces. Limits (:data:`MAX_HEADER_BYTES`, :data:`MAX_REPORTS`) keep a hostile header
from asking for large allocations; the arrays themselves are views of the received bytes.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MAGIC = b"MGLB"
VERSION = 1
#: The HTTP media type of a batch in this format.
MEDIA_TYPE = "application/vnd.marginalia.reports"
DTYPES = ("<f8", "<f4")
MAX_HEADER_BYTES = 1 << 20
MAX_REPORTS = 10_000_000
MAX_PSEUDONYM_LENGTH = 200
_PREFIX = struct.Struct("<4sBI")
_HEADER_KEYS = {"round", "count", "dtype", "fields", "pseudonyms"}


class WireError(ValueError):
    """A batch that cannot be encoded or decoded; the message names the part."""


@dataclass(frozen=True)
class WireBatch:
    """A decoded batch: ``fields`` ``{name: float64 array (count, *shape)}`` in header order, the round it was made
    for, and the pseudonyms of a gateway's batch (``None`` otherwise)."""

    round_index: int
    fields: dict[str, np.ndarray]
    pseudonyms: list[str] | None = None

    @property
    def count(self) -> int:
        return next(iter(self.fields.values())).shape[0] if self.fields else 0


def encode_batch(fields: Mapping[str, object], round_index: int, pseudonyms: Sequence[str] | None = None,
                 dtype: str = "<f8") -> bytes:
    """The bytes of a batch: ``fields`` ``{name: array (k, *shape)}`` (every field with the same ``k``)."""
    if dtype not in DTYPES:
        raise WireError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    _check_round(round_index)
    if not isinstance(fields, Mapping) or not fields:
        raise WireError("fields must be a non-empty mapping of field name to an array of reports")
    arrays = {str(name): np.asarray(value, dtype=float) for name, value in fields.items()}
    counts = {name: array.shape[0] if array.ndim else None for name, array in arrays.items()}
    if any(c is None for c in counts.values()) or len(set(counts.values())) != 1:
        raise WireError(f"every field needs the same leading number of reports, got {counts}")
    count = next(iter(counts.values()))
    block = b""
    if pseudonyms is not None:
        block = _pseudonym_block(pseudonyms, count)
    header = {"round": int(round_index), "count": int(count), "dtype": dtype,
              "fields": [{"name": name, "shape": list(array.shape[1:])} for name, array in arrays.items()],
              "pseudonyms": len(block)}
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    parts = [_PREFIX.pack(MAGIC, VERSION, len(encoded)), encoded]
    parts += [np.ascontiguousarray(array, dtype=dtype).tobytes() for array in arrays.values()]
    parts.append(block)
    return b"".join(parts)


def decode_batch(payload: bytes | bytearray | memoryview) -> WireBatch:
    """The batch ``payload`` holds, or :class:`WireError`."""
    data = memoryview(payload).cast("B") if not isinstance(payload, bytes) else payload
    if len(data) < _PREFIX.size:
        raise WireError(f"a batch starts with {_PREFIX.size} bytes of prefix, got {len(data)} bytes in all")
    magic, version, length = _PREFIX.unpack_from(data, 0)
    if magic != MAGIC:
        raise WireError(f"not a report batch: the magic is {bytes(magic)!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise WireError(f"unsupported batch version {version} (this server reads version {VERSION})")
    if length > MAX_HEADER_BYTES or _PREFIX.size + length > len(data):
        raise WireError(f"the header announces {length} bytes; {len(data) - _PREFIX.size} follow the prefix "
                        f"(at most {MAX_HEADER_BYTES})")
    header = _parse_header(bytes(data[_PREFIX.size:_PREFIX.size + length]))
    count, dtype = header["count"], np.dtype(header["dtype"])
    offset = _PREFIX.size + length
    sizes = [count * math.prod(f["shape"]) * dtype.itemsize for f in header["fields"]]
    expected = offset + sum(sizes) + header["pseudonyms"]
    if len(data) != expected:
        raise WireError(f"the header announces {expected} bytes in all ({count} reports), got {len(data)}")
    fields: dict[str, np.ndarray] = {}
    for f, size in zip(header["fields"], sizes, strict=True):
        values = np.frombuffer(data, dtype=dtype, count=size // dtype.itemsize, offset=offset)
        fields[f["name"]] = values.reshape(count, *f["shape"]).astype(np.float64, copy=dtype != np.float64)
        offset += size
    pseudonyms = None
    if header["pseudonyms"]:
        pseudonyms = _read_pseudonyms(bytes(data[offset:]), count)
    return WireBatch(header["round"], fields, pseudonyms)


def _check_round(round_index: object) -> int:
    if isinstance(round_index, bool) or not isinstance(round_index, int | np.integer) or round_index < 0:
        raise WireError(f"round must be a non-negative integer, got {round_index!r}")
    return int(round_index)


def _pseudonym_block(pseudonyms: Sequence[str], count: int) -> bytes:
    if isinstance(pseudonyms, str) or len(pseudonyms) != count:
        raise WireError(f"pseudonyms must be a list of {count} strings, one per report")
    for index, name in enumerate(pseudonyms):
        if not isinstance(name, str) or not 0 < len(name) <= MAX_PSEUDONYM_LENGTH or not name.isprintable():
            raise WireError(f"pseudonym {index} must be 1 to {MAX_PSEUDONYM_LENGTH} printable characters, "
                            f"got {name!r}")
    return "\n".join(pseudonyms).encode("utf-8")


def _read_pseudonyms(block: bytes, count: int) -> list[str]:
    try:
        names = block.decode("utf-8").split("\n")
    except UnicodeDecodeError as error:
        raise WireError(f"the pseudonyms are not UTF-8: {error}") from None
    if len(names) != count:
        raise WireError(f"the batch holds {count} reports but {len(names)} pseudonyms")
    bad = next((i for i, n in enumerate(names) if not 0 < len(n) <= MAX_PSEUDONYM_LENGTH or not n.isprintable()),
               None)
    if bad is not None:
        raise WireError(f"pseudonym {bad} must be 1 to {MAX_PSEUDONYM_LENGTH} printable characters")
    return names


def _parse_header(raw: bytes) -> dict:
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise WireError(f"the header is not UTF-8 JSON: {error}") from None
    if not isinstance(header, dict) or set(header) != _HEADER_KEYS:
        keys = sorted(header) if isinstance(header, dict) else type(header).__name__
        raise WireError(f"the header must be an object with the keys {sorted(_HEADER_KEYS)}, got {keys}")
    if header["dtype"] not in DTYPES:
        raise WireError(f"header dtype must be one of {DTYPES}, got {header['dtype']!r}")
    _check_round(header["round"])
    for key, limit in (("count", MAX_REPORTS), ("pseudonyms", MAX_REPORTS * (MAX_PSEUDONYM_LENGTH * 4 + 1))):
        value = header[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
            raise WireError(f"header {key} must be an integer in [0, {limit}], got {value!r}")
    fields = header["fields"]
    if not isinstance(fields, list) or not fields:
        raise WireError("header fields must be a non-empty list")
    names = []
    for index, f in enumerate(fields):
        if not isinstance(f, dict) or set(f) != {"name", "shape"} or not isinstance(f["name"], str) or not f["name"]:
            raise WireError(f"header field {index} must be an object with a non-empty 'name' and a 'shape'")
        shape = f["shape"]
        if not isinstance(shape, list) or len(shape) > 4 or any(
            isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= MAX_REPORTS for n in shape
        ):
            raise WireError(f"header field {f['name']!r}: shape must be a list of at most 4 positive integers, "
                            f"got {shape!r}")
        if header["count"] * math.prod(shape) > MAX_REPORTS * 1000:
            raise WireError(f"header field {f['name']!r}: {header['count']} reports of shape {shape} is too large")
        names.append(f["name"])
    if len(set(names)) != len(names):
        raise WireError(f"header field names repeat: {names}")
    return header
