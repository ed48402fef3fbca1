"""A runner that is provably gone: the pid and start ticks of a process that ran here and exited
(service/runners.py's rule), for tests of recovery."""

from __future__ import annotations

import subprocess
import sys

from service import runners


def dead_process() -> tuple[int, int | None]:
    """``(pid, start ticks)`` of a child that started, then exited and was reaped."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    started = runners.start_ticks(child.pid)
    child.wait()
    return child.pid, started


def gone_runner_columns() -> dict[str, object]:
    """The ``runner_*`` columns of a row whose runner ran in this process table and is dead."""
    pid, started = dead_process()
    return {"runner_host": runners.process_table(), "runner_pid": pid, "runner_started": started}
