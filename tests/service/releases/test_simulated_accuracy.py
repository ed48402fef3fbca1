"""The accuracy of an MST or AIM plan, estimated by simulation on a stored release's synthetic rows (issue 29, section
2; service/releases/simulated_accuracy.py): the plan states its basis, spends and writes nothing, never uses a seeded
release, takes no seed, says plainly when no estimate is possible, and refuses ``target_error``. The statistical check
(the estimate within 2x of the measured error) is slow and small (titanic); the benchmark checks adult and ACSincome
(benchmarks/accuracy_forecast.py)."""

from __future__ import annotations

import inspect
import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.api import create_app
from service.cli import app
from service.client import Client
from service.errors import InvalidInput
from service.mechanisms import registry
from service.releases import engine as release_engine
from service.releases import planning
from tests.support.backends import ON_SQLITE
from tests.support.campaign_keys import new_key
from tests.support.dry_runs import TINY, WORKLOAD, load_tiny, snapshot

#: An unseeded (operating-system noise) MST release whose model the plans simulate on: fast on the tiny table.
PRIOR = {"rho": "0.05", "options": {"iters": 20}}
#: The plans' requests: small settings, so that a simulated run takes a fraction of a second.
PLANS = {"mst": {"rho": "0.02", "options": {"iters": 20}},
         "aim": {"epsilon": "1", "delta": "1e-6", "options": {"rounds": 5, "iters": 20, "round_iters": 10}}}


def _prior(engine, seed: int | None = None) -> int:  # noqa: ANN001
    return release_engine.release_marginals(engine, TINY, "mst", "all-2way", seed=seed, **PRIOR).release_id


@pytest.mark.parametrize("mechanism", ["mst", "aim"])
def test_a_plan_after_a_release_estimates_by_simulation_and_spends_and_writes_nothing(
        engine, tmp_path: Path, mechanism: str) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    prior = _prior(engine)
    before = snapshot(engine)  # ledger, releases, models, jobs, idempotency keys
    plan = planning.plan_marginals(engine, TINY, mechanism, WORKLOAD, **PLANS[mechanism])
    assert snapshot(engine) == before, "a dry run wrote something"
    assert plan.to_json()["accuracy_basis"] == "simulation" and plan.accuracy_basis == "simulation"
    assert plan.accuracy_note == ""
    accuracy = plan.accuracy
    assert accuracy.rows == 240 and accuracy.proxy.release_id == prior and accuracy.proxy.mechanism == "mst"
    assert accuracy.trials == registry.get(mechanism).simulation_trials >= 1
    assert [list(e.attributes) for e in accuracy.errors] == [sorted(w) if len(w) > 1 else w for w in WORKLOAD]
    assert all(e.expected_l1_normalised(240) > 0 and len(e.l1_per_trial) == accuracy.trials for e in accuracy.errors)
    body = plan.to_json()
    assert body["accuracy_basis"] == "simulation" and body["accuracy"]["simulation"]["proxy_release"] == prior
    assert body["accuracy"]["mean_l1_normalised"] == pytest.approx(
        statistics.fmean(m["expected_l1_normalised"] for m in body["accuracy"]["marginals"]))
    json.dumps(body)
    shown = plan.describe()
    assert "by simulation" in shown and f"synthetic rows of release {prior} (mst)" in shown
    assert "basis (simulation)" in shown


