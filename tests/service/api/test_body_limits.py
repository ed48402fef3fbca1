"""Bodies are read only after the key and the role are checked, within each route's own limit, and large ones are
parsed off the event loop (issue 27, finding 3: with no key, a 94 MB body to ``POST /datasets`` was parsed for 5 s
before the 401, stalling ``GET /health``; issue 18, finding 8: an 86 MB report from one participant). The app is
driven through raw ASGI here, so the test sees how much of a body the server pulled (the test client reads bodies
whole). The routes, their roles and their limits come from the OpenAPI document and the role table, so a new route
is checked without being listed here.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel
from sqlalchemy import Engine, text

from service.access import auth
from service.api import create_app, guard, limits, routes_campaigns
from service.api.guard import GuardedRoute
from service.api.schema_size import json_bound
from service.campaigns import campaigns, gateways
from service.client.device import make_report
from tests.support.paths import REPO
from tests.support.roles import CALLERS, ROLE_TABLE
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


def _key(engine: Engine, role: str, datasets: list[str] | None = None) -> tuple[int, str]:
    info, token = auth.create_key(engine, role, f"{role} {datasets or ''}", datasets)
    return info.id, token


DOCUMENT = create_app(None).openapi()  # type: ignore[arg-type]  # the document touches no database


def operations_with_a_body() -> list[tuple[str, str, dict[str, object]]]:
    """(method, path template, operation) of every operation of the OpenAPI document that takes a body."""
    return [(method.upper(), path, operation) for path, operations in DOCUMENT["paths"].items()
            for method, operation in operations.items() if "requestBody" in operation]


def concrete(path: str, operation: dict[str, object]) -> str:
    """A URL of ``path``: an id parameter 1 (a round 0), a name ``x`` (the body is refused before either is read)."""
    for parameter in operation.get("parameters", []):  # type: ignore[union-attr]
        if parameter["in"] == "path":
            schema = parameter["schema"]
            value = str(schema.get("minimum", 1)) if schema.get("type") == "integer" else "x"
            path = path.replace("{" + parameter["name"] + "}", value)
    return path


def refused_callers(method: str, path: str) -> list[str]:
    """The keys the role table refuses on the route with a 403 that depends on the key alone: any role it does not
    admit, and a scoped steward where the refusal is not about a dataset (outside /datasets and /releases)."""
    statuses = dict(zip(CALLERS, ROLE_TABLE[(method, path)], strict=True))
    roles = ["steward", "analyst", "auditor", "participant", "gateway"]
    if not path.startswith(("/datasets", "/releases")):
        roles.append("scoped_steward")
    return [caller for caller in roles if statuses[caller] == 403]


def admitted_caller(method: str, path: str) -> str:
    statuses = dict(zip(CALLERS, ROLE_TABLE[(method, path)], strict=True))
    return next(c for c in ("steward", "analyst", "participant", "gateway") if statuses[c] < 400)


def caller_key(engine: Engine, caller: str) -> str:
    if caller == "scoped_steward":
        return _key(engine, "steward", ["another dataset"])[1]
    return _key(engine, caller)[1]


def limit_of(operation: dict[str, object]) -> int:
    return int(operation[limits.BODY_LIMIT_KEY]["bytes"])  # type: ignore[index]


def test_every_route_is_guarded_and_every_body_has_a_limit() -> None:
    """Every API route of the app is a GuardedRoute (so no router was added without the guard), and every operation
    with a body declares its limit beside it."""
    routes = [context.original_route for context in iter_route_contexts(create_app(None).routes)]  # type: ignore[arg-type]
    api_routes = [route for route in routes if isinstance(route, APIRoute)]
    assert api_routes and all(isinstance(route, GuardedRoute) for route in api_routes)
    assert all(limits.BODY_LIMIT_KEY in operation for _, _, operation in operations_with_a_body())


class Thing(BaseModel):
    name: str


def test_a_route_with_a_body_and_no_limit_is_refused_when_built() -> None:
    router = APIRouter(route_class=GuardedRoute)
    with pytest.raises(TypeError, match="takes a body but declares no limit"):
        @router.post("/things")
        def add(thing: Thing) -> None: ...  # pragma: no cover - never built


def test_no_key_is_401_before_a_byte_of_the_body_is_read(engine: Engine) -> None:
    """Every route that takes a body, with no key, an unknown key and a revoked one: 401 as before (``WWW-Authenticate:
    Bearer``), having pulled nothing of a 16 MB body (FastAPI used to read and parse it all first)."""
    app = create_app(engine)
    info, revoked = auth.create_key(engine, "analyst", "revoked")
    auth.revoke_key(engine, info.id)
    for method, path, operation in operations_with_a_body():
        for key in (None, "mgl_not_a_key", revoked):
            body = Body(flood(16 * 2**20))
            status, answer = asyncio.run(call(app, method, concrete(path, operation), key, body))
            assert (status, answer["error"], body.consumed) == (401, "unauthorized", 0), (method, path, answer)


def test_a_refused_role_is_403_before_a_byte_of_the_body_is_read(engine: Engine) -> None:
    """Every key the role table refuses on a route with a body (an analyst on a steward's upload, a steward on the
    report route, a scoped steward on public tables, ...): 403 ``forbidden`` with nothing of the body pulled."""
    app = create_app(engine)
    checked = 0
    for method, path, operation in operations_with_a_body():
        for caller in refused_callers(method, path):
            body = Body(flood(16 * 2**20))
            status, answer = asyncio.run(call(app, method, concrete(path, operation), caller_key(engine, caller),
                                              body))
            assert (status, answer["error"], body.consumed) == (403, "forbidden", 0), (method, path, caller, answer)
            checked += 1
    assert checked > 50


def test_a_body_over_its_routes_limit_is_413_before_it_is_parsed(engine: Engine) -> None:
    """Every route's own limit (from the document), for a key it admits: a declared Content-Length over it is 413
    before a byte is read; a streamed body is abandoned at the first chunk past it, so it is never parsed. The report
    route bounds its body itself (the tests above) once the campaign is known."""
    app = create_app(engine)
    for method, path, operation in operations_with_a_body():
        if path == "/campaigns/{name}/reports":
            continue
        key, url, limit = caller_key(engine, admitted_caller(method, path)), concrete(path, operation), \
            limit_of(operation)
        declared = Body(flood(limit + CHUNK))
        status, answer = asyncio.run(call(app, method, url, key, declared, length=limit + 1))
        assert (status, answer["error"], declared.consumed) == (413, "payload_too_large", 0), (method, path, answer)
        assert f"over the limit of {limit:,} bytes for {method} {url}" in answer["message"]
        streamed = Body(flood(limit + 2 * CHUNK))
        status, answer = asyncio.run(call(app, method, url, key, streamed))
        assert (status, answer["error"]) == (413, "payload_too_large"), (method, path, answer)
        assert streamed.consumed <= limit + CHUNK, (method, path, streamed.consumed)


def test_the_app_wide_ceiling_caps_every_route(engine: Engine) -> None:
    """``create_app(max_body_bytes=...)`` lowers every route's limit to it (the uploads' limit is the ceiling)."""
    app = create_app(engine, max_body_bytes=100_000)
    _, steward = _key(engine, "steward")
    for path, hint in (("/datasets", "`marginalia dataset load`"), ("/datasets/x/releases/marginals", "")):
        body = Body(flood(2**20))
        status, answer = asyncio.run(call(app, "POST", path, steward, body))
        assert (status, answer["error"]) == (413, "payload_too_large") and body.consumed <= 100_000 + CHUNK
        assert "limit of 100,000 bytes" in answer["message"] and hint in answer["message"]


def test_the_key_is_looked_up_once(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard hands its principal to the route's dependency: one database look-up per request."""
    _, steward = _key(engine, "steward")
    calls = []
    lookup = auth.lookup_key

    def counting(*args: object) -> object:
        calls.append(args)
        return lookup(*args)

    monkeypatch.setattr(auth, "lookup_key", counting)
    status, _ = asyncio.run(call(create_app(engine), "PUT", "/local-caps/default", steward,
                                 Body(whole(json.dumps({"epsilon": 1.0, "delta": 0.0}).encode()))))
    assert status == 200 and len(calls) == 1


