"""A participant's device does not take the server's word (issue 18, finding 5): it computes each report's cost from
the campaign's spec, enforces her own per-report and total ceilings, keeps her spend in its own file and reserves it
under a lock before randomizing; it refuses a forged or absurd published state; and every exception the client
raises is a ``MarginaliaError``.

The server here is a fake (``httpx.MockTransport``) that answers whatever state the test forges and counts what
reaches it; the randomizer is wrapped to count how often it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.client import Ceiling, Client, CollectionError, Device, DeviceError, MarginaliaError
from service.client.device import make_report
from service.client.spend import DEFAULT_PER_REPORT, DEFAULT_TOTAL, SpendLedger
from tests.support.paths import REPO
from workloads.local.protocols import LdpAverageSpec


def ldp_avg_state(epsilon: float = 1.0, *, name: str = "c", cap: float = 10.0, **changes: Any) -> dict[str, Any]:
    """``GET /campaigns/{name}/state`` as the server publishes it (``changes`` forge parts of it)."""
    spec = LdpAverageSpec(0.0, 1.0, epsilon)
    state = {"campaign": name, "protocol": "ldp-avg", "status": "open", "features": ["v"], "target": None,
             "spec": spec.to_json(), "transform": {"center": [0.0], "scale": [1.0], "source": "identity"},
             "epsilon": epsilon, "delta": 0.0, "round": 0, "round_epsilon": epsilon, "round_delta": 0.0,
             "state": spec.initial_state().to_json(),
             "you": {"reported_in_round": False, "epsilon_spent": 0.0, "delta_spent": 0.0, "epsilon_cap": cap,
                     "delta_cap": 1e-4}}
    state.update(changes)
    return state


class FakeServer:
    """Answers ``state()`` for every GET (after ``barrier``, if any) and counts the reports POSTed."""

    def __init__(self, state: dict[str, Any], barrier: threading.Barrier | None = None,
                 refuse_posts: bool = False) -> None:
        self.state, self.barrier, self.refuse_posts = state, barrier, refuse_posts
        self.posted: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            if self.barrier is not None:
                self.barrier.wait(timeout=30)  # every thread has the (same, stale) state before anyone posts
            return httpx.Response(200, content=json.dumps(self.state).encode(),
                                  headers={"Content-Type": "application/json"})
        if self.refuse_posts:
            raise httpx.ConnectError("the connection broke after the request went out", request=request)
        with self._lock:
            self.posted.append(json.loads(request.content))
        return httpx.Response(201, json={"accepted": 1})

    def client(self, device: Device) -> Client:
        http = httpx.Client(base_url="http://fake", transport=httpx.MockTransport(self))
        return Client("http://fake", "participant-key", http=http, device=device)


@pytest.fixture
def randomized(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many reports the LDP-AVG randomizer made (one entry per call, its batch size)."""
    calls: list[int] = []
    original: Callable[..., Any] = LdpAverageSpec.randomize

    def counting(self: LdpAverageSpec, *args: Any, **kwargs: Any) -> dict[str, np.ndarray]:
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LdpAverageSpec, "randomize", counting)
    return calls


def test_eight_concurrent_submits_under_a_total_of_2_5_send_two(tmp_path: Path, randomized: list[int]) -> None:
    """Rounds of epsilon 1, a total ceiling of 2.5: at most two are randomized and sent, whatever the threads do and
    whatever the server's stale view of her spend (it says she has spent nothing, under a cap of 2.5)."""
    server = FakeServer(ldp_avg_state(1.0, cap=2.5), barrier=threading.Barrier(8))
    device = Device(total=(2.5, 0.0), spend_file=tmp_path / "spend.json")
    client = server.client(device)

    def submit(_: int) -> str:
        try:
            client.campaign("c").submit([0.4])
        except CollectionError as error:
            return error.code
        return "sent"

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(submit, range(8)))
    assert sorted(outcomes) == ["device_total_exceeded"] * 6 + ["sent"] * 2
    assert len(server.posted) == 2 and len(randomized) == 2
    entries = device.ledger.entries()
    assert [(e["campaign"], e["round"], e["epsilon"], e["status"]) for e in entries] == [("c", 0, 1.0, "accepted")] * 2
    assert device.spent() == (2.0, 0.0) and device.remaining() == (0.5, 0.0)
    # a second device on the same file (another process of hers would be the same) sees that spend
    assert Device(total=(2.5, 0.0), spend_file=tmp_path / "spend.json").spent() == (2.0, 0.0)


