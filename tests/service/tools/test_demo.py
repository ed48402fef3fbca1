"""The demo's pieces that can be checked without running it all (``make demo`` runs it, in about two
minutes): its picture, release ids printed as integers, no seeds in what it sends, one server for its parts."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.client import Client
from service.tools.demo import story as demo
from tests.support.apihelpers import World, build_world


def test_the_client_ledger_gives_release_ids_as_integers(tmp_path: Path, data_dir: Path) -> None:
    world: World = build_world(f"sqlite:///{tmp_path / 'demo.db'}", data_dir)
    auditor = Client("http://testserver", world.keys["auditor"], http=TestClient(create_app(world.engine)))
    ledger = auditor.ledger("titanic")
    assert str(ledger["release_id"].dtype) == "Int64"
    printed = ledger[["entry", "release_id"]].to_string(index=False)
    assert f" {world.release_id}\n" in printed + "\n" and ".0" not in printed
    world.engine.dispose()


def test_the_demo_draws_the_ledger_and_the_errors(tmp_path: Path) -> None:
    story = demo.Story(out=tmp_path)
    story.releases = {"laplace": 1, "aim": 2}
    story.errors = {"laplace": [0.1, 0.2, 0.3, 0.4], "aim": [0.01, 0.02, 0.03, 0.04]}
    story.measured = {"laplace": [False] * 4, "aim": [True, True, True, False]}
    story.ledger = pd.DataFrame({"entry_id": [1, 2, 3], "entry": ["budget", "charge", "charge"],
                                 "release_id": pd.array([None, 1, 2], dtype="Int64"),
                                 "mechanism": ["budget", "laplace", "aim"], "epsilon_spent_after": [0.0, 0.5, 2.1]})
    demo.picture(story)
    assert (tmp_path / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_demo_sends_no_seeds_and_parts_are_listed() -> None:
    source = inspect.getsource(demo)
    assert not re.search(r"seed\s*=|--seed", source), "the demo must not seed releases nor pass seeds to the client"
    assert [p.__name__ for p in demo.PARTS][:5] == ["steward_loads", "steward_releases", "free_answers",
                                                    "analyst_fits", "auditor_recomputes"]


def test_the_demo_writes_into_the_repository_and_reads_the_shared_tables() -> None:
    """``demo-output/`` is at the repository's root (what `make demo` and the README promise), and the shared tables
    default to ``../shared/data`` beside it."""
    assert (demo.REPO / "pyproject.toml").is_file() and (demo.REPO / "Makefile").is_file()
    assert demo.OUT == demo.REPO / "demo-output"


def test_the_local_part_uses_the_protocol_defaults_and_shows_what_differs_between_models() -> None:
    """Issue 20: the local part names its protocol in one place, tunes nothing by hand, and beside the AUC (shared by
    every rescaled link) shows the calibration and the log loss, which differ between models."""
    import numpy as np

    from service.tools.demo import local

    arguments = local.campaign_arguments()
    assert arguments[arguments.index("--protocol") + 1] == local.PROTOCOL
    assert not any(a.startswith("--norm-bound") or "gram" in a or a == "--option" for a in arguments)
    rng = np.random.default_rng(0)
    score = rng.normal(size=5_000)
    labels = (rng.random(5_000) < 1.0 / (1.0 + np.exp(-score))).astype(float)
    steep, flat = (local.calibration(1.0 / (1.0 + np.exp(-c * score)), labels) for c in (1.0, 0.2))
    assert steep[1] < flat[1] - 0.05  # same ranking, same AUC: only the log loss tells them apart
    base = labels.mean()
    mean_p, loss = local.calibration(np.full(labels.size, base), labels)
    entropy = -(base * np.log(base) + (1 - base) * np.log(1 - base))
    assert mean_p == pytest.approx(base) and loss == pytest.approx(entropy)
    auc = {"mean": 0.6, "low": 0.4, "high": 0.74, "reference": 0.75}
    assert local.verdict({"expected_relative_error": 1.6, "auc": auc}).startswith("Noise-dominated")
    assert local.verdict({"expected_relative_error": 0.2, "auc": auc}).startswith("As planned")


def test_the_demo_starts_one_server_for_all_its_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29, section 7: parts 4 and 6 each started a server (seconds of imports each); they share one, stopped
    when the demo ends."""
    from contextlib import contextmanager

    from service.api import server

    events = []

    @contextmanager
    def fake(database_url: str, log: Path):  # noqa: ANN202
        events.append("start")
        yield server.BackgroundServer("http://127.0.0.1:1", None, log)  # type: ignore[arg-type]
        events.append("stop")

    monkeypatch.setattr(server, "background_server", fake)
    story = demo.Story(out=tmp_path)
    with story.running:
        assert story.server() is story.server()
        assert events == ["start"]
    assert events == ["start", "stop"]
