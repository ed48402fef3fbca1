"""Per-route bounds on request bodies, enforced while the body streams in (issue 18, finding 8).

The app-wide :class:`~service.api.errors.BodyLimit` (96 MiB, for table uploads) let one participant's 86 MB body be
read, decoded and parsed on the event loop, stalling ``GET /health`` for seconds. The report route now bounds its
body by who sends it and by the campaign's widest open round (``width`` numbers per report, from its report
schema), before reading a byte of it:

* a participant's one JSON report: :data:`REPORT_OVERHEAD_BYTES` + ``width`` x :data:`JSON_NUMBER_BYTES`
  (4 KiB + 32 bytes per number: a few KB for every protocol);
* a gateway's binary batch: :data:`BATCH_HEADER_BYTES` + :data:`MAX_BATCH_REPORTS` x (8 ``width`` +
  :data:`PSEUDONYM_BYTES`), a JSON batch :data:`REPORT_OVERHEAD_BYTES` + ``MAX_JSON_REPORTS`` x (``width`` x
  :data:`JSON_NUMBER_BYTES` + :data:`JSON_PSEUDONYM_BYTES`); both never above the app-wide limit.

:func:`read_body` stops reading at the first chunk past the bound and answers 413 ``payload_too_large`` (a declared
``Content-Length`` over it is refused before anything is read).
"""

from __future__ import annotations

from fastapi import Request

from service.errors import ServiceError

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


async def read_body(request: Request, limit: int, what: str) -> bytes:
    """The request's body, read chunk by chunk and abandoned at the first chunk past ``limit`` bytes (413)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit, what, int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit, what, None)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int, what: str, declared: int | None) -> PayloadTooLarge:
    sent = f" (Content-Length {declared:,})" if declared is not None else ""
    return PayloadTooLarge(f"the request body{sent} is over the limit of {limit:,} bytes for {what}; the rest of "
                           "it was not read")