def test_a_forged_epsilon_is_refused_before_randomizing(tmp_path: Path, randomized: list[int]) -> None:
    """A state whose spec says epsilon 1e9 (a "randomized" report that is her value) is refused on the device under
    the default per-report ceiling, even when the server's cap would let it through; nothing randomized, sent or
    written. A state announcing epsilon 1 while its spec calibrates to 1e9 is refused as inconsistent."""
    forged = ldp_avg_state(1e9, cap=1e12)
    server = FakeServer(forged)
    client = server.client(Device(spend_file=tmp_path / "spend.json"))
    with pytest.raises(CollectionError, match="report_ceiling_exceeded") as refused:
        client.campaign("c").submit([0.4])
    assert "epsilon 1e+09" in str(refused.value) and "per-report ceiling epsilon 10" in str(refused.value)
    server.state = {**forged, "round_epsilon": 1.0, "epsilon": 1.0}
    with pytest.raises(DeviceError, match="announces round_epsilon 1.0, its spec's round 0 spends 1000000000.0"):
        client.campaign("c").submit([0.4])
    assert server.posted == [] and randomized == [] and not (tmp_path / "spend.json").exists()
    # a gateway's batches meet the same per-report ceiling
    with pytest.raises(CollectionError, match="report_ceiling_exceeded"):
        server.state = forged
        client.campaign("c").submit_batch(np.array([[0.4], [0.6]]), None, ["a", "b"])
    assert server.posted == [] and randomized == []


def test_the_per_report_ceiling_lets_the_products_campaigns_through(tmp_path: Path, randomized: list[int]) -> None:
    """The defaults: epsilon 10 per report (the largest the product's campaigns ask) passes, 10.5 does not; her own
    lower ceiling refuses an honest campaign above it."""
    assert (DEFAULT_PER_REPORT.epsilon, DEFAULT_PER_REPORT.delta) == (10.0, 1e-4)
    assert (DEFAULT_TOTAL.epsilon, DEFAULT_TOTAL.delta) == (10.0, 1e-4)
    assert Device().check_round(ldp_avg_state(10.0)) == (10.0, 0.0)
    with pytest.raises(CollectionError, match="report_ceiling_exceeded"):
        Device().check_round(ldp_avg_state(10.5))
    with pytest.raises(CollectionError, match="per-report ceiling epsilon 2"):
        Device(per_report=Ceiling(2.0), spend_file=None).check_round(ldp_avg_state(3.0))
    assert randomized == []


@pytest.mark.parametrize(("part", "value", "message"), [
    ("scale", [0.0], "scale of feature 'v' must be a positive number"),
    ("scale", [None], "scale of feature 'v' must be a positive number"),
    ("scale", [-1.0], "scale of feature 'v' must be a positive number"),
    ("scale", [1e300], "scale of feature 'v' must be a positive number"),
    ("center", [float("nan")], "center of feature 'v' must be a finite number"),
    ("center", [float("inf")], "center of feature 'v' must be a finite number"),
    ("center", ["0"], "center of feature 'v' must be a finite number"),
    ("center", [0.0, 1.0], "center must be a list of 1 numbers"),
])
def test_an_absurd_public_transform_is_refused(tmp_path: Path, randomized: list[int], part: str, value: list[Any],
                                               message: str) -> None:
    state = ldp_avg_state(1.0)
    state["transform"] = {**state["transform"], part: value}
    server = FakeServer(state)
    with pytest.raises(DeviceError, match=message) as refused:
        server.client(Device(spend_file=tmp_path / "spend.json")).campaign("c").submit([0.4])
    assert refused.value.code == "invalid_state"
    assert server.posted == [] and randomized == [] and not (tmp_path / "spend.json").exists()


