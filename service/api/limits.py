"""Bounds on request bodies: every route's own, declared beside it, and the report route's, computed per request.

Every route that takes a body declares its limit in its decorator, ``openapi_extra=limits.body(...)``, which puts it
in the OpenAPI document (``x-body-limit``: ``bytes``, and ``fits``, what fits, where that is less than the route's
schema admits); :class:`~service.api.guard.GuardedRoute` refuses to build a route with a body and no limit, and
enforces it, never above the app-wide ceiling (``create_app(max_body_bytes=...)``, default
:data:`DEFAULT_MAX_BODY_BYTES`). The sizes come from the schemas' own maxima (:mod:`service.api.schema_size`;
docs/api.md, "Body limits"): most bodies are a few fields (:data:`SMALL_BODY`) or name some columns
(:data:`NAMES_BODY`); a fit names up to 10,000 features (:data:`FIT_BODY`); a release's workload and an attach's
binning spec are long lists (:data:`SPEC_BODY`); only a steward's table upload needs the ceiling (:data:`UPLOAD_BODY`).

The report route (issue 18, finding 8) also bounds its body by who sends it and by the campaign's widest open round
(``width`` numbers per report, from its report schema), before reading a byte of it:

* a participant's one JSON report: :data:`REPORT_OVERHEAD_BYTES` + ``width`` x :data:`JSON_NUMBER_BYTES`
  (4 KiB + 32 bytes per number: a few KB for every protocol);
* a gateway's binary batch: :data:`BATCH_HEADER_BYTES` + :data:`MAX_BATCH_REPORTS` x (8 ``width`` +
  :data:`PSEUDONYM_BYTES`), a JSON batch :data:`REPORT_OVERHEAD_BYTES` + ``MAX_JSON_REPORTS`` x (``width`` x
  :data:`JSON_NUMBER_BYTES` + :data:`JSON_PSEUDONYM_BYTES`); both never above the app-wide limit.

One reader enforces every bound, :func:`within`: a declared ``Content-Length`` over the limit is refused before
anything is read, and the body is abandoned at the first chunk past it (413 ``payload_too_large``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from service.errors import ServiceError

KiB, MiB = 2**10, 2**20
#: The app-wide ceiling: no route reads more (``marginalia serve --max-body-bytes`` may lower or raise it).
DEFAULT_MAX_BODY_BYTES = 96 * MiB
#: A body of a few fields: a budget, a migration, a synthetic sample's size, a campaign fit, a local cap (their
#: schemas admit at most 1.4 KB).
SMALL_BODY = 64 * KiB
#: A body naming columns: a marginal (64 attributes: at most 77 KB), a campaign or its plan (64 features and their
#: ``feature_bounds``: about 170 KB with 200-character names in any encoding).
NAMES_BODY = 256 * KiB
#: A regression fit: up to 10,000 features (the most columns a table has) of 200 characters, written in ASCII.
FIT_BODY = 2 * MiB
#: A long list: a release's workload (5,000 marginals) or an attach's binning spec and Parquet paths.
SPEC_BODY = 8 * MiB
#: A table upload (CSV text): the app-wide ceiling.
UPLOAD_BODY = DEFAULT_MAX_BODY_BYTES
#: What fits in an upload, and what to do with a larger table.
UPLOAD_FITS = "a table of up to 64 Mi characters of CSV (the schema's maximum) with its domain or binning spec"
UPLOAD_HINT = "load larger tables on the server with `marginalia dataset load`, which streams the file"
#: The OpenAPI extension that carries a route's limit.
BODY_LIMIT_KEY = "x-body-limit"

#: JSON characters of one number at most: the longest float repr ("-2.2250738585072014e-308", 24) and a separator.
JSON_NUMBER_BYTES = 32
#: What surrounds a report's numbers in JSON: braces, brackets, field names (40 characters at most), "round".
REPORT_OVERHEAD_BYTES = 4096
#: A binary batch's prefix and JSON header (workloads/local/wire.py: MAX_HEADER_BYTES) and a little slack.
BATCH_HEADER_BYTES = 2**20 + 64
#: Reports in one binary batch at most (the client sends 50,000 per request: service/client/collections.py).
MAX_BATCH_REPORTS = 100_000
#: A pseudonym in a binary batch: 200 UTF-8 characters at most, 4 bytes each, and its newline.
PSEUDONYM_BYTES = 801
#: A pseudonym in a JSON batch: 200 characters written as \uXXXX escapes, quotes and a comma.
JSON_PSEUDONYM_BYTES = 1204


class PayloadTooLarge(ServiceError):
    code = "payload_too_large"
    status = 413


@dataclass(frozen=True)
class DeclaredLimit:
    """A route's declared bound: ``bytes``; ``fits``, what fits when that is less than the route's schema admits;
    ``hint``, what to do instead (said in the 413)."""

    bytes: int
    fits: str | None = None
    hint: str | None = None

    def to_json(self) -> dict[str, object]:
        return {k: v for k, v in {"bytes": self.bytes, "fits": self.fits, "hint": self.hint}.items() if v is not None}


def body(max_bytes: int, *, fits: str | None = None, hint: str | None = None,
         **openapi_extra: Any) -> dict[str, Any]:
    """A route's ``openapi_extra`` declaring its body limit (with the route's other ``openapi_extra``, if any)."""
    return {**openapi_extra, BODY_LIMIT_KEY: DeclaredLimit(max_bytes, fits, hint).to_json()}


def declared(openapi_extra: dict[str, Any] | None) -> DeclaredLimit | None:
    """The body limit a route declared with :func:`body`, or None."""
    found = (openapi_extra or {}).get(BODY_LIMIT_KEY)
    return None if found is None else DeclaredLimit(**found)


def participant_limit(width: int) -> int:
    """Bytes of one participant's JSON report of ``width`` numbers."""
    return REPORT_OVERHEAD_BYTES + JSON_NUMBER_BYTES * width