def test_a_large_upload_is_parsed_off_the_event_loop(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A steward's upload past 64 KiB is decoded and validated in a worker thread: its decoding (``json.loads`` of the
    body) waits until /health has been answered, which it can be only if the event loop is free (on the loop, as
    FastAPI decodes a body, the wait gives up after 20 s, recorded)."""
    app = create_app(engine)
    _, steward = _key(engine, "steward")
    csv = "a,b\n" + "".join(f"{i % 3},{i % 2}\n" for i in range(40_000))
    upload = json.dumps({"name": "big", "csv": csv, "domain": {"a": 3, "b": 2}}).encode()
    assert len(upload) > guard.INLINE_PARSE_BYTES
    started, answered, seen = threading.Event(), threading.Event(), {}
    loads = json.loads

    def decoding(raw, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if len(raw) == len(upload):
            seen["thread"] = threading.current_thread()
            started.set()
            seen["health_answered_first"] = answered.wait(timeout=20)
        return loads(raw, *args, **kwargs)

    monkeypatch.setattr(json, "loads", decoding)

    async def scenario() -> tuple[tuple[int, dict], tuple[int, dict]]:
        load = asyncio.create_task(call(app, "POST", "/datasets", steward, Body(whole(upload))))
        await asyncio.to_thread(started.wait, 20)
        health = await call(app, "GET", "/health", None, Body(iter(())))
        answered.set()
        return health, await load

    (health_status, _), (status, answer) = asyncio.run(scenario())
    assert health_status == 200 and seen["health_answered_first"] and seen["thread"] is not threading.main_thread()
    assert status == 201 and answer["rows"] == 40_000, answer


@pytest.mark.parametrize("body, status, code", [
    (b'{"name": "big", "csv": "a\\n0\\n", "domain": {"a": 1}' + b" " * 70_000, 400, "malformed_json"),
    (b'{"name": "big", "csv": "a\\n0\\n", "domain": {"a": 1}, "extra": "' + b"x" * 70_000 + b'"}', 422,
     "invalid_request"),
    (b'{"name": "\xff", "csv": "' + b"x" * 70_000 + b'"}', 400, "malformed_json"),
])
def test_a_large_body_is_refused_off_the_loop_as_on_it(engine: Engine, body: bytes, status: int, code: str) -> None:
    """A body parsed in the worker thread is refused with FastAPI's own answers: 400 ``malformed_json``, 422
    ``invalid_request`` naming the field (``body.extra``); a body that is not UTF-8 is malformed JSON too."""
    _, steward = _key(engine, "steward")
    got, answer = asyncio.run(call(create_app(engine), "POST", "/datasets", steward, Body(whole(body))))
    assert (got, answer["error"]) == (status, code), answer
    if code == "invalid_request":
        assert answer["fields"] == ["body.extra"]


def render_limits_table() -> str:
    """docs/api.md's "Body limits" table, from the document: each route's limit, the largest body its schema admits
    (:func:`service.api.schema_size.json_bound`) and what fits when that is more than the limit."""
    lines = ["| route | limit | largest body the schema admits | what fits |", "|---|---|---|---|"]
    for method, path, operation in operations_with_a_body():
        declared = operation[limits.BODY_LIMIT_KEY]
        schema = operation["requestBody"]["content"]["application/json"]["schema"]  # type: ignore[index]
        bound = json_bound(schema, DOCUMENT)
        largest = "unbounded" if bound is None else f"{bound:,} bytes"
        lines.append(f"| `{method} {path}` | {_size(limit_of(operation))} | {largest} | "
                     f"{declared.get('fits', 'every body the schema admits')} |")  # type: ignore[union-attr]
    return "\n".join(lines)


def _size(count: int) -> str:
    return f"{count // limits.MiB} MiB" if count % limits.MiB == 0 else f"{count // limits.KiB} KiB"


def test_a_limit_holds_every_body_its_schema_admits_or_says_what_fits() -> None:
    for method, path, operation in operations_with_a_body():
        schema = operation["requestBody"]["content"]["application/json"]["schema"]  # type: ignore[index]
        bound, fits = json_bound(schema, DOCUMENT), operation[limits.BODY_LIMIT_KEY].get("fits")  # type: ignore[union-attr]
        holds = bound is not None and bound <= limit_of(operation)
        assert holds == (fits is None), (method, path, bound, fits)


def test_docs_show_the_body_limits() -> None:
    assert render_limits_table() in (REPO / "docs" / "api.md").read_text(), render_limits_table()


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


def _compact(value: object, ascii_only: bool = False) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only).encode())


def test_what_a_limit_says_fits_fits() -> None:
    """The bodies each ``fits`` describes, built at their largest, are within the route's limit."""
    name = "n" * 200
    workload = [{"attributes": [f"{i:04d}{j}{name}"[:200] for j in range(8)], "weight": 1e6} for i in range(5000)]
    release = {"mechanism": "laplace", "workload": workload, "epsilon": 1.0}
    fit = {"target": name, "features": [f"{i:05d}{name}"[:200] for i in range(10_000)], "method": "dd-ssp",
           "epsilon": 1.0, "delta": 1e-6}
    spec = {"columns": {f"{i:04d}{name}"[:200]: {"kind": "categorical", "values": [f"{j:03d}" + "v" * 27
                                                                                   for j in range(200)]}
                        for i in range(1000)}}
    attach = {"name": name, "source": name, "parquet": [f"{i:04d}/" + "p" * 995 for i in range(1000)], "bins": spec}
    wide = "\u00e9" * 200  # written as \u00e9 escapes: 6 bytes a character
    features = [f"{i:02d}{wide}"[:200] for i in range(64)]
    campaign = {"name": wide, "protocol": "stein-glm", "features": features, "target": wide, "public": wide,
                "epsilon": 1000.0, "delta": 0.5, "participants": 2**53, "target_error": 1e-300,
                "options": {"feature_bounds": {f: [-1.7976931348623157e308, 1.7976931348623157e308] for f in features},
                            **{f"option_{i:02d}_{'x' * 30}": -2.2250738585072014e-308 for i in range(49)}}}
    for (method, path), body, ascii_only in [(("POST", "/datasets/{name}/releases/marginals"), release, False),
                                             (("POST", "/datasets/{name}/fit/linear"), fit, False),
                                             (("POST", "/datasets/attach"), attach, False),
                                             (("POST", "/campaigns/plan"), campaign, True)]:
        operation = DOCUMENT["paths"][path][method.lower()]
        assert _compact(body, ascii_only) <= limit_of(operation), (method, path, _compact(body, ascii_only))
