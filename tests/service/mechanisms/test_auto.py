"""``--mechanism auto`` (issue 30, point 3): the mechanism is chosen from public information only, charged exactly as
the chosen mechanism would be, said in every answer, and refused with options or a target error, before anything is
charged. How well the rule chooses is the benchmark's (benchmarks/mechanism_choice.py, docs/mechanisms.md)."""

from __future__ import annotations

import inspect
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.api import create_app
from service.cli import app as cli_app
from service.data import datasets
from service.errors import InvalidInput
from service.mechanisms import auto, registry
from service.releases import answers, planning
from service.releases import engine as release_engine
from tests.support.apihelpers import bearer
from tests.support.campaign_keys import new_key
from tests.support.dry_runs import TINY, WORKLOAD, charge_row, load_tiny, snapshot
from workloads.domain import Domain
from workloads.marginals import parse_workload

ADULT_LIKE = {f"c{i}": size for i, size in enumerate([9, 7, 16, 7, 15, 6, 5, 2, 12, 10, 13, 42, 2, 3, 2])}


def _rho(epsilon: float, delta: float = 1e-5) -> Fraction:
    return registry.zcdp_cost(auto.AUTO, epsilon, delta, None).rho


def test_the_rule_reads_only_the_domain_the_workload_and_rho() -> None:
    assert list(inspect.signature(auto.choose).parameters) == ["domain", "queries", "rho"]
    assert set(auto.CANDIDATES) <= set(registry.names("marginals"))
    for name in auto.CANDIDATES:  # every candidate is charged the same rho for the same request
        assert registry.get(name).cost(1, 1e-5, None) == registry.zcdp_cost(auto.AUTO, 1, 1e-5, None)


def test_each_rule_chooses_where_its_threshold_says() -> None:
    binary = Domain.from_sizes({f"b{i}": 2 for i in range(12)})
    small = auto.choose(binary, parse_workload("all-2way", binary), _rho(0.1))
    assert (small.mechanism, small.rule) == ("residual", 1)
    assert small.figures["mean_marginal_cells"] == 4.0 <= auto.SMALL_MARGINAL_CELLS
    adult = Domain.from_sizes(ADULT_LIKE)
    queries = parse_workload("all-2way", adult)
    choices = [auto.choose(adult, queries, _rho(epsilon)) for epsilon in (0.1, 0.3, 1, 2, 4, 8)]
    errors = [c.figures["residual_cell_standard_error"] for c in choices]
    assert errors == sorted(errors, reverse=True)  # more budget, less noise per cell
    assert [(c.mechanism, c.rule) for c in choices] == [
        ("residual", 2) if e <= auto.RESIDUAL_CELL_ERROR else ("aim", 3) for e in errors]
    assert {c.mechanism for c in choices} == {"aim", "residual"}  # the range crosses the threshold once
    low = choices[0]
    assert "AIM" in low.reason and f"{auto.RESIDUAL_CELL_ERROR:g}" in low.reason


def _load(engine, folder: Path, name: str, seed: int) -> None:  # noqa: ANN001
    """A table of the tiny domain with different rows for each seed (same public domain)."""
    from service.accounting import accountant

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({c: rng.integers(0, n, 300) for c, n in {"a": 4, "b": 3, "s": 2, "y": 5}.items()})
    frame.to_csv(folder / f"{name}.csv", index=False)
    (folder / f"{name}-domain.json").write_text(json.dumps({"a": 4, "b": 3, "s": 2, "y": 5}))
    datasets.load_coded_csv(engine, name, folder / f"{name}.csv", folder / f"{name}-domain.json", ("s",))
    accountant.set_budget(engine, name, "50", "1e-3")


