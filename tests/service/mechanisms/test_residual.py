"""The residual mechanism in the service (issue 9): exact zCDP charge, the law of its answers (unbiased, with the
closed-form variances it reports), answers with standard errors, the lazily fitted and stored model, and the direct
releases answered the same way."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from estimators.residual.planner import plan_residuals
from service.errors import InvalidInput
from service.mechanisms import direct, registry
from service.mechanisms.residual import run_residual
from service.mechanisms.selection import ArrayOracle
from service.privacy.cost import floor_to_grid
from service.privacy.noise import NoiseSource
from service.releases import answers, stored_models
from service.releases import engine as release_engine
from tests.support.datasets import titanic_with_budget
from tests.support.ledger import net_charge
from workloads.domain import Domain
from workloads.marginals import Query

WORKLOAD = [["Pclass", "Survived"], ["Sex", "Survived"], ["Age"]]


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "20", "1e-6")


def _queries(domain: Domain, workload: list[list[str]]) -> list[Query]:
    return [Query(tuple(a for a in domain.names if a in w), 1.0) for w in workload]


@pytest.mark.parametrize("loss", ["sum_var", "max_var", "max_var_floor"])
def test_the_ledger_charges_exactly_the_plans_cost(engine, titanic, loss: str) -> None:  # noqa: ANN001
    """The rho charged is the request's rho, and the plan computed for it costs exactly that, as a Fraction."""
    outcome = release_engine.release_marginals(engine, "titanic", "residual", WORKLOAD, rho="0.0125",
                                               options={"loss": loss}, seed=1)
    plan = plan_residuals(titanic.domain, _queries(titanic.domain, WORKLOAD), Fraction(1, 80), loss=loss)
    assert plan.cost() == Fraction(1, 80) == outcome.cost.rho
    assert net_charge(engine, outcome.release_id) == (0, 0, int(Fraction(1, 80) * 10**12))
    stored = answers.get_release(engine, outcome.release_id)
    assert stored.details["loss"] == loss
    assert sum(Fraction(v) for v in stored.details["rho_by_residual"].values()) == Fraction(1, 80)


def test_epsilon_delta_is_charged_the_converted_rho_and_the_plan_costs_it(engine, titanic) -> None:  # noqa: ANN001
    outcome = release_engine.release_marginals(engine, "titanic", "residual", WORKLOAD, epsilon="1", delta="1e-6",
                                               seed=2)
    expected = registry.get("residual").cost("1", "1e-6", None).rho
    assert expected == floor_to_grid(expected) and outcome.cost.rho == expected
    assert plan_residuals(titanic.domain, _queries(titanic.domain, WORKLOAD), expected).cost() == expected
    assert net_charge(engine, outcome.release_id)[2] == int(expected * 10**12)


def test_a_bad_loss_is_refused_before_anything_is_charged(engine, titanic) -> None:  # noqa: ANN001
    with pytest.raises(InvalidInput, match="loss must be one of"):
        release_engine.release_marginals(engine, "titanic", "residual", WORKLOAD, rho="0.01",
                                         options={"loss": "l1"})
    with engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM ledger_entries WHERE entry = 'charge'")).scalar() == 0


def _repeated(run, oracle: ArrayOracle, attributes: tuple[str, ...], repeats: int) -> tuple[np.ndarray, float]:  # noqa: ANN001
    """The unbiased estimates of ``attributes`` over ``repeats`` seeded releases, and the variance each reported."""
    draws, reported = [], set()
    for seed in range(repeats):
        residuals = run(NoiseSource(seed)).payload.residuals
        draws.append(residuals.marginal(attributes))
        reported.add(round(residuals.cell_variance(attributes), 9))
    assert len(reported) == 1  # public: the same for every release
    return np.array(draws), reported.pop()


def _check_law(draws: np.ndarray, truth: np.ndarray, variance: float) -> None:
    """Unbiased, with the reported per-cell variance. With n repeats, a cell's mean is off by at most 4.5
    sqrt(v / n) and the pooled sample variance (the mean over cells of each cell's sample variance, each with
    relative sd sqrt(2 / (n - 1)) for Gaussian noise, Laplace-sum noise being close to it) is within 4.5 of those
    sds of v; a variance formula off by 25% fails it at n = 1,500."""
    n = draws.shape[0]
    assert np.all(np.abs(draws.mean(axis=0) - truth) <= 4.5 * math.sqrt(variance / n))
    pooled = float(draws.var(axis=0, ddof=1).mean())
    assert abs(pooled / variance - 1) <= 4.5 * math.sqrt(2 / (n - 1)) + 0.02  # +0.02: Laplace's heavier tails


@pytest.fixture(scope="module")
def oracle(data_dir: Path) -> ArrayOracle:
    import pandas as pd

    folder = data_dir / "titanic"
    domain = Domain.from_json((folder / "titanic-domain.json").read_text())
    frame = pd.read_csv(folder / "titanic.csv")
    return ArrayOracle(domain, {n: frame[n].to_numpy() for n in domain.names})


