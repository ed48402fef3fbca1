"""The largest JSON a schema admits, from the schema's own maxima: what a route's body limit must hold.

:func:`json_bound` walks a JSON schema (a pydantic model's, or an operation's in the OpenAPI document) and adds up
the longest compact encoding of every value it admits: a string of at most ``n`` characters is ``2 + 6n`` bytes (each
character written as a ``\\uXXXX`` escape, the longest way to write a character of the Basic Multilingual Plane; UTF-8
takes at most 4), a number :data:`~service.api.limits.JSON_NUMBER_BYTES`, a list ``maxItems`` items and their commas,
an object its properties (names as written) and at most ``maxProperties`` more. A part the schema leaves unbounded
(a string with no ``maxLength``, a list with no ``maxItems``, an ``Any`` value) makes the whole unbounded: None. The
bound counts no whitespace (clients send compact JSON; an indented body is larger).

docs/api.md's "Body limits" table is built from it and the routes' declarations (``tests/service/api/
test_body_limits.py`` checks both): a route's limit holds every body its schema admits, or says what fits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.api.limits import JSON_NUMBER_BYTES

#: Bytes of one character at most, as a \\uXXXX escape.
JSON_CHAR_BYTES = 6
_SCALARS = {"number": JSON_NUMBER_BYTES, "integer": JSON_NUMBER_BYTES, "boolean": len("false"), "null": len("null")}


def json_bound(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> int | None:
    """The most bytes of a compact JSON value valid under ``schema`` (``$ref``s resolved in ``root``, by default
    ``schema`` itself), or None when the schema leaves some part unbounded."""
    return _bound(schema, root if root is not None else schema)


def _text(max_length: int | None) -> int | None:
    return None if max_length is None else 2 + JSON_CHAR_BYTES * max_length


def _resolve(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def _largest(bounds: list[int | None]) -> int | None:
    return None if any(b is None for b in bounds) else max(bounds, default=0)  # type: ignore[type-var]


def _bound(schema: Mapping[str, Any], root: Mapping[str, Any]) -> int | None:
    if "$ref" in schema:
        return _bound(_resolve(schema["$ref"], root), root)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _largest([_bound(option, root) for option in schema[key]])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _bound(schema["allOf"][0], root)
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return max(len(str(v)) * JSON_CHAR_BYTES + 2 for v in values)
    kind = schema.get("type")
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "string":
        return _text(schema.get("maxLength"))
    if kind == "array":
        return _array(schema, root)
    if kind == "object":
        return _object(schema, root)
    return None  # any value


def _array(schema: Mapping[str, Any], root: Mapping[str, Any]) -> int | None:
    if "prefixItems" in schema and schema.get("items") is False:
        parts = [_bound(item, root) for item in schema["prefixItems"]]
        return None if None in parts else 2 + sum(p + 1 for p in parts)  # type: ignore[operator]
    item, count = _bound(schema.get("items", {}), root), schema.get("maxItems")
    return None if item is None or count is None else 2 + count * (item + 1)


def _object(schema: Mapping[str, Any], root: Mapping[str, Any]) -> int | None:
    total = 2
    for name, value in schema.get("properties", {}).items():
        part = _bound(value, root)
        if part is None:
            return None
        total += len(name) + 3 + part + 1  # "name": value,
    extra = schema.get("additionalProperties", False)
    if extra is False:
        return total
    count = schema.get("maxProperties")
    key = _text(schema.get("propertyNames", {}).get("maxLength"))
    value = _bound(extra, root) if isinstance(extra, Mapping) else None
    if count is None or key is None or value is None:
        return None
    return total + count * (key + 1 + value + 1)
