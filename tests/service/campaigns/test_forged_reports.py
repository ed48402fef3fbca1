"""Issue 18, findings 2 and 6 (estimator half): reports the randomizer cannot emit are refused, every local estimate
lies in its feasible set, and the influence bound a fit reports is an upper bound on what one accepted report moves."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from service.campaigns import campaigns, estimates, simulate, submission
from service.errors import InvalidInput


def _line(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=(n, 1))
    return x, 0.5 * x[:, 0] + rng.uniform(-0.05, 0.05, size=n)


def _submit(engine, name: str, fields: dict, tag: str) -> submission.SubmissionResult:  # noqa: ANN001
    batch = {key: np.asarray(value, dtype=float)[np.newaxis, ...] for key, value in fields.items()}
    return submission.submit_reports(engine, name, 0, batch, submission.Submitter.simulator(tag), [tag])


# ----------------------------------------------------------------------------------------------------- finding 2
@pytest.fixture
def one_bit(engine):  # noqa: ANN001, ANN201
    """A 1-bit Bernstein campaign (3 grid points) with 3,000 honest reports and its round still open."""
    campaigns.create_campaign(engine, "bit", "bernstein-1bit", ["x"], "y", epsilon=2.0,
                              options={"participants": 10_000, "degree": 2})
    x, y = _line(3_000, seed=3)
    simulate.simulate(engine, "bit", x, y, seed=4)
    return campaigns.get_campaign(engine, "bit").spec


def test_the_issues_forged_one_bit_report_is_refused(engine, one_bit) -> None:  # noqa: ANN001
    bound = one_bit.string_bound  # the issue's 122 at epsilon 1; the schema's own bound here
    before = estimates.fit_campaign(engine, "bit", "linear").coefficients["x"]
    forged = {"count": np.zeros(3), "weighted": np.array([-bound, bound, -bound])}
    with pytest.raises(InvalidInput, match="'count' must be one-hot") as refused:
        _submit(engine, "bit", forged, "forger")
    assert refused.value.code == "invalid_report"
    # one-hot, but weight off the hot entry: also not a report the randomizer emits
    with pytest.raises(InvalidInput, match="'weighted' must be 0 off the grid point"):
        _submit(engine, "bit", {"count": [1.0, 0.0, 0.0], "weighted": [bound, -bound, 0.0]}, "forger")
    with pytest.raises(InvalidInput, match="count"):  # two hot entries (the norm refuses it), or a fraction
        _submit(engine, "bit", {"count": [1.0, 1.0, 0.0], "weighted": [0.0, 0.0, 0.0]}, "forger")
    with pytest.raises(InvalidInput, match="one-hot"):
        _submit(engine, "bit", {"count": [0.5, 0.0, 0.0], "weighted": [0.0, 0.0, 0.0]}, "forger")
    assert estimates.fit_campaign(engine, "bit", "linear").coefficients["x"] == before
    assert campaigns.get_campaign(engine, "bit").rounds[0].reports == 3_000
    # what the randomizer can emit is still accepted: b y at the hot entry, y anywhere in the schema's range
    _submit(engine, "bit", {"count": [0.0, 1.0, 0.0], "weighted": [0.0, bound, 0.0]}, "extreme")
    _submit(engine, "bit", {"count": [0.0, 0.0, 1.0], "weighted": [0.0, 0.0, 0.0]}, "zero-bit")
    assert campaigns.get_campaign(engine, "bit").rounds[0].reports == 3_002


# ----------------------------------------------------------------------------------------------------- finding 4
def test_a_label_ldp_report_carries_no_function_of_the_features(engine, tmp_path) -> None:  # noqa: ANN001
    """The device sends (public row id, tilde y): two participants with the same label and device randomness but
    different features send the same label, and the server forms x tilde y from its own copy of the public table."""
    from service.client.device import make_report
    from tests.support.campaign_data import load_public

    public = np.array([[1.0, 0.0, -0.5], [0.25, 2.0, 1.0], [-1.0, -1.0, 0.5]])
    load_public(engine, tmp_path, public)
    campaigns.create_campaign(engine, "labels", "label-ldp", ["a", "b", "c"], "y", "pub", 2.0, 1e-5,
                              {"sparsity": 2, "participants": 10, "standardize": False})
    state = campaigns.public_state(campaigns.get_campaign(engine, "labels"))
    sent = [make_report(state, [row], 0.7, np.random.default_rng(11))[1] for row in (0, 1)]
    assert [set(report) for report in sent] == [{"row", "label"}] * 2
    assert [float(report["row"]) for report in sent] == [0.0, 1.0]
    assert float(sent[0]["label"]) == float(sent[1]["label"])  # nothing in it depends on the features
    with pytest.raises(ValueError, match="the id of your row"):  # features are not what a device sends
        make_report(state, public[0], 0.7)
    for tag, report in zip(("p0", "p1"), sent, strict=True):
        _submit(engine, "labels", report, tag)
    fit = estimates.fit_campaign(engine, "labels", "iht")
    assert fit.reports == 2
    # the server's sum is its own rows times the labels sent
    from tests.support.campaign_rows import aggregate_sums

    label = float(sent[0]["label"])
    np.testing.assert_allclose(aggregate_sums(engine, "labels")["xy"], (public[0] + public[1]) * label, rtol=1e-12)
    with pytest.raises(InvalidInput, match="whole-number id"):
        _submit(engine, "labels", {"row": 1.5, "label": 0.0}, "forger")
    with pytest.raises(InvalidInput, match="outside its allowed range"):
        _submit(engine, "labels", {"row": 3.0, "label": 0.0}, "forger")


# ----------------------------------------------------------------------------------------------------- finding 6
def _schema(engine, name: str, round_index: int = 0):  # noqa: ANN001, ANN202
    info = campaigns.get_campaign(engine, name)
    return info.spec.report_schema(round_index, info.round_state(round_index))


@pytest.fixture
def average(engine):  # noqa: ANN001, ANN201
    """ldp-avg on [0, 1] at epsilon 1, 2,000 honest participants with values near 0.3, the round open."""
    campaigns.create_campaign(engine, "avg", "ldp-avg", "v", None, None, 1.0, 0,
                              {"lower": 0, "upper": 1, "participants": 100_000})
    values = np.random.default_rng(0).uniform(0.2, 0.4, size=2_000)
    simulate.simulate(engine, "avg", values[:, None], seed=1)
    return "avg"


def test_the_issues_forged_in_range_reports_leave_the_mean_in_its_interval(engine, average) -> None:  # noqa: ANN001
    """Issue 18 finding 6: 31 forged reports, each at the top of the validated range, took the mean of [0, 1] to 1.23.
    The number of forged reports is the fewest that push the average past 1.2 with the schema's own bound."""
    (field,) = _schema(engine, average).fields
    before = estimates.fit_campaign(engine, average, "mean").coefficients["v"]
    forged = math.ceil(2_000 * (1.2 - before) / (field.high - 1.2)) + 1
    submission.submit_reports(engine, average, 0, {"value": np.full(forged, field.high)},
                              submission.Submitter.simulator("forger"), [f"f{i}" for i in range(forged)])
    fit = estimates.fit_campaign(engine, average, "mean")
    assert 0.0 <= fit.coefficients["v"] <= 1.0  # the estimate stays in [lower, upper] ...
    assert fit.details["raw_mean"] > 1.2  # ... though the attack moved the average of the reports as in the issue
    assert fit.coefficients["v"] == 1.0


