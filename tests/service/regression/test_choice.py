"""The mechanism rule of a new DD-SSP release (issue 9): public quantities only, the residual plan weighted toward the
regression's Z^T Z for a narrow linear design, AIM otherwise; and DD-SSP answered from the residual release."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from estimators.residual.regression_queries import DEFAULT_RIDGE_FACTOR, gram_noise_scale, regression_plan
from service.regression.choice import RESIDUAL_MAX_PAIR_CELLS, RESIDUAL_MAX_PAIRS, marginal_mechanism_for, pair_cells
from service.regression.design import build_design
from service.regression.fit import fit as fit_regression
from service.releases import answers
from tests.support.datasets import titanic_with_budget
from workloads.domain import Domain


def _design(data_dir: Path, domain_file: str, target: str, task: str = "linear",  # noqa: ANN202
            features: list[str] | None = None):
    domain = Domain.from_json((data_dir / domain_file).read_text())
    return build_design(domain, task, target, features, None, False)


@pytest.mark.parametrize(("domain_file", "target", "expected"), [
    ("adult/adult-domain.json", "education-num", "residual"),  # 14 columns (no education): 91 pairs, 31,066 cells
    ("acs/ACSincome-LIN-domain.json", "PINCP", "residual"),  # 36 pairs, 29,050 cells
    ("acs/ACSmobility-domain.json", "AGEP", "aim"),  # 210 pairs
    ("nist_taxi/nist-taxi-domain.json", "trip_total", "aim"),  # 46,734 pair cells
])
def test_the_rule_separates_the_measured_tables(data_dir: Path, domain_file: str, target: str,
                                                expected: str) -> None:
    features = None
    if domain_file.startswith("adult"):  # the regression page's adult design: every column but education
        names = json.loads((data_dir / domain_file).read_text())
        features = [n for n in names if n not in ("education", target)]
    design = _design(data_dir, domain_file, target, features=features)
    pairs, cells = pair_cells(design)
    assert (pairs <= RESIDUAL_MAX_PAIRS and cells <= RESIDUAL_MAX_PAIR_CELLS) == (expected == "residual")
    for epsilon in (Fraction(1, 20), Fraction(2)):
        assert marginal_mechanism_for(design, "dd-ssp", epsilon, Fraction(1, 10**5)) == expected


def test_aim_synth_and_logistic_dd_ssp_keep_aim(data_dir: Path) -> None:
    design = _design(data_dir, "acs/ACSincome-LIN-domain.json", "PINCP")
    assert marginal_mechanism_for(design, "aim-synth", Fraction(1), Fraction(1, 10**5)) == "aim"
    logistic = _design(data_dir, "adult/adult-domain.json", "income>50K", task="logistic")
    assert marginal_mechanism_for(logistic, "dd-ssp", Fraction(1), Fraction(1, 10**5)) == "aim"


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "10", "1e-4")


def test_fit_without_a_mechanism_releases_the_regression_weighted_plan(engine, titanic) -> None:  # noqa: ANN001
    """DD-SSP without a stored release: the rule picks residual, the release's plan is the regression's (its
    recorded per-residual rho equal the regression plan's, summing to the rho charged), and the answer reads the
    unbiased statistics with the public ridge."""
    outcome = fit_regression(engine, "titanic", "linear", "Fare", ["Pclass", "Sex", "SibSp"], method="dd-ssp",
                             epsilon=1, delta=1e-6, intercept=True, seed=5)
    assert not outcome.reused and outcome.release_mechanism == "residual"
    release = answers.get_release(engine, outcome.release_id)
    assert release.details["loss"] == "regression" and release.params["options"]["regression"]["target"] == "Fare"
    plan = regression_plan(outcome.design, outcome.cost.rho)
    assert plan.cost() == outcome.cost.rho
    assert release.details["rho_by_residual"] == {"×".join(r) or "total": str(plan.residual_cost(r))
                                                  for r in plan.residuals}
    residuals = answers.release_payload(engine, outcome.release_id)[1].residuals
    assert outcome.details["ridge"] == pytest.approx(DEFAULT_RIDGE_FACTOR * gram_noise_scale(plan, outcome.design))
    assert outcome.details["ridge"] == pytest.approx(DEFAULT_RIDGE_FACTOR * gram_noise_scale(residuals,
                                                                                             outcome.design))
    assert outcome.details["coverage"]["measured"] or not outcome.details["coverage"]["unmeasured_pairs"]
    # a named mechanism overrides the rule
    named = fit_regression(engine, "titanic", "linear", "Fare", ["Pclass", "Sex", "SibSp"], method="dd-ssp",
                           epsilon=1, delta=1e-6, intercept=True, seed=6, mechanism="gaussian", reuse=False)
    assert named.release_mechanism == "gaussian" and "ridge" in named.details
