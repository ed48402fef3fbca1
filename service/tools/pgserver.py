"""A throwaway PostgreSQL cluster, started from the machine's binaries: the test session's (tests/conftest.py) and
the benchmarks' (``--postgresql``). It lives here, among the programs built on the service, so that both import it
and ``benchmarks`` never imports ``tests`` (tests/system/test_architecture.py).

``initdb`` and ``pg_ctl`` are looked up on PATH and in /usr/lib/postgresql/*/bin. The cluster
lives in a temporary directory, listens on 127.0.0.1 only, on a free port, and is stopped at
exit. PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` user
(or ``nobody``) through ``runuser``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    pass


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True):
        return candidate
    raise PostgresUnavailable(f"{name} not found (install Debian's postgresql package)")


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now (the Spark Connect server of the tests takes one too)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class PostgresServer:
    directory: Path
    port: int
    user: str
    run_as: str | None

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def _run(self, *command: str) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", self.run_as, "--"] if self.run_as else []
        return subprocess.run([*prefix, *command], capture_output=True, text=True, check=False)

    def stop(self) -> None:
        self._run(_binary("pg_ctl"), "-D", str(self.directory / "data"), "-m", "immediate", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)


def start_server() -> PostgresServer:
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    run_as = None
    if os.geteuid() == 0:
        for candidate in ("postgres", "nobody"):
            try:
                pwd.getpwnam(candidate)
                run_as = candidate
                break
            except KeyError:
                continue
        if run_as is None:
            raise PostgresUnavailable("running as root and no 'postgres' or 'nobody' user to run PostgreSQL as")
    directory = Path(tempfile.mkdtemp(prefix="marginalia-pg-"))
    os.chmod(directory, 0o755)
    if run_as:
        entry = pwd.getpwnam(run_as)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
    user = "marginalia"
    port = free_port()
    server = PostgresServer(directory, port, user, run_as)
    result = server._run(initdb, "-D", str(directory / "data"), "-U", user, "-A", "trust", "--no-sync", "-E", "UTF8")
    if result.returncode != 0:
        raise PostgresUnavailable(f"initdb failed: {result.stderr.strip()}")
    options = f"-h 127.0.0.1 -p {port} -k {directory} -c fsync=off -c full_page_writes=off -c max_connections=200"
    result = server._run(pg_ctl, "-D", str(directory / "data"), "-o", options, "-l", str(directory / "log"),
                         "-w", "-t", "60", "start")
    if result.returncode != 0:
        log = (directory / "log").read_text() if (directory / "log").exists() else ""
        raise PostgresUnavailable(f"pg_ctl start failed: {result.stderr.strip()} {log[-2000:]}")
    deadline = time.time() + 30
    while time.time() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.1)
    raise PostgresUnavailable("PostgreSQL did not start listening within 30 s")