def test_one_extreme_accepted_report_moves_the_mean_by_at_most_its_influence(engine, average) -> None:  # noqa: ANN001
    (field,) = _schema(engine, average).fields
    for tag, extreme in (("top", field.high), ("bottom", field.low)):
        fit = estimates.fit_campaign(engine, average, "mean")
        bound = fit.to_json()["influence"]
        assert bound["of"] == "mean" and bound["norm"] == "abs" and bound["per_report"] > 0
        _submit(engine, average, {"value": extreme}, tag)
        moved = abs(estimates.fit_campaign(engine, average, "mean").coefficients["v"] - fit.coefficients["v"])
        # the top report attains the bound (the projection does not bind here): it is the supremum, not a loose one
        assert moved <= bound["per_report"] * (1 + 1e-9)
        if tag == "top":
            assert moved == pytest.approx(bound["per_report"], rel=1e-9)


def _corners(field, dimension: int) -> list[np.ndarray]:  # noqa: ANN001
    return [np.where(np.array(bits) == 1, field.high, field.low)
            for bits in itertools.product((0, 1), repeat=dimension)]


@pytest.mark.parametrize("gram", [False, True], ids=["public-covariance", "private-covariance"])
def test_one_extreme_accepted_stein_report_moves_w_ols_by_at_most_its_influence(engine, tmp_path, gram) -> None:  # noqa: ANN001
    """Every corner of the validated ranges (the extreme accepted reports), one at a time: w_ols moves by at most the
    influence bound the fit reported, with X^T X public (a fixed linear map) or from the reports (Weyl's bound)."""
    from tests.support.campaign_data import FEATURES, gaussian_rows, load_public

    load_public(engine, tmp_path, gaussian_rows(3000, seed=2))
    x = gaussian_rows(20_000, seed=3)
    y = np.clip(x @ np.array([0.5, -0.5, 0.25]), -1, 1)
    campaigns.create_campaign(engine, "glm", "stein-glm", FEATURES, "y", "pub", 8, 1e-6,
                              {"participants": 100_000, "gram": gram, "standardize": False,
                               "norm_bound": 3, "variant": "paper"})
    simulate.simulate(engine, "glm", x, y, seed=4)
    schema = {f.name: f for f in _schema(engine, "glm").fields}
    covariance = "private" if gram else "public"
    fit = estimates.fit_campaign(engine, "glm", "linear", covariance)
    bound = fit.to_json()["influence"]
    assert bound["of"] == "coefficients" and bound["norm"] == "l2"
    assert bound["per_report"] is not None and bound["per_report"] > 0
    before = np.array([fit.coefficients[f] for f in FEATURES])
    xy_corners = _corners(schema["xy"], 3)
    reports = ([{"xx": xx, "xy": xy} for xx in _corners(schema["xx"], 6)[::7] for xy in xy_corners] if gram
               else [{"xy": xy} for xy in xy_corners])
    worst = 0.0
    for index, report in enumerate(reports):
        stored = _round0_aggregate(engine, "glm")
        _submit(engine, "glm", report, f"extreme{index}")
        after = estimates.fit_campaign(engine, "glm", "linear", covariance)
        worst = max(worst, float(np.linalg.norm(np.array([after.coefficients[f] for f in FEATURES]) - before)))
        _round0_aggregate(engine, "glm", stored)
    assert 0 < worst <= bound["per_report"]


