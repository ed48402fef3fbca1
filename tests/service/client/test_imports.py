"""``import service.client`` stays light: what a notebook or a participant's device installs (numpy, pandas, httpx)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO

#: Packages of the server extra that the client must never import.
SERVER_ONLY = ("scipy", "fastapi", "starlette", "sqlalchemy", "alembic", "jax", "mbi", "cvxpy", "sklearn", "uvicorn",
               "typer", "matplotlib")


def test_importing_the_client_imports_no_server_package() -> None:
    code = ("import sys, service.client, estimators.base, workloads.local.protocols; "
            f"print(','.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({SERVER_ONLY!r}))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                            check=True)
    assert result.stdout.strip() == ""
