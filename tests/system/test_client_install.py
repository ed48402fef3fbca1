"""A client-only install (`pip install '.[client]'`) works and carries no server stack.

An analyst's notebook or a participant's device installs the base dependencies only (numpy, pandas, httpx). This
builds a fresh virtualenv, installs the project from this source tree with the `client` extra (packages from PyPI or
pip's cache), and checks from outside the repository that the client and the participants' randomizers import and
run, that none of the server's packages were installed, and that the `marginalia` command says it needs the server
extra instead of failing with a traceback.
"""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

import pytest

from tests.support.paths import REPO

SERVER_ONLY = ("fastapi", "starlette", "sqlalchemy", "alembic", "jax", "mbi", "scipy", "cvxpy", "sklearn", "typer")

CHECK = f"""
import importlib.util, sys
import numpy as np
from service.client import Client, FittedRegression
from workloads.local.randomizers.laplace import randomize_interval_values
report = randomize_interval_values(np.array([0.2, 0.9]), 0.0, 1.0, 1.0)
assert report.shape == (2,) and np.all(np.isfinite(report))
assert Client.__name__ == "Client" and FittedRegression is not None
present = [name for name in {SERVER_ONLY!r} if importlib.util.find_spec(name) is not None]
assert not present, present
print("client ok")
"""


@pytest.mark.slow
def test_a_client_only_install_runs_the_client_and_has_no_server_stack(tmp_path: Path) -> None:
    environment = tmp_path / "client-venv"
    venv.EnvBuilder(with_pip=True).create(environment)
    python = environment / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"{REPO}[client]"],
        capture_output=True, text=True, cwd=tmp_path, timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    # the client's environment only: a PYTHONPATH pointing into the source tree would make its folders importable
    clean = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    checked = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                             env=clean)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "client ok" in checked.stdout
    command = subprocess.run([str(environment / "bin" / "marginalia"), "--help"], capture_output=True, text=True,
                             cwd=tmp_path, timeout=120, env=clean)
    assert command.returncode == 1
    assert "needs the server extra" in command.stderr and "Traceback" not in command.stderr