def batch_limit(width: int, binary: bool, max_json_reports: int, ceiling: int) -> int:
    """Bytes of a gateway's batch of reports of ``width`` numbers (binary or JSON), at most ``ceiling``."""
    if binary:
        bound = BATCH_HEADER_BYTES + MAX_BATCH_REPORTS * (8 * width + PSEUDONYM_BYTES)
    else:
        bound = REPORT_OVERHEAD_BYTES + max_json_reports * (JSON_NUMBER_BYTES * width + JSON_PSEUDONYM_BYTES)
    return min(bound, ceiling)


async def within(request: Request, chunks: AsyncIterator[bytes], limit: int, what: str,
                 hint: str | None = None) -> AsyncIterator[bytes]:
    """``chunks`` (the request's body) while they stay within ``limit`` bytes: 413 before the first one when the
    declared ``Content-Length`` is over it, and at the first chunk past it (the rest is never read)."""
    declared_length = _content_length(request)
    if declared_length is not None and declared_length > limit:
        raise _too_large(limit, what, declared_length, hint)
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise _too_large(limit, what, None, hint)
        yield chunk


async def read_body(request: Request, limit: int, what: str) -> bytes:
    """The request's body, read chunk by chunk and abandoned at the first chunk past ``limit`` bytes (413)."""
    return b"".join([chunk async for chunk in within(request, request.stream(), limit, what)])


def _content_length(request: Request) -> int | None:
    """The declared ``Content-Length`` (ASCII digits; more than 18 of them read as 10^18, over any limit)."""
    text = request.headers.get("content-length")
    if text is None or not (text.isascii() and text.isdigit()):
        return None
    return int(text) if len(text) <= 18 else 10**18


def _too_large(limit: int, what: str, declared_length: int | None, hint: str | None) -> PayloadTooLarge:
    sent = f" (Content-Length {declared_length:,})" if declared_length is not None else ""
    then = f"; {hint}" if hint else ""
    return PayloadTooLarge(f"the request body{sent} is over the limit of {limit:,} bytes for {what}; the rest of "
                           f"it was not read{then}")
