"""A throwaway Spark Connect server for the test session, started from the pip pyspark package.

The package ships Spark's jars, the Connect server's among them (``pyspark/jars/spark-connect_*.jar``), so
``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`` runs one with nothing downloaded
(``sbin/start-connect-server.sh`` is the same command behind Spark's daemon script, which writes pid and log files
under the package). The server runs Spark in local mode with a small heap, no web UI, a warehouse and a Derby home
in a temporary folder, listening on 127.0.0.1 on a free port. It runs in its own process group (``spark-submit``
is a shell script that execs the JVM), so :meth:`ConnectServer.stop` ends the JVM and leaves no orphan.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from service.tools.pgserver import free_port

#: The server's main class (the one ``sbin/start-connect-server.sh`` submits).
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: Seconds to wait for the server to listen (about 5 s on an idle 2-core machine).
START_TIMEOUT = 120


class SparkConnectUnavailable(RuntimeError):
    pass


def _pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _answers(url: str) -> bool:
    """Whether the Connect server at ``url`` runs a query now (a session of its own, released after; one quick
    attempt, no retries: the caller polls)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    try:
        session = ConnectSession.builder.remote(url).create()
    except Exception:  # noqa: BLE001 - not up yet, whatever gRPC says
        return False
    try:
        session.client.set_retry_policies([DefaultPolicy(max_retries=0)])
        session.sql("SELECT 1").collect()
        return True
    except Exception:  # noqa: BLE001 - not up yet
        return False
    finally:
        try:
            session.stop()
        except Exception:  # noqa: BLE001, S110 - a server not up has no session to release
            pass


@dataclass
class ConnectServer:
    directory: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The ``MARGINALIA_SPARK_REMOTE`` of this server."""
        return f"sc://localhost:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "server.log"

    def start(self) -> None:
        """Start the server (again, on the same port, after :meth:`stop`) and wait until it answers a query: its
        port listens a moment before its gRPC service does (a restarted server under load once refused the next
        release's session although the port was open)."""
        if shutil.which("java") is None:
            raise SparkConnectUnavailable("java not found on PATH (.ci/run installs Debian's default-jre-headless)")
        home = _pyspark_home()
        submit = home / "bin" / "spark-submit"
        if not list((home / "jars").glob("spark-connect_*.jar")):
            raise SparkConnectUnavailable(f"no spark-connect jar in {home / 'jars'}")
        command = [str(submit), "--class", SERVER_CLASS, "--master", "local[2]", "--driver-memory", "512m",
                   "--conf", f"spark.connect.grpc.binding.port={self.port}",
                   "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                   "--conf", "spark.ui.enabled=false",
                   "--conf", "spark.sql.shuffle.partitions=8",
                   "--conf", f"spark.sql.warehouse.dir={self.directory / 'warehouse'}",
                   "--conf", f"spark.driver.extraJavaOptions=-Dderby.system.home={self.directory}"]
        # spark-submit finds its home (the package) and Python (for find_spark_home.py) itself; give it this one
        env = dict(os.environ, SPARK_HOME=str(home), PYSPARK_PYTHON=sys.executable)
        env.pop("MARGINALIA_SPARK_REMOTE", None)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,  # noqa: S603
                                            cwd=self.directory, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SparkConnectUnavailable(f"{' '.join(command)} exited with {self.process.returncode}: "
                                              f"{self.log.read_text(errors='replace')[-2000:]}")
            with socket.socket() as sock:
                listening = sock.connect_ex(("127.0.0.1", self.port)) == 0
            if listening and _answers(self.url):
                return
            time.sleep(0.2)
        self.stop()
        raise SparkConnectUnavailable(f"the Spark Connect server did not listen within {START_TIMEOUT} s: "
                                      f"{self.log.read_text(errors='replace')[-2000:]}")

    def stop(self) -> None:
        """End the server's process group (the JVM stops its Spark on SIGTERM; SIGKILL after 30 s)."""
        if self.process is None:
            return
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self.process = None
