"""Who runs a release (or an API job), and whether that runner is provably gone.

A release is ``pending`` from its charge until its payload is stored. A process killed in between
(``kill -9``, a crash, a power cut) leaves it ``pending`` for ever, with its charge; recovery marks it
``failed_after_noise`` (the charge stands: nobody can prove no noisy value left the process). Every
command recovers, so recovery must never touch a release that another live process (the server,
another command) is still running. Each pending row therefore records its runner:

* ``runner_host``: the process table the pid belongs to -- the host name, the kernel's boot id and
  the pid namespace (two containers with one host name have different pid namespaces);
* ``runner_pid`` and ``runner_started``: the pid and its start time in clock ticks since boot
  (``/proc/<pid>/stat``, field 22), so a pid reused by a later process is not mistaken for the runner;
* ``heartbeat_at``: refreshed every :data:`HEARTBEAT_SECONDS` by a thread of the runner (:class:`Heartbeat`).

A runner is gone (:func:`is_gone`) when it ran in this process table and its pid is dead or now
belongs to another process, or -- for runners elsewhere, whose pids cannot be checked from here --
when its heartbeat is older than :data:`LEASE_SECONDS`. A live runner on this host is never
declared gone, however old its heartbeat (it may be stopped or swapped out, not dead).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Engine, Table, update

from service.error_text import shown_message

log = logging.getLogger("marginalia.runners")

HEARTBEAT_SECONDS = 20.0
#: A runner on another host whose heartbeat is older than this is taken for dead (15 missed beats).
LEASE_SECONDS = 300.0


@dataclass(frozen=True)
class Runner:
    host: str
    pid: int
    started: int | None

    def columns(self) -> dict[str, object]:
        """The values of the ``runner_*`` columns, with a first heartbeat."""
        return {"runner_host": self.host, "runner_pid": self.pid, "runner_started": self.started,
                "heartbeat_at": datetime.now(UTC)}


@lru_cache(maxsize=1)
def process_table() -> str:
    """This process table's identity: host name, boot id and pid namespace (where Linux tells them)."""
    parts = [socket.gethostname()]
    for path in ("/proc/sys/kernel/random/boot_id",):
        try:
            parts.append(Path(path).read_text().strip())
        except OSError:
            pass
    try:
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:
        pass
    return "/".join(parts)[:200]


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (Linux), or None where unknown."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the command name (field 2) may hold spaces
    try:
        return int(fields[19])  # field 22 overall: fields after the name start at field 3
    except (IndexError, ValueError):
        return None


def current() -> Runner:
    return Runner(process_table(), os.getpid(), start_ticks(os.getpid()))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def is_gone(host: str | None, pid: int | None, started: int | None, heartbeat_at: datetime | None,
            created_at: datetime, now: datetime | None = None) -> bool:
    """Whether the runner recorded in these columns has provably stopped (module docstring). Rows
    without a runner (written before runners were recorded) count as elsewhere, with their creation
    time as their last sign of life."""
    if host is not None and pid is not None and host == process_table():
        if not _alive(pid):
            return True
        return started is not None and start_ticks(pid) not in (None, started)  # the pid was reused
    last = heartbeat_at or created_at
    if last.tzinfo is None:  # SQLite returns naive datetimes; they were written in UTC
        last = last.replace(tzinfo=UTC)
    return (now or datetime.now(UTC)) - last > timedelta(seconds=LEASE_SECONDS)


class Heartbeat:
    """A daemon thread refreshing ``heartbeat_at`` of row ``row_id`` of ``table`` while it runs.

    Used as a context manager around the work. A failed refresh (a busy SQLite database) is logged
    and retried at the next beat; the lease is many beats long."""

    def __init__(self, engine: Engine, table: Table, row_id: int, seconds: float = HEARTBEAT_SECONDS) -> None:
        self.engine, self.table, self.row_id, self.seconds = engine, table, row_id, seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{table.name}-{row_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.seconds):
            try:
                with self.engine.begin() as connection:
                    connection.execute(update(self.table).where(self.table.c.id == self.row_id)
                                       .values(heartbeat_at=datetime.now(UTC)))
            except Exception as exc:  # noqa: BLE001 - a missed beat is harmless; the lease is long
                # its type only: a driver's message is not ours to log (service/error_text.py)
                log.warning("heartbeat of %s %s failed: %s", self.table.name, self.row_id, shown_message(exc))
