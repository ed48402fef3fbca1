"""A participant's own privacy filter, kept on her device: her ceilings and her spend file.

The server publishes each campaign's (epsilon, delta) and keeps a cap per participant, but in the local model the
server is the adversary: a forged state could announce any epsilon (at epsilon 1e9 the "randomized" report is her
value), and the server's cap is only as good as the server. So the device decides for itself
(docs/privacy.md 8.7.5, "The device's own filter"; docs/campaigns.md, "Your ceilings"):

* a **per-report ceiling** (:attr:`Device.per_report`): no single report may spend more than this (epsilon, delta);
* a **total ceiling** (:attr:`Device.total`): the sum of what every report this device has randomized for her
  spends, over every campaign and server, may not pass this (epsilon, delta). Basic composition as a privacy filter
  (Rogers, Roth, Ullman & Vadhan 2016): whatever the server does, everything the device ever sends is
  (total epsilon, total delta)-DP for her;
* a **spend file** (:class:`SpendLedger`): one JSON entry per randomized report (server, campaign, round, protocol,
  epsilon, delta, time, status), by default ``~/.marginalia/device-spend.json``; ``spend_file=None`` keeps it in
  memory (it is then forgotten when the process ends: the total ceiling holds for that process only).

What one report spends is computed here from the campaign's spec (:func:`service.client.device.round_cost`: the
parameters the randomizer is calibrated to), never taken from the server's word. The check and the reservation happen
under a lock, **before** anything is randomized: a ``threading.Lock`` per spend file and an exclusive ``fcntl.flock``
on ``<spend file>.lock`` (POSIX), so two threads or two processes of one participant cannot both pass the ceiling on
the same old spend. A reservation stays on the ledger even if sending then fails: the report may have left the device
(a connection that breaks after the request went out), so it is counted as spent; its ``status`` says what the device
knows (``reserved``, ``accepted``, ``failed: <code>``).

Amounts are compared in the server's ledger units (epsilon in 1e-12, delta in 1e-18; each report's cost read from its
decimal representation and rounded **up**, the ceilings rounded **down**), so the device and an honest server agree on
every boundary (ten reports of 0.1 fit a ceiling of 1).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from service.client.device import open_round, participant_data, randomize, round_cost
from service.client.errors import CollectionError, DeviceError
from workloads.local.protocols import ProtocolSpec, RoundState
from workloads.parameters import check_positive, check_probability

try:  # POSIX; elsewhere the spend file is guarded within one process only (docs/campaigns.md says so)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["DEFAULT_PER_REPORT", "DEFAULT_SPEND_FILE", "DEFAULT_TOTAL", "Ceiling", "Device", "Reservation",
           "SpendLedger"]

EPSILON_UNIT = 10**12  # the server's units (db.models.EPSILON_SCALE, DELTA_SCALE); the client imports no server
DELTA_UNIT = 10**18


@dataclass(frozen=True)
class Ceiling:
    """An (epsilon, delta) the device will not pass: epsilon a positive finite number, delta in [0, 1)."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("ceiling epsilon", self.epsilon, error=DeviceError))
        object.__setattr__(self, "delta", check_probability("ceiling delta", self.delta, error=DeviceError,
                                                            allow_zero=True))

    @classmethod
    def of(cls, value: Ceiling | tuple[float, float] | Mapping[str, float], name: str) -> Ceiling:
        """A ceiling from a :class:`Ceiling`, a pair ``(epsilon, delta)`` or ``{"epsilon", "delta"}``."""
        if isinstance(value, Ceiling):
            return value
        if isinstance(value, Mapping):
            return cls(value.get("epsilon"), value.get("delta", 0.0))  # type: ignore[arg-type]
        if isinstance(value, tuple | list) and len(value) == 2:
            return cls(*value)
        raise DeviceError(f"{name} must be a Ceiling, a pair (epsilon, delta) or a mapping, got {value!r}")

    def units(self) -> tuple[int, int]:
        """(epsilon, delta) in ledger units, rounded down."""
        return math.floor(_decimal(self.epsilon) * EPSILON_UNIT), math.floor(_decimal(self.delta) * DELTA_UNIT)


#: No single report above this: the largest a campaign of this product asks (the Stein-GLM experiments go up to
#: epsilon 10; the demo's campaign is epsilon 8, delta 1e-6), and the server's own default cap (docs/privacy.md 8.7.5).
DEFAULT_PER_REPORT = Ceiling(10.0, 1e-4)
#: No more than this in all, over every campaign and server: the server's default cap, so a device at its defaults
#: lets out exactly what an honest server at its defaults would accept, and not a report more if the server lies.
DEFAULT_TOTAL = Ceiling(10.0, 1e-4)
#: Where the spend file lives unless the participant says otherwise (``~`` is her home directory).
DEFAULT_SPEND_FILE = Path("~") / ".marginalia" / "device-spend.json"