@pytest.mark.slow
@pytest.mark.parametrize("attributes", [("Survived", "Pclass"), ("Survived",), ()])  # domain order
def test_residual_answers_are_unbiased_with_the_variance_they_report(oracle: ArrayOracle,
                                                                     attributes: tuple[str, ...]) -> None:
    """1,500 releases through the real mechanism (seeded in-process): every closure marginal -- a workload pair,
    a 1-way inside it, the total -- has the mean and the per-cell variance the release states."""
    queries = _queries(oracle.domain, WORKLOAD)
    draws, variance = _repeated(lambda noise: run_residual(oracle, queries, Fraction(1, 100), noise), oracle,
                                attributes, 1500)
    _check_law(draws, oracle.counts(attributes) if attributes else np.array(float(oracle.rows)), variance)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_direct_answers_have_the_variance_they_report(oracle: ArrayOracle, mechanism: str) -> None:
    """The least-squares reconstruction of a direct release: Survived is measured twice (in both pairs), so its
    variance is the combination's, not a single measurement's -- checked against 1,500 releases."""
    queries = _queries(oracle.domain, WORKLOAD)
    run = (lambda noise: direct.run_laplace(oracle, queries, Fraction(1, 2), noise)) if mechanism == "laplace" else (
        lambda noise: direct.run_gaussian(oracle, queries, Fraction(1, 100), noise))
    draws, variance = _repeated(run, oracle, ("Survived",), 1500)
    _check_law(draws, oracle.counts(("Survived",)), variance)


def test_answers_carry_standard_errors_and_the_model_is_fitted_once_and_stored(engine, titanic,  # noqa: ANN001
                                                                             monkeypatch) -> None:  # noqa: ANN001
    outcome = release_engine.release_marginals(engine, "titanic", "residual", WORKLOAD, rho="0.05", seed=3)
    release_id = outcome.release_id
    inside = answers.answer_marginal(engine, release_id, ["Survived", "Pclass"], allow_seeded=True)
    counts, errors = np.array(inside["counts"]), np.array(inside["standard_errors"])
    residuals = answers.release_payload(engine, release_id)[1].residuals
    assert counts.shape == errors.shape == (titanic.domain.size("Survived"), titanic.domain.size("Pclass"))
    assert np.all(counts >= 0) and np.allclose(errors, math.sqrt(residuals.cell_variance(("Pclass", "Survived"))))
    assert inside["coverage"]["measured"]
    with engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM release_models")).scalar() == 0  # no model yet

    seen: list[str] = []
    outside = answers.answer_marginal(engine, release_id, ["Sex", "Pclass"], allow_seeded=True,
                                      progress=lambda done, total, message: seen.append(message))
    assert outside["standard_errors"] is None and not outside["coverage"]["measured"]
    assert stored_models.FIT_MESSAGE in seen and "fitting the model" in seen
    with engine.connect() as connection:
        stored = connection.execute(text("SELECT release_id, details_json FROM release_models")).all()
    assert [r[0] for r in stored] == [release_id] and '"iterations"' in stored[0][1]

    # another process (an empty cache) reads the stored model instead of fitting again
    answers.clear_caches()
    monkeypatch.setattr(stored_models, "fit_model", lambda *a, **k: pytest.fail("refitted a stored model"))
    again = answers.answer_marginal(engine, release_id, ["Sex", "Pclass"], allow_seeded=True)
    assert np.allclose(again["counts"], outside["counts"])
    frame = answers.synthetic_frame(engine, release_id, 50, seed=1, allow_seeded=True)
    assert len(frame) == 50


def test_a_direct_release_fits_no_model_and_answers_its_workload_with_standard_errors(engine, titanic) -> None:  # noqa: ANN001
    outcome = release_engine.release_marginals(engine, "titanic", "gaussian", WORKLOAD, rho="0.05", seed=4)
    stored = answers.get_release(engine, outcome.release_id)
    assert "model_cliques" not in stored.details
    answer = answers.answer_marginal(engine, outcome.release_id, ["Pclass", "Survived"], allow_seeded=True)
    assert answer["standard_errors"] is not None and answer["coverage"]["measured"]
    with engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM release_models")).scalar() == 0


def test_cli_releases_with_a_loss_and_prints_standard_errors(engine, titanic) -> None:  # noqa: ANN001
    from typer.testing import CliRunner

    from service.cli import app

    runner = CliRunner()
    made = runner.invoke(app, ["release", "marginals", "titanic", "--mechanism", "residual", "--workload",
                               "all-1way", "--loss", "max_var", "--rho", "0.01", "--quiet", "--json"])
    assert made.exit_code == 0, made.output
    release_id = json.loads(made.output)["release_id"]
    assert answers.get_release(engine, release_id).details["loss"] == "max_var"
    body = json.loads(runner.invoke(app, ["marginal", str(release_id), "Sex", "--json"]).output)
    assert len(body["standard_errors"]) == titanic.domain.size("Sex") and body["coverage"]["measured"]
    human = runner.invoke(app, ["marginal", str(release_id), "Sex"])
    assert human.exit_code == 0 and "standard error of each cell" in human.output
    refused = runner.invoke(app, ["release", "marginals", "titanic", "--mechanism", "residual", "--loss", "l1",
                                  "--rho", "0.01"])
    assert refused.exit_code == 2 and "loss must be one of" in refused.output
