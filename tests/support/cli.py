"""The command line in tests: one runner, :func:`run` (a command with ``--json`` that must succeed, its JSON
answer) and the CSV files of a campaign's public table and participants (:func:`write_public_and_people`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from service.cli import app
from tests.support.campaign_data import FEATURES, gaussian_rows, logistic_labels

runner = CliRunner()


def run(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def write_public_and_people(folder: Path, people: int) -> None:
    """``public.csv`` (3,000 rows of the features) and ``people.csv`` (``people`` rows with a logistic label) in
    ``folder``."""
    pd.DataFrame(gaussian_rows(3000, seed=1), columns=FEATURES).to_csv(folder / "public.csv", index=False)
    x = gaussian_rows(people, seed=2)
    pd.DataFrame(x, columns=FEATURES).assign(y=logistic_labels(x, np.array([1.0, -1.0, 0.5]))).to_csv(
        folder / "people.csv", index=False)