@dataclass(frozen=True)
class Reservation:
    """A report that was checked, reserved on the spend file and randomized: what to send, and the entry to settle."""

    entry: str
    round: int
    report: dict[str, np.ndarray]
    epsilon: float
    delta: float


class SpendLedger:
    """The device's spend: a JSON file (``path``) or memory (``path=None``), one entry per randomized report.

    The file is ``{"version": 1, "entries": [{"id", "server", "campaign", "round", "protocol", "epsilon", "delta",
    "reserved_at", "status"}, ...]}``, rewritten whole (a temporary file, then ``os.replace``) and readable only by
    her (mode 0600). A file that cannot be read is refused, never reset: forgetting spend would break the filter."""

    def __init__(self, path: str | os.PathLike[str] | None = DEFAULT_SPEND_FILE) -> None:
        self.path = None if path is None else Path(os.path.abspath(Path(path).expanduser()))
        self._entries: list[dict[str, Any]] = []  # the in-memory ledger (path None)
        self._lock = threading.Lock() if self.path is None else _process_lock(self.path)

    # ---- reading
    def entries(self) -> list[dict[str, Any]]:
        """Every entry, oldest first (copies)."""
        with self._locked():
            return [dict(entry) for entry in self._load()]

    def spent(self) -> tuple[float, float]:
        """(epsilon, delta) reserved so far, every entry counted (sent, failed or not yet settled)."""
        eps, dlt = _units(self.entries())
        return eps / EPSILON_UNIT, dlt / DELTA_UNIT

    # ---- writing
    def reserve(self, ceiling: Ceiling, *, epsilon: float, delta: float, **about: Any) -> str:
        """Append an entry spending ``(epsilon, delta)`` if the spend stays within ``ceiling``, atomically with the
        check (both locks held); else :class:`CollectionError` ``device_total_exceeded`` and nothing written.
        ``about``: server, campaign, round, protocol. Returns the entry's id."""
        cost = _cost_units(epsilon, delta)
        cap = ceiling.units()
        with self._locked():
            entries = self._load()
            spent = _units(entries)
            if spent[0] + cost[0] > cap[0] or spent[1] + cost[1] > cap[1]:
                raise CollectionError(
                    "device_total_exceeded",
                    f"this report would spend epsilon {epsilon:g}, delta {delta:g}; this device has spent epsilon "
                    f"{spent[0] / EPSILON_UNIT:g}, delta {spent[1] / DELTA_UNIT:g} of your total ceiling epsilon "
                    f"{ceiling.epsilon:g}, delta {ceiling.delta:g} (spend file {self.where}): nothing was "
                    "randomized or sent")
            entry = {"id": uuid.uuid4().hex, **about, "epsilon": float(epsilon), "delta": float(delta),
                     "reserved_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "status": "reserved"}
            self._store([*entries, entry])
            return entry["id"]

    def settle(self, entry: str, status: str) -> None:
        """Record what became of a reserved report (``accepted``, ``failed: <code>``); its spend stays."""
        with self._locked():
            entries = self._load()
            for item in entries:
                if item["id"] == entry:
                    item["status"] = status
            self._store(entries)

    def cancel(self, entry: str) -> None:
        """Remove a reservation whose randomizer raised: no report was made, so nothing could leave the device."""
        with self._locked():
            self._store([item for item in self._load() if item["id"] != entry])

    @property
    def where(self) -> str:
        return "in memory" if self.path is None else str(self.path)

    # ---- the locks and the file
    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock:
            if self.path is None:
                yield
                return
            try:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                handle = open(self.path.with_name(self.path.name + ".lock"), "a+b")  # noqa: SIM115
            except OSError as error:
                raise DeviceError(f"cannot open the spend file {self.path}: {error}", code="spend_file") from None
            with handle:
                if fcntl is not None:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    if fcntl is not None:
                        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _load(self) -> list[dict[str, Any]]:
        if self.path is None:
            return [dict(entry) for entry in self._entries]
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as error:
            raise DeviceError(f"cannot read the spend file {self.path}: {error}", code="spend_file") from None
        try:
            data = json.loads(text)
            entries = data["entries"]
            if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                raise TypeError("entries must be a list of objects")
            _units(entries)
        except (ValueError, KeyError, TypeError) as error:
            raise DeviceError(f"the spend file {self.path} cannot be read ({error}); the device will not report "
                              "rather than forget what it spent: repair the file or move it away", code="spend_file"
                              ) from None
        return entries

    def _store(self, entries: list[dict[str, Any]]) -> None:
        if self.path is None:
            self._entries = [dict(entry) for entry in entries]
            return
        temporary = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex}.tmp")
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump({"version": 1, "entries": entries}, handle, indent=1)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise DeviceError(f"cannot write the spend file {self.path}: {error}; nothing was randomized",
                              code="spend_file") from None


