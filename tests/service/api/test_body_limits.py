"""Per-route body limits, read while the body streams in, and parsing off the event loop (issue 18, finding 8): an
86 MB body from one participant was read whole and parsed on the loop, stalling ``GET /health``. The app is driven
through raw ASGI here, so the test sees how much of a body the server pulled (the test client reads bodies whole)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from sqlalchemy import Engine, text

from service.access import auth
from service.api import create_app, limits, routes_campaigns
from service.campaigns import campaigns, gateways
from service.client.device import make_report
from workloads.local.wire import MEDIA_TYPE, decode_batch, encode_batch

CHUNK = 64 * 1024


class Body:
    """An ASGI ``receive`` over a lazily made body; counts the bytes the app pulled."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks, self.consumed = chunks, 0

    async def __call__(self) -> dict[str, object]:
        chunk = next(self.chunks, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        self.consumed += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}


def flood(total: int) -> Iterator[bytes]:
    """``total`` bytes of a JSON-looking body, made as it is pulled."""
    yield b'{"round": 0, "report": {"value": ['
    for _ in range(total // CHUNK):
        yield b"0," * (CHUNK // 2)


def whole(body: bytes) -> Iterator[bytes]:
    for start in range(0, len(body), CHUNK):
        yield body[start:start + CHUNK]


async def call(app, method: str, path: str, key: str | None, body: Body, kind: str = "application/json",  # noqa: ANN001
               length: int | None = None) -> tuple[int, dict[str, object]]:
    headers = [(b"host", b"testserver"), (b"content-type", kind.encode())]
    if key is not None:
        headers.append((b"authorization", f"Bearer {key}".encode()))
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 1), "server": ("testserver", 80)}
    sent: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    await app(scope, body, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return int(status), json.loads(payload)


def _key(engine: Engine, role: str) -> tuple[int, str]:
    info, token = auth.create_key(engine, role, role)
    return info.id, token


@pytest.fixture
def avg(engine: Engine) -> campaigns.CampaignInfo:
    return campaigns.create_campaign(engine, "avg", "ldp-avg", "v", None, None, 1, 0, {"lower": 0, "upper": 1})


def _reports(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT COUNT(*) FROM reports")).scalar_one())


def test_a_participants_huge_body_is_413_after_its_first_chunk(engine: Engine, avg) -> None:  # noqa: ANN001
    """One ldp-avg report is one number: its bound is 4 KiB + 32 bytes; 16 MB streamed are refused at the first
    chunk past it, and a declared Content-Length over it before any byte is read."""
    app = create_app(engine)
    _, participant = _key(engine, "participant")
    body = Body(flood(16 * 2**20))
    status, answer = asyncio.run(call(app, "POST", "/campaigns/avg/reports", participant, body))
    assert (status, answer["error"]) == (413, "payload_too_large"), answer
    limit = limits.participant_limit(1)
    assert f"over the limit of {limit:,} bytes for one participant's report" in answer["message"]
    assert body.consumed <= limit + CHUNK
    declared = Body(flood(16 * 2**20))
    status, answer = asyncio.run(call(app, "POST", "/campaigns/avg/reports", participant, declared,
                                      length=16 * 2**20))
    assert status == 413 and "Content-Length 16,777,216" in answer["message"] and declared.consumed == 0
    assert _reports(engine) == 0


def test_a_gateways_batch_has_a_stated_bound(engine: Engine, avg) -> None:  # noqa: ANN001
    """A JSON batch of one-number reports: at most 10,000 reports, so 4 KiB + 10,000 x (32 + 1,204) bytes."""
    app = create_app(engine)
    gateway, token = _key(engine, "gateway")
    gateways.set_scope(engine, gateway, "avg", 1000)
    body = Body(flood(40 * 2**20))
    status, answer = asyncio.run(call(app, "POST", "/campaigns/avg/reports", token, body))
    limit = limits.batch_limit(1, False, routes_campaigns.MAX_JSON_REPORTS, 96 * 2**20)
    assert (status, answer["error"]) == (413, "payload_too_large") and limit == 4096 + 10_000 * 1236
    assert f"{limit:,} bytes for a gateway's batch" in answer["message"] and body.consumed <= limit + CHUNK
    assert _reports(engine) == 0


def test_a_gateway_outside_its_scope_is_refused_before_its_body_is_read(engine: Engine, avg) -> None:  # noqa: ANN001
    app = create_app(engine)
    gateway, token = _key(engine, "gateway")
    body = Body(flood(2**20))
    status, answer = asyncio.run(call(app, "POST", "/campaigns/avg/reports", token, body))
    assert (status, answer["error"]) == (403, "campaign_out_of_scope") and body.consumed == 0
    assert f"gateway key {gateway} may not submit to campaign 'avg'" in answer["message"]


def test_health_is_answered_while_a_large_batch_is_parsed(engine: Engine, avg,  # noqa: ANN001
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch's decoding waits until /health has been answered: it can only be, if the decoding runs in a worker
    thread and leaves the event loop free (on the loop, /health would wait for it: the wait gives up, recorded)."""
    app = create_app(engine)
    gateway, token = _key(engine, "gateway")
    gateways.set_scope(engine, gateway, "avg", 20_000)
    state = campaigns.public_state(campaigns.get_campaign(engine, "avg"))
    index, fields = make_report(state, np.random.default_rng(0).random((20_000, 1)))
    batch = encode_batch(fields, index, [f"p{i}" for i in range(20_000)])
    started, answered, seen = threading.Event(), threading.Event(), {}

    def decoding(body: bytes):  # noqa: ANN202
        seen["thread"] = threading.current_thread()
        started.set()
        seen["health_answered_first"] = answered.wait(timeout=20)
        return decode_batch(body)

    monkeypatch.setattr(routes_campaigns, "decode_batch", decoding)

    async def scenario() -> tuple[tuple[int, dict], tuple[int, dict]]:
        submit = asyncio.create_task(call(app, "POST", "/campaigns/avg/reports", token, Body(whole(batch)),
                                          MEDIA_TYPE))
        await asyncio.to_thread(started.wait, 20)
        health = await call(app, "GET", "/health", None, Body(iter(())))
        answered.set()
        return health, await submit

    (health_status, health), (status, answer) = asyncio.run(scenario())
    assert health_status == 200 and health["status"] == "ok"
    assert seen["health_answered_first"] and seen["thread"] is not threading.main_thread()
    assert status == 201 and answer["accepted"] == 20_000, answer
    assert _reports(engine) == 20_000
