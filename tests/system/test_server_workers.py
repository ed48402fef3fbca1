"""``marginalia serve --workers 2`` against a real SQLite database: it starts two worker processes, and both serve
(each connection is answered; the database was migrated once, by the parent)."""

from __future__ import annotations

from pathlib import Path

import httpx

from service.api.server import background_server, serve_command


def _children(pid: int) -> list[str]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            ppid = int(text[text.rfind(")") + 2:].split()[1])
            if ppid == pid:
                found.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_serve_starts_that_many_workers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'workers.db'}"
    with background_server(url, tmp_path / "server.log", lambda port: serve_command(port, 2)) as server:
        workers = [c for c in _children(server.process.pid) if "multiprocessing.spawn" in c]
        assert len(workers) == 2, (workers, server.log_tail())
        for _ in range(8):  # fresh connections, spread over the workers by the kernel
            assert httpx.get(server.url + "/health", timeout=10).json()["status"] == "ok"