class Device:
    """A participant's device: her ceilings and her spend file (see the module docstring).

    ``per_report`` and ``total`` are :class:`Ceiling` values or pairs ``(epsilon, delta)``; ``spend_file`` a path
    (``~`` expanded) or ``None`` for memory. Nothing touches the disk until she first reports."""

    def __init__(self, *, per_report: Ceiling | tuple[float, float] = DEFAULT_PER_REPORT,
                 total: Ceiling | tuple[float, float] = DEFAULT_TOTAL,
                 spend_file: str | os.PathLike[str] | None = DEFAULT_SPEND_FILE) -> None:
        self.per_report = Ceiling.of(per_report, "per_report")
        self.total = Ceiling.of(total, "total")
        self.ledger = SpendLedger(spend_file)

    def check_round(self, state: Mapping[str, Any]) -> tuple[float, float]:
        """The open round's cost (epsilon, delta), from its spec, after checking the published state and the
        per-report ceiling: a :class:`DeviceError` or a :class:`CollectionError` (``report_ceiling_exceeded``)."""
        *_, cost = self._checked(state)
        return cost

    def randomize(self, state: Mapping[str, Any], x: object, y: object = None, *, server: str = "") -> Reservation:
        """Check the state and both ceilings, reserve the report's cost on the spend file, then randomize ``(x, y)``
        with the device's randomness (in that order: a refusal randomizes nothing)."""
        spec, index, round_state, (epsilon, delta) = self._checked(state)
        data = participant_data(spec, state, x, y)
        entry = self.ledger.reserve(self.total, epsilon=epsilon, delta=delta, server=server,
                                    campaign=state.get("campaign"), round=index, protocol=spec.protocol)
        try:
            report = randomize(spec, index, round_state, data, None)
        except BaseException:  # the randomizer refused her data (or was interrupted): no report exists, none left
            self.ledger.cancel(entry)
            raise
        return Reservation(entry, index, report, epsilon, delta)

    def _checked(self, state: Mapping[str, Any]) -> tuple[ProtocolSpec, int, RoundState, tuple[float, float]]:
        spec, index, round_state = open_round(state)
        epsilon, delta = round_cost(spec, index)
        if epsilon > self.per_report.epsilon or delta > self.per_report.delta:
            raise CollectionError(
                "report_ceiling_exceeded",
                f"campaign {state.get('campaign')!r}, round {index}: one report would spend epsilon {epsilon:g}, "
                f"delta {delta:g}, above your per-report ceiling epsilon {self.per_report.epsilon:g}, delta "
                f"{self.per_report.delta:g}: nothing was randomized or sent")
        return spec, index, round_state, (epsilon, delta)

    def spent(self) -> tuple[float, float]:
        """(epsilon, delta) this device has reserved for her so far."""
        return self.ledger.spent()

    def remaining(self) -> tuple[float, float]:
        """What the total ceiling still allows, (epsilon, delta)."""
        epsilon, delta = self.spent()
        return max(self.total.epsilon - epsilon, 0.0), max(self.total.delta - delta, 0.0)

    def __repr__(self) -> str:
        return (f"Device(per_report=({self.per_report.epsilon:g}, {self.per_report.delta:g}), total=("
                f"{self.total.epsilon:g}, {self.total.delta:g}), spend_file={self.ledger.where!r})")


_PROCESS_LOCKS: dict[Path, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


def _process_lock(path: Path) -> threading.Lock:
    """One lock per spend file in this process, shared by every :class:`SpendLedger` of that file."""
    with _PROCESS_LOCKS_GUARD:
        return _PROCESS_LOCKS.setdefault(path, threading.Lock())


def _decimal(value: float) -> Fraction:
    """The exact decimal a float prints as (0.1 is 1/10), as the server reads amounts (``service.privacy.cost``)."""
    return Fraction(repr(float(value)))


def _cost_units(epsilon: float, delta: float) -> tuple[int, int]:
    """One report's (epsilon, delta) in ledger units, each rounded up, as the server charges it."""
    return math.ceil(_decimal(epsilon) * EPSILON_UNIT), math.ceil(_decimal(delta) * DELTA_UNIT)


def _units(entries: list[dict[str, Any]]) -> tuple[int, int]:
    """The entries' summed (epsilon, delta) in ledger units, each rounded up; a bad amount is a ``ValueError``."""
    eps = dlt = 0
    for entry in entries:
        epsilon, delta = entry["epsilon"], entry["delta"]
        for name, value in (("epsilon", epsilon), ("delta", delta)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise ValueError(f"entry {entry.get('id')!r} has {name} {value!r}")
        cost = _cost_units(epsilon, delta)
        eps, dlt = eps + cost[0], dlt + cost[1]
    return eps, dlt
