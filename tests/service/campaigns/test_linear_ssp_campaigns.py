"""``linear-ssp`` as a campaign: create (with a public table's transform, or stated bounds), simulate, fit; the
aggregate against the participants' true statistics within a tolerance from the randomizer's known variance, the fit
equal to the estimator on the stored aggregate (mapped to the features' own units), its standard errors against the
truth, the ledger's charge exactly the stated (epsilon, delta), and bad parameters refused before anything is
stored."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import text

from estimators.local.aggregate import ReportAggregate
from estimators.local.linear_ssp import SspLinearRegression
from service.campaigns import campaigns, estimates, simulate
from service.campaigns.public_tables import PublicColumn, store_public_table
from service.errors import InvalidInput
from tests.support.campaign_rows import aggregate_sums, ledger_reports
from workloads.local.randomizers.regression_statistics import regression_statistics

TRUTH = np.array([1.5, -0.4])  # coefficients of x1, x2 in their own units
INTERCEPT = 2.0


def _people(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features with non-zero means and unequal spreads, y = 2 + 1.5 x1 - 0.4 x2 + small noise."""
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.normal(3.0, 0.5, n), rng.normal(-1.0, 2.0, n)])
    return x, INTERCEPT + x @ TRUTH + rng.normal(0.0, 0.1, n)


def _stored_aggregate(engine, campaign: str) -> ReportAggregate:  # noqa: ANN001
    """Round 0's running sums as the service stored them."""
    with engine.connect() as connection:
        raw = connection.execute(text("SELECT r.aggregate_json FROM campaign_rounds r JOIN campaigns c ON c.id = "
                                      "r.campaign_id WHERE c.name = :c AND r.round_index = 0"),
                                 {"c": campaign}).scalar_one()
    return ReportAggregate.from_json(json.loads(raw))


def _public(engine, n: int = 2000) -> None:  # noqa: ANN001
    x, _ = _people(n, seed=99)
    store_public_table(engine, "pub", [PublicColumn(f, "numeric") for f in ("x1", "x2")], x, "test")


