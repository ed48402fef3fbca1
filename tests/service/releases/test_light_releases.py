"""A release that fits no model loads no graphical-model stack (issue 29, section 7: ``make demo``).

A laplace or gaussian release stores noisy residuals and fits no model, yet on main @02e4138 it imported mbi and JAX
(seconds of CPU per ``marginalia release marginals``) through the payload's encoder and the junction tree's size
check. Only a model needs them now; this runs a release in a fresh interpreter and looks at what it loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

SCRIPT = """
import sys
from pathlib import Path
from db.migrate import open_database
from service.accounting import accountant
from service.data import datasets
from service.releases import engine as release_engine

folder = Path(sys.argv[1])
(folder / "t.csv").write_text("a,b\\n" + "\\n".join(f"{i % 3},{i % 2}" for i in range(60)) + "\\n")
(folder / "d.json").write_text('{"a": 3, "b": 2}')
engine = open_database(f"sqlite:///{folder / 'm.db'}")
datasets.load_coded_csv(engine, "t", folder / "t.csv", folder / "d.json")
accountant.set_budget(engine, "t", "10", "1e-5")
release_engine.release_marginals(engine, "t", "laplace", "all-2way", epsilon="1")
release_engine.release_marginals(engine, "t", "gaussian", "all-2way", rho="0.1")
print(",".join(sorted(m for m in ("jax", "mbi") if m in sys.modules)))
"""


@pytest.mark.slow
def test_a_release_without_a_model_imports_no_jax(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, cwd=REPO,
                            timeout=300, env=None)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == ""  # main: jax,mbi
