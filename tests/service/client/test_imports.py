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


#: What of the project importing the client (and the device, and the estimators' base it builds on) may load: the
#: client itself, ``workloads`` and ``estimators.base`` (docs/architecture.md); never the server's catalogs.
CLIENT_SIDE = ("service.client", "workloads", "estimators.base")


def test_importing_the_client_loads_none_of_the_servers_modules() -> None:
    """Issue 28 point 2: the client pre-checked fit settings against the server's method registry, which loaded the
    mechanism catalog on a participant's phone."""
    code = ("import sys, service.client, service.client.device, workloads.local.device; "
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('db', 'service', 'estimators'))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                            check=True)
    loaded = result.stdout.strip().split(",")
    outside = [m for m in loaded if m not in ("service", "estimators")
               and not any(m == part or m.startswith(part + ".") for part in CLIENT_SIDE)]
    assert outside == []