def test_an_auto_release_is_the_chosen_mechanisms_release_charged_the_same(engine, tmp_path: Path) -> None:  # noqa: ANN001
    _load(engine, tmp_path, "first", 1)
    _load(engine, tmp_path, "second", 2)
    chosen = [release_engine.release_marginals(engine, name, auto.AUTO, WORKLOAD, epsilon="1", delta="1e-6", seed=3)
              for name in ("first", "second")]
    assert chosen[0].auto == chosen[1].auto  # the same public inputs, whatever the rows
    named = release_engine.release_marginals(engine, "first", chosen[0].auto.mechanism, WORKLOAD, epsilon="1",
                                             delta="1e-6", seed=3)
    assert chosen[0].mechanism == chosen[0].auto.mechanism == named.mechanism
    assert chosen[0].cost == named.cost
    first, again = charge_row(engine, chosen[0].release_id), charge_row(engine, named.release_id)
    assert first["rho_units"] == again["rho_units"] and first["epsilon_units"] == again["epsilon_units"]
    stored = answers.get_release(engine, chosen[0].release_id)
    assert stored.mechanism == chosen[0].auto.mechanism
    assert stored.params["auto"] == chosen[0].auto.to_json()
    assert chosen[0].to_json()["auto"]["mechanism"] == chosen[0].mechanism


def test_auto_refuses_options_a_target_error_and_pure_dp_requests_before_anything_is_charged(
        engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    before = snapshot(engine)
    with pytest.raises(InvalidInput, match=r"auto chooses the options too.*\['rounds'\]"):
        release_engine.release_marginals(engine, TINY, auto.AUTO, WORKLOAD, epsilon="1", delta="1e-6",
                                         options={"rounds": 3})
    with pytest.raises(InvalidInput, match="auto is a zCDP mechanism: give rho, or epsilon and delta"):
        release_engine.release_marginals(engine, TINY, auto.AUTO, WORKLOAD, epsilon="1")
    with pytest.raises(InvalidInput, match="auto's choice depends on epsilon"):
        planning.plan_marginals(engine, TINY, auto.AUTO, WORKLOAD, delta="1e-6", target_error=0.1)
    with pytest.raises(InvalidInput, match=r"mechanism must be one of \[.*'residual', 'auto'\], got 'best'"):
        release_engine.release_marginals(engine, TINY, "best", WORKLOAD, epsilon="1", delta="1e-6")
    assert snapshot(engine) == before


def test_the_api_and_its_plan_say_what_auto_chose(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    _, steward = new_key(engine, "steward", "steward")
    http = TestClient(create_app(engine))
    body = {"mechanism": "auto", "workload": WORKLOAD, "epsilon": 1.0, "delta": 1e-6}
    plan = http.post(f"/datasets/{TINY}/releases/marginals/plan", json=body, headers=bearer(steward))
    assert plan.status_code == 200, plan.text
    release = http.post(f"/datasets/{TINY}/releases/marginals", json=body, headers=bearer(steward))
    assert release.status_code == 201, release.text
    made = release.json()
    assert plan.json()["auto"] == made["auto"] and made["mechanism"] == made["auto"]["mechanism"]
    assert plan.json()["mechanism"] == made["mechanism"] and plan.json()["ledger"] == charge_row(engine,
                                                                                             made["release_id"])
    refused = http.post(f"/datasets/{TINY}/releases/marginals", json={**body, "options": {"rounds": 3}},
                        headers=bearer(steward))
    assert refused.status_code == 422 and "auto chooses the options too" in refused.text


def test_the_command_line_releases_with_auto_by_default_and_says_what_it_chose(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    runner = CliRunner()
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(WORKLOAD))
    plan = runner.invoke(cli_app, ["release", "marginals", TINY, "--workload", str(workload), "--epsilon", "1",
                                   "--delta", "1e-6", "--dry-run"])
    assert plan.exit_code == 0, plan.output
    assert "auto chose residual (rule 1)" in plan.output
    made = runner.invoke(cli_app, ["release", "marginals", TINY, "--workload", str(workload), "--epsilon", "1",
                                   "--delta", "1e-6", "--quiet", "--json"])
    assert made.exit_code == 0, made.output
    answer = json.loads(made.output)
    assert answer["mechanism"] == "residual" and answer["auto"]["rule"] == 1