def test_l2ball_campaign_end_to_end(engine) -> None:  # noqa: ANN001
    n, eps = 40_000, 2.0
    _public(engine)
    campaigns.create_campaign(engine, "ssp", "linear-ssp", ["x1", "x2"], "y", public="pub", epsilon=eps,
                              options={"participants": n, "label_bound": 4.0})
    info = campaigns.get_campaign(engine, "ssp")
    spec, transform = info.spec, info.transform
    assert (spec.randomizer, spec.delta, spec.dimension, spec.length) == ("l2ball", 0.0, 2, 8)
    assert transform.source == "public table pub"
    x, y = _people(n, seed=1)
    simulate.simulate(engine, "ssp", x, y, seed=2)
    mean = aggregate_sums(engine, "ssp")["statistics"] / n
    # every entry of a report has variance at most B^2 / D around the participant's statistic: 5 of those
    truth = regression_statistics(transform.apply(x), (y - 0.0), spec.norm_bound, spec.label_bound).mean(axis=0)
    np.testing.assert_array_less(np.abs(mean - truth), 5 * math.sqrt(spec.report_variance / n))
    fit = estimates.fit_campaign(engine, "ssp", "linear")
    assert list(fit.coefficients) == ["x1", "x2", "(intercept)"] and fit.reports == n
    # the fit is the estimator on the stored aggregate, mapped back through the public transform
    direct = SspLinearRegression().fit(_stored_aggregate(engine, "ssp"), spec)
    scale, center = np.asarray(transform.scale), np.asarray(transform.center)
    np.testing.assert_allclose([fit.coefficients["x1"], fit.coefficients["x2"]], direct.coef_ / scale, rtol=1e-9)
    assert fit.coefficients["(intercept)"] == pytest.approx(direct.intercept_ - (direct.coef_ / scale) @ center,
                                                            rel=1e-9)
    # standard errors: positive, and the truth within 4 of them (labels rarely clip at B = 4 here)
    errors = fit.standard_errors
    assert errors is not None and set(errors) == set(fit.coefficients) and min(errors.values()) > 0
    for name, value in (("x1", TRUTH[0]), ("x2", TRUTH[1]), ("(intercept)", INTERCEPT)):
        assert abs(fit.coefficients[name] - value) < 4 * errors[name], name
    body = fit.to_json()
    assert body["standard_errors"] == errors and body["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
    assert fit.influence.per_report is not None and fit.influence.intercept is not None
    # the ledger: one report per participant, each exactly (eps, 0): the stated pure-epsilon charge
    rows = ledger_reports(engine, "ssp")
    assert len({r[0] for r in rows}) == n and {(r[2], r[3]) for r in rows} == {(int(eps * 1e12), 0)}
    assert spec.participant_cost("all") == (eps, 0.0)


def test_gaussian_option_charges_epsilon_and_delta(engine) -> None:  # noqa: ANN001
    n, eps, delta = 2_000, 1.0, 1e-6
    campaigns.create_campaign(engine, "gauss", "linear-ssp", ["x1", "x2"], "y", epsilon=eps, delta=delta,
                              options={"randomizer": "gaussian", "feature_bounds": {"x1": [0, 6], "x2": [-7, 5]},
                                       "label_bound": 4.0})
    spec = campaigns.get_campaign(engine, "gauss").spec
    assert spec.randomizer == "gaussian" and spec.norm_bound == pytest.approx(math.sqrt(2))
    x, y = _people(n, seed=3)
    simulate.simulate(engine, "gauss", x, y, seed=4)
    sums = aggregate_sums(engine, "gauss")["statistics"]
    assert np.all(sums / spec.noise.grid == np.floor(sums / spec.noise.grid))  # sums of grid multiples
    fit = estimates.fit_campaign(engine, "gauss", "linear")
    assert fit.standard_errors is not None and fit.details["randomizer"] == "gaussian"
    rows = ledger_reports(engine, "gauss")
    assert len(rows) == n and {(r[2], r[3]) for r in rows} == {(int(eps * 1e12), rows[0][3])} and rows[0][3] > 0
    assert spec.participant_cost("all") == (eps, delta)


@pytest.mark.parametrize(
    ("options", "kwargs", "pattern"),
    [
        ({"norm_bound": 2.0}, {"delta": 1e-6}, "protocol 'linear-ssp': delta must be 0 with the l2ball randomizer"),
        ({"norm_bound": 2.0, "randomizer": "gaussian"}, {}, "protocol 'linear-ssp': delta must be in \\(0, 1\\)"),
        ({"norm_bound": 2.0, "randomizer": "privunit"}, {}, "option randomizer must be one of"),
        ({"norm_bound": 2.0, "ridge": -1}, {}, "option ridge must be a number >= 0"),
        ({"norm_bound": 0}, {}, "option norm_bound must be a finite positive number"),
        ({}, {}, "linear-ssp needs option norm_bound"),
        ({"norm_bound": 2.0, "label_bound": "1"}, {}, "option label_bound must be a number"),
    ],
)
def test_bad_parameters_are_refused(engine, options, kwargs, pattern) -> None:  # noqa: ANN001
    with pytest.raises(InvalidInput, match=pattern):
        campaigns.create_campaign(engine, "bad", "linear-ssp", ["a", "b"], "y", epsilon=1.0, options=options,
                                  **kwargs)
    assert campaigns.list_campaigns(engine) == []


def test_a_target_is_required(engine) -> None:  # noqa: ANN001
    with pytest.raises(InvalidInput, match="needs a target"):
        campaigns.create_campaign(engine, "bad", "linear-ssp", ["a"], None, epsilon=1.0, options={"norm_bound": 1})
    assert pd.DataFrame(campaigns.list_campaigns(engine)).empty


def test_forged_reports_refused_accepted_extremes_move_the_fit_within_its_influence(engine) -> None:  # noqa: ANN001
    """A report off the randomizer's sphere is refused and nothing is stored; a report the server accepts (on the
    sphere, along an axis) moves the coefficients (features' own units) and the intercept by at most the bounds the
    previous fit stated."""
    from service.campaigns import submission

    campaigns.create_campaign(engine, "forge", "linear-ssp", ["x1", "x2"], "y", epsilon=2.0,
                              options={"participants": 10_000, "feature_bounds": {"x1": [0, 6], "x2": [-7, 5]},
                                       "label_bound": 4.0})
    x, y = _people(3_000, seed=5)
    simulate.simulate(engine, "forge", x, y, seed=6)
    spec = campaigns.get_campaign(engine, "forge").spec

    def submit(report: np.ndarray, tag: str) -> None:
        submission.submit_reports(engine, "forge", 0, {"statistics": report[np.newaxis, :]},
                                  submission.Submitter.simulator(tag), [tag])

    with pytest.raises(InvalidInput, match="l2 norm"):
        submit(np.full(spec.length, spec.report_norm / math.sqrt(spec.length)) * 1.001, "forged")
    assert len(ledger_reports(engine, "forge")) == 3_000
    for k, sign in ((0, 1.0), (3, -1.0), (5, 1.0), (7, -1.0)):
        before = estimates.fit_campaign(engine, "forge", "linear")
        submit(sign * spec.report_norm * np.eye(spec.length)[k], f"extreme {k}")
        after = estimates.fit_campaign(engine, "forge", "linear")
        move = np.hypot(after.coefficients["x1"] - before.coefficients["x1"],
                        after.coefficients["x2"] - before.coefficients["x2"])
        assert move <= before.influence.per_report
        assert abs(after.coefficients["(intercept)"] - before.coefficients["(intercept)"]) <= before.influence.intercept