def test_an_absurd_published_round_value_is_refused() -> None:
    state = ldp_avg_state(1.0)
    state["state"] = {"round_index": 0, "values": {"theta": [1.0, 1e300]}}
    with pytest.raises(DeviceError, match="published value 'theta' exceeds 1e\\+100"):
        make_report(state, [0.4])
    state["state"] = {"round_index": 1, "values": {}}
    with pytest.raises(DeviceError, match="the published state is of round 1, the open round is 0"):
        make_report(state, [0.4])


def test_a_failed_send_keeps_its_reservation(tmp_path: Path, randomized: list[int]) -> None:
    """The connection breaks after the report went out: the spend stays on her file, marked failed, and counts."""
    server = FakeServer(ldp_avg_state(1.0), refuse_posts=True)
    device = Device(total=(1.5, 0.0), spend_file=tmp_path / "spend.json")
    with pytest.raises(MarginaliaError, match="connection_error"):
        server.client(device).campaign("c").submit([0.4])
    assert [e["status"] for e in device.ledger.entries()] == ["failed: connection_error"]
    assert device.spent() == (1.0, 0.0)
    server.refuse_posts = False
    with pytest.raises(CollectionError, match="device_total_exceeded"):
        server.client(device).campaign("c").submit([0.4])
    assert len(randomized) == 1 and server.posted == []
    saved = json.loads((tmp_path / "spend.json").read_text())
    assert saved["version"] == 1 and saved["entries"][0]["server"] == "http://fake"
    assert (tmp_path / "spend.json").stat().st_mode & 0o077 == 0  # hers alone


