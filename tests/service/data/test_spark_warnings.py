"""pyspark 4's pandas-3 ``FutureWarning`` no longer reaches every Spark process's stderr (issue 31, point 11); any
other warning still does."""

from __future__ import annotations

import subprocess
import sys

from service.data.engines.spark import PANDAS_3_WARNING
from tests.support.paths import REPO

TRIGGER = """
from pyspark.sql.pandas.utils import require_minimum_pandas_version
require_minimum_pandas_version()
import warnings
warnings.warn("another warning", FutureWarning)
"""


def _stderr(prelude: str) -> str:
    done = subprocess.run([sys.executable, "-W", "default", "-c", prelude + TRIGGER], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=True)
    return done.stderr


def test_the_engine_filters_pysparks_pandas_warning_and_only_it() -> None:
    assert PANDAS_3_WARNING in _stderr("")  # pyspark warns on this install (pandas 3): the filter has work to do
    quiet = _stderr("import service.data.engines.spark\n")
    assert PANDAS_3_WARNING not in quiet and "another warning" in quiet