@ON_SQLITE
def test_the_estimate_is_repeatable_and_no_caller_chooses_its_seed(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    _prior(engine)
    first = planning.plan_marginals(engine, TINY, "mst", WORKLOAD, **PLANS["mst"]).accuracy
    again = planning.plan_marginals(engine, TINY, "mst", WORKLOAD, **PLANS["mst"]).accuracy
    assert [e.l1_per_trial for e in first.errors] == [e.l1_per_trial for e in again.errors]  # the internal stream
    from service.releases import simulated_accuracy

    assert "seed" not in inspect.signature(planning.plan_marginals).parameters
    assert "seed" not in inspect.signature(simulated_accuracy.simulate).parameters
    _, steward = new_key(engine, "steward", "steward")
    http = TestClient(create_app(engine))
    seeded = http.post(f"/datasets/{TINY}/releases/marginals/plan", headers={"Authorization": f"Bearer {steward}"},
                       json={"mechanism": "mst", "workload": WORKLOAD, "rho": 0.02, "seed": 1})
    assert seeded.status_code == 422


@ON_SQLITE
@pytest.mark.parametrize("mechanism", ["mst", "aim"])
def test_with_nothing_to_simulate_on_the_plan_says_no_estimate_is_possible(engine, tmp_path: Path,
                                                                          mechanism: str) -> None:  # noqa: ANN001
    """A fresh dataset, then one whose only releases are seeded (their noise is known: never a proxy) or have no
    model at hand (a gaussian release stored as residuals: fitting one would write it)."""
    load_tiny(engine, tmp_path)
    for make in (lambda: None, lambda: _prior(engine, seed=7),
                 lambda: release_engine.release_marginals(engine, TINY, "gaussian", WORKLOAD, rho="0.01")):
        make()
        before = snapshot(engine)
        plan = planning.plan_marginals(engine, TINY, mechanism, WORKLOAD, **PLANS[mechanism])
        assert snapshot(engine) == before
        assert plan.accuracy is None and plan.accuracy_basis == "none"
        assert "no estimate is possible" in plan.accuracy_note and "no closed form" in plan.accuracy_note
        assert plan.to_json()["accuracy_basis"] == "none" and "no estimate is possible" in plan.describe()


@ON_SQLITE
def test_settings_the_mechanism_refuses_once_it_runs_are_named_by_the_plan(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """AIM refuses too few rounds for its initial cliques only when it runs (after the reservation); the simulation
    runs it, so the plan says so before anything is charged."""
    load_tiny(engine, tmp_path)
    _prior(engine)
    before = snapshot(engine)
    plan = planning.plan_marginals(engine, TINY, "aim", WORKLOAD, rho="0.02", options={"rounds": 1})
    assert snapshot(engine) == before and plan.fits
    assert plan.accuracy_basis == "none" and "rounds=1 leaves no budget" in plan.accuracy_note
    assert "refused the same way once it runs" in plan.describe()


@ON_SQLITE
@pytest.mark.parametrize("mechanism", ["mst", "aim"])
def test_target_error_is_refused_naming_the_parameter_and_why(engine, tmp_path: Path, mechanism: str) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    _prior(engine)
    refusal = "target_error needs a closed-form accuracy.*its plan estimates its error by simulation"
    with pytest.raises(InvalidInput, match=refusal) as refused:
        planning.plan_marginals(engine, TINY, mechanism, WORKLOAD, delta="1e-6", target_error=0.1)
    assert refused.value.code == "invalid_parameter"


def test_the_proxy_is_the_release_that_measured_most_of_the_workload(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """An MST release measures a tree; a later all-1way AIM release measured less of the 2-way workload (none), so
    the MST one is chosen; of two that measured as much, the newest."""
    load_tiny(engine, tmp_path)
    tree = _prior(engine)
    release_engine.release_marginals(engine, TINY, "aim", "all-1way", rho="0.02",
                                     options={"rounds": 5, "iters": 10, "round_iters": 5})
    from service.releases import answers, simulated_accuracy

    dataset = answers.get_release(engine, tree).dataset
    pairs = release_engine.resolve_workload(dataset, "all-2way")
    chosen = simulated_accuracy.choose_proxy(engine, TINY, dataset.domain, pairs)
    assert chosen is not None and chosen.release_id == tree and 0 < chosen.coverage < 1
    assert chosen.measured == 3 and chosen.tree_like(4, len(pairs))  # a tree's 3 edges of the 6 pairs
    assert not simulated_accuracy.Proxy(0, "aim", chosen.model, 4 / 6, 4).tree_like(4, len(pairs))
    plan = planning.plan_marginals(engine, TINY, "mst", "all-2way", **PLANS["mst"])
    assert "no more than a tree" in plan.accuracy.basis and "likely low" in plan.describe()
    newer = _prior(engine)
    ones = release_engine.resolve_workload(dataset, "all-1way")
    assert simulated_accuracy.choose_proxy(engine, TINY, dataset.domain, ones).release_id == newer


@ON_SQLITE
def test_the_route_the_command_line_and_the_client_show_the_estimate_and_its_basis(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    prior = _prior(engine)
    _, steward = new_key(engine, "steward", "steward")
    mg = Client("http://testserver", steward, http=TestClient(create_app(engine)))
    before = snapshot(engine)
    plan = mg.plan_release(TINY, "mst", WORKLOAD, rho=0.02)
    assert plan["accuracy_basis"] == "simulation" and plan["accuracy"]["simulation"]["proxy_release"] == prior
    assert plan["accuracy"]["total_standard_error"] is None and plan["accuracy"]["worst"]["excess_kurtosis"] is None
    assert "simulation" in plan["accuracy"]["basis"]
    cli = CliRunner().invoke(app, ["release", "marginals", TINY, "--mechanism", "mst", "--rho", "0.02", "--workload",
                                   "all-2way", "--dry-run"])
    assert cli.exit_code == 0, cli.output
    assert "estimated accuracy over N = 240 rows, by simulation" in cli.stdout and "basis (simulation)" in cli.stdout
    target = CliRunner().invoke(app, ["release", "marginals", TINY, "--mechanism", "aim", "--delta", "1e-6",
                                      "--target-error", "0.1", "--dry-run"])
    assert target.exit_code == 2 and "target_error needs a closed-form accuracy" in target.output
    assert snapshot(engine) == before


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["mst", "aim"])
def test_on_a_release_that_measured_the_workload_the_estimate_is_within_2x_of_the_measured_error(
        mechanism: str) -> None:
    """titanic (1,304 rows, 9 columns), epsilon 1: the plan's simulation on the synthetic rows of an AIM release of
    it against 3 real releases on the table itself (the benchmark does adult and ACSincome with 5)."""
    import pandas as pd

    from estimators.graphical import mbi_adapter
    from service.mechanisms.registry import RunRequest
    from service.mechanisms.selection import ArrayOracle
    from service.privacy.noise import NoiseSource
    from service.releases import simulated_accuracy
    from tests.support.paths import DATA
    from workloads.domain import Domain
    from workloads.marginals import parse_workload

    domain = Domain.from_sizes(json.loads((DATA / "titanic" / "titanic-domain.json").read_text()))
    frame = pd.read_csv(DATA / "titanic" / "titanic.csv")
    oracle = ArrayOracle(domain, {n: frame[n].to_numpy() for n in domain.names})
    queries = parse_workload("all-2way", domain)

    def run(name: str, table: ArrayOracle, seed: int):  # noqa: ANN202
        spec = registry.get(name)
        request = RunRequest(spec.cost(1.0, 1e-5, None), {}, queries=queries if spec.uses_workload else ())
        return spec, request, release_engine.checked_runner(spec, request)(table, NoiseSource(seed), lambda *_: None)

    prior = run("aim", oracle, 11)[2].payload.model
    proxy = simulated_accuracy.Proxy(0, "aim", prior, 1.0)
    spec, request, _ = run(mechanism, oracle, 1)
    estimate = simulated_accuracy.simulate(spec, request, domain, queries, oracle.rows, proxy)
    measured = []
    for seed in (1, 2, 3):
        model = run(mechanism, oracle, seed)[2].payload.model
        measured.append(np.mean([np.abs(mbi_adapter.marginal(model, q.attributes) - oracle.counts(q.attributes)).sum()
                                 for q in queries]) / oracle.rows)
    assert 0.5 <= estimate.mean_l1_normalised() / np.mean(measured) <= 2.0