def test_the_ledger_counts_in_the_servers_units(tmp_path: Path) -> None:
    """Ten rounds of 0.1 fit a total of 1 (the server's rounding: decimal amounts, ceilings down, costs up); the
    eleventh does not. An in-memory ledger writes nothing."""
    for ledger in (SpendLedger(tmp_path / "spend.json"), SpendLedger(None)):
        for index in range(10):
            ledger.reserve(Ceiling(1.0), epsilon=0.1, delta=0.0, campaign="c", round=index)
        with pytest.raises(CollectionError, match="device_total_exceeded"):
            ledger.reserve(Ceiling(1.0), epsilon=0.1, delta=0.0, campaign="c", round=10)
        assert ledger.spent() == (1.0, 0.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spend.json", "spend.json.lock"]


def test_an_unreadable_spend_file_is_refused_not_reset(tmp_path: Path, randomized: list[int]) -> None:
    path = tmp_path / "spend.json"
    for text in ("{not json", '{"entries": [{"epsilon": -1, "delta": 0}]}', '{"entries": {}}'):
        path.write_text(text)
        server = FakeServer(ldp_avg_state(1.0))
        with pytest.raises(DeviceError, match="cannot be read") as refused:
            server.client(Device(spend_file=path)).campaign("c").submit([0.4])
        assert refused.value.code == "spend_file" and path.read_text() == text
        assert server.posted == [] and randomized == []


@pytest.mark.skipif(sys.platform == "win32", reason="fcntl.flock is POSIX")
def test_two_processes_of_one_participant_share_the_file_lock(tmp_path: Path) -> None:
    """Another process reserves while this one holds the spend file's lock and spends the whole ceiling: when the
    lock is released the other process must see that spend and refuse (it waited for the lock, it did not read the
    file beside it)."""
    import fcntl

    path = tmp_path / "spend.json"
    code = ("import sys; from service.client.spend import Ceiling, SpendLedger; from service.client import "
            "CollectionError\nledger = SpendLedger(sys.argv[1]); print('ready', flush=True); sys.stdin.readline()\n"
            "print('reserving', flush=True)\ntry:\n    ledger.reserve(Ceiling(1.0), epsilon=1.0, delta=0.0)\n"
            "    print('reserved')\nexcept CollectionError as error:\n    print(error.code)\n")
    other = subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=REPO, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert other.stdout is not None and other.stdin is not None
        assert other.stdout.readline().strip() == "ready"
        with open(tmp_path / "spend.json.lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            other.stdin.write("go\n")
            other.stdin.flush()
            assert other.stdout.readline().strip() == "reserving"
            path.write_text(json.dumps({"version": 1, "entries": [{"id": "x", "epsilon": 1.0, "delta": 0.0,
                                                                   "status": "accepted"}]}))
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
        out, _ = other.communicate(timeout=60)
    finally:
        if other.poll() is None:
            other.kill()
    assert out.strip() == "device_total_exceeded"


def test_the_client_raises_one_family_of_exceptions(tmp_path: Path) -> None:
    """CollectionError and DeviceError are MarginaliaErrors (DeviceError also a ValueError, as before); so are bad
    ceilings and a submit of the wrong shape."""
    assert issubclass(CollectionError, MarginaliaError) and issubclass(DeviceError, MarginaliaError)
    assert issubclass(DeviceError, ValueError)
    error = CollectionError("report_ceiling_exceeded", "no")
    assert (error.code, error.message, error.status, str(error)) == ("report_ceiling_exceeded", "no", None,
                                                                     "report_ceiling_exceeded: no")
    for bad in ({"epsilon": 0}, {"epsilon": True}, {"epsilon": float("inf")}, {"epsilon": 1, "delta": 1.0},
                {"epsilon": "1"}):
        with pytest.raises(MarginaliaError, match="ceiling (epsilon|delta)"):
            Ceiling(**bad)
    with pytest.raises(MarginaliaError, match="total must be a Ceiling"):
        Device(total=3.0)  # type: ignore[arg-type]
    server = FakeServer(ldp_avg_state(1.0))
    with pytest.raises(MarginaliaError, match="one participant's features") as refused:
        server.client(Device(spend_file=None)).campaign("c").submit([[0.4]])
    assert isinstance(refused.value, ValueError)
    with pytest.raises(MarginaliaError, match="collects no label"):
        server.client(Device(spend_file=None)).campaign("c").submit([0.4], 1.0)
    # data the randomizer refuses, after the reservation: a DeviceError, the reservation withdrawn (no report exists)
    device = Device(spend_file=tmp_path / "spend.json")
    with pytest.raises(DeviceError, match="must be finite") as refused:
        server.client(device).campaign("c").submit([float("nan")])
    assert refused.value.code == "invalid_participant_data"
    assert device.ledger.entries() == [] and server.posted == []
    server.state = {**server.state, "you": {"reported_in_round": "?"}}
    with pytest.raises(DeviceError, match="the state's 'you' cannot be read"):
        server.client(device).campaign("c").submit([0.4])


def test_simulation_and_an_unused_client_touch_no_spend_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``make_report`` (the simulator's path) takes no ceiling and writes nothing; a client that never submits never
    opens the default spend file, which is under the user's home."""
    monkeypatch.setenv("HOME", str(tmp_path))
    index, report = make_report(ldp_avg_state(1.0), np.array([[0.2], [0.7]]), rng=np.random.default_rng(0))
    assert index == 0 and report["value"].shape == (2,)
    client = FakeServer(ldp_avg_state(1.0)).client(None)  # type: ignore[arg-type]
    assert client.device.ledger.path == tmp_path / ".marginalia" / "device-spend.json"
    assert list(tmp_path.iterdir()) == []


def test_the_default_device_keeps_its_file_in_the_home_directory(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    server = FakeServer(ldp_avg_state(1.0))
    client = server.client(None)  # type: ignore[arg-type]
    client.campaign("c").submit([0.4])
    saved = json.loads((tmp_path / ".marginalia" / "device-spend.json").read_text())
    assert [(e["campaign"], e["epsilon"], e["status"]) for e in saved["entries"]] == [("c", 1.0, "accepted")]


def test_the_device_counts_in_the_server_ledgers_units() -> None:
    """The client imports no server package, so it keeps its own copy of the ledger's units: they must agree."""
    from db.models import DELTA_SCALE, EPSILON_SCALE
    from service.client import spend

    assert (spend.EPSILON_UNIT, spend.DELTA_UNIT) == (EPSILON_SCALE, DELTA_SCALE)