def _round0_aggregate(engine, name: str, value: str | None = None) -> str:  # noqa: ANN001
    """Round 0's stored running aggregate (JSON), or put ``value`` back (the test tries one report at a time)."""
    from sqlalchemy import text

    from db.engine import transaction

    with transaction(engine) as session:
        campaign = campaigns.get_campaign(engine, name).id
        if value is not None:
            session.execute(text("UPDATE campaign_rounds SET aggregate_json = :a WHERE campaign_id = :c AND "
                                 "round_index = 0"), {"a": value, "c": campaign})
            return value
        return session.execute(text("SELECT aggregate_json FROM campaign_rounds WHERE campaign_id = :c AND "
                                    "round_index = 0"), {"c": campaign}).scalar_one()


def test_one_extreme_accepted_label_report_moves_the_lasso_by_at_most_its_influence(engine, tmp_path) -> None:  # noqa: ANN001
    """label-ldp's penalised Lasso (lasso-raw) is 1/lambda_min(X^T X/m)-Lipschitz in the mean of x_row tilde y: the
    extreme accepted reports (the public row of largest norm, or each row, with the label at either end of its
    validated range) move it by at most the influence bound; IHT's bound is the diameter of its ball."""
    from tests.support.campaign_data import FEATURES, gaussian_rows, load_public

    public = gaussian_rows(400, seed=12)
    load_public(engine, tmp_path, public)
    y = np.clip(public @ np.array([0.5, 0.0, -0.25]), -1, 1)
    campaigns.create_campaign(engine, "labels", "label-ldp", FEATURES, "y", "pub", 4.0, 1e-6,
                              {"sparsity": 2, "participants": 10_000, "standardize": False, "alpha": 0.01})
    simulate.simulate(engine, "labels", public, y, seed=13)
    info = campaigns.get_campaign(engine, "labels")
    assert estimates.fit_campaign(engine, "labels", "iht").influence.per_report == 2.0 * info.spec.radius
    # the penalised Lasso (lasso-raw) is Lipschitz in b; the default lasso refits on its support, whose bound is the
    # diameter of the ball every refit lies in (larger: the support may change)
    fits = {model: estimates.fit_campaign(engine, "labels", model) for model in ("lasso-raw", "lasso")}
    bounds = {model: fit.to_json()["influence"]["per_report"] for model, fit in fits.items()}
    assert bounds["lasso"] is not None and bounds["lasso"] >= bounds["lasso-raw"]
    label = _schema(engine, "labels").fields[1]
    before = {model: np.array([fit.coefficients[f] for f in FEATURES]) for model, fit in fits.items()}
    worst = dict.fromkeys(fits, 0.0)
    for index, (row, value) in enumerate(itertools.product(range(0, 400, 40), (label.low, label.high))):
        stored = _round0_aggregate(engine, "labels")
        _submit(engine, "labels", {"row": float(row), "label": value}, f"extreme{index}")
        for model in fits:
            after = estimates.fit_campaign(engine, "labels", model)
            moved = np.array([after.coefficients[f] for f in FEATURES]) - before[model]
            worst[model] = max(worst[model], float(np.linalg.norm(moved)))
        _round0_aggregate(engine, "labels", stored)
    assert 0 < worst["lasso-raw"] <= bounds["lasso-raw"] and worst["lasso"] <= bounds["lasso"]
