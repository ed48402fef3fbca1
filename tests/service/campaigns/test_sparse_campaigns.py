"""The sparse-regression campaigns end to end (Wang & Xu 2019): LDP-IHT's rounds run by the service and played by
the simulator, the label protocol answering IHT and the Lasso from one collection, the ledger's spend, the
validators, and the parameters refused before anything is stored."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from estimators.local.sparse.iht import iht_step, label_iht_from_moments
from estimators.local.sparse.lasso import lasso_from_moments, refit_on_support
from service.campaigns import campaigns, estimates, simulate, submission
from service.errors import Conflict, InvalidInput, ServiceError
from tests.support.campaign_data import load_public
from tests.support.campaign_rows import aggregate_sums, ledger_reports
from workloads.local.randomizers.duchi_label import duchi_label_magnitude
from workloads.local.randomizers.gaussian_label import label_noise_sigma
from workloads.local.randomizers.l2ball import l2_ball_output_norm

P = 4
NAMES = ["a", "b", "c", "d"]
THETA = np.array([0.8, 0.0, -0.6, 0.0])


def sparse_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sec. 7.1's design at p = 4: x uniform in {-1, +1}^p, y = <x, theta*> + U[-0.05, 0.05]."""
    rng = np.random.default_rng(seed)
    x = rng.choice([-1.0, 1.0], size=(n, P))
    return x, x @ THETA + rng.uniform(-0.05, 0.05, size=n)


def _round_payloads(engine, campaign: str, round_index: int, width: int = P) -> np.ndarray:  # noqa: ANN001
    from db.engine import transaction
    from db.reports import read_payloads

    info = campaigns.get_campaign(engine, campaign)
    with transaction(engine) as session:
        return read_payloads(session, info.id, round_index, width)


def _round_payload_mean(engine, campaign: str, round_index: int) -> np.ndarray:  # noqa: ANN001
    return _round_payloads(engine, campaign, round_index).mean(axis=0)


def test_ldp_iht_campaign_runs_its_rounds_and_fits_a_known_answer(engine) -> None:  # noqa: ANN001
    n, eps, label_bound = 60_000, 8.0, 1.5
    created = campaigns.create_campaign(engine, "iht", "ldp-iht", NAMES, "y", epsilon=eps,
                                        options={"sparsity": 2, "participants": n, "rounds": 3,
                                                 "label_bound": label_bound})
    assert [r.status for r in created.rounds] == ["open", "pending", "pending"]
    assert [r.expected for r in created.rounds] == [20_000] * 3 and created.epsilon == eps and created.delta == 0
    x, y = sparse_rows(n, seed=1)
    result = simulate.simulate(engine, "iht", x, y, seed=2)
    assert result.reports == {0: 20_000, 1: 20_000, 2: 20_000}
    info = campaigns.get_campaign(engine, "iht")
    assert info.status == "closed"

    # the service's transitions and estimate are the IHT steps on the stored reports' means (a known answer)
    theta = np.zeros(P)
    for t in range(3):
        np.testing.assert_allclose(info.round_state(t).vector("theta", P), theta, atol=1e-12)
        theta = iht_step(theta, _round_payload_mean(engine, "iht", t), 1.0, 2)
    fit = estimates.fit_campaign(engine, "iht", "iht")
    coef = np.array([fit.coefficients[name] for name in NAMES])
    np.testing.assert_allclose(coef, theta, atol=1e-9)
    assert fit.coefficients["(intercept)"] == 0.0 and fit.kind == "regressor" and fit.reports == n
    assert fit.to_json()["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
    assert fit.details["rounds_used"] == 3 and fit.details["support"] == ["a", "c"]
    # every iterate lies in the ball of radius R = 1: one report moves the estimate at most across it
    assert np.linalg.norm(coef) <= 1.0 + 1e-12 and fit.to_json()["influence"]["per_report"] == 2.0

    # ... and close to theta*: with eta = 1 and E[x x^T] = I the last step is Trunc(theta* + noise), the noise a
    # mean of m = 20,000 reports of norm B, each coordinate's standard deviation at most B / sqrt(p m), plus the
    # sampling error of X^T X / m (about ||theta|| / sqrt(m)); 5 of those per coordinate fail with probability
    # below 1e-5 each
    c = math.sqrt(2) * 1.0 + label_bound
    coordinate_std = l2_ball_output_norm(P, 2.0 * c, eps) / math.sqrt(P * 20_000) + 1.0 / math.sqrt(20_000)
    assert np.linalg.norm(coef - THETA) < 5 * coordinate_std * math.sqrt(P)

    # the ledger: every participant reported once and spent exactly epsilon (Alg. 1, Thm. 4)
    rows = ledger_reports(engine, "iht")
    assert len(rows) == n and len({r[0] for r in rows}) == n
    assert {(r[2], r[3]) for r in rows} == {(int(eps * 1e12), 0)}


SEC71_P, SEC71_S = 100, 10
SEC71_LABEL_BOUND = math.sqrt(SEC71_S) + 0.05  # ||theta*||_1 <= sqrt(s) plus the noise bound (benchmarks.sparse)


@pytest.mark.parametrize(("variant", "steps", "clip"), [
    ({}, 1, 2.0),  # issue 20: T = 1, c = min(B_y, 2 R ||x|| / sqrt(p)) = 2
    ({"variant": "paper"}, math.ceil(math.log(2_560_000 / SEC71_P)), math.sqrt(SEC71_S) + SEC71_LABEL_BOUND),
])
def test_ldp_iht_defaults_on_sec71_design(engine, variant, steps, clip) -> None:  # noqa: ANN001
    names = [f"x{j}" for j in range(SEC71_P)]
    created = campaigns.create_campaign(engine, "iht", "ldp-iht", names, "y", epsilon=1.0, options={
        "sparsity": SEC71_S, "participants": 2_560_000, "label_bound": SEC71_LABEL_BOUND, **variant})
    assert created.spec.steps == steps and steps in (1, 11)
    assert created.spec.residual_bound == clip and created.spec.feature_norm_bound == 10.0
    assert [r.expected for r in created.rounds] == [2_560_000 // steps] * (steps - 1) + [
        2_560_000 - (2_560_000 // steps) * (steps - 1)]


def test_ldp_iht_default_needs_no_participants_and_explicit_options_win(engine) -> None:  # noqa: ANN001
    spec = campaigns.create_campaign(engine, "a", "ldp-iht", NAMES, "y", epsilon=1.0, options={"sparsity": 2}).spec
    assert (spec.steps, spec.residual_bound) == (1, 1.0)  # label_bound 1 < 2 R: the label bound binds
    spec = campaigns.create_campaign(engine, "b", "ldp-iht", NAMES, "y", epsilon=1.0, options={
        "sparsity": 2, "rounds": 4, "residual_bound": 3.0}).spec
    assert (spec.steps, spec.residual_bound) == (4, 3.0)


def _iht_error(engine, name: str, options: dict, x: np.ndarray, y: np.ndarray, theta: np.ndarray) -> float:  # noqa: ANN001
    names = [f"x{j}" for j in range(x.shape[1])]
    campaigns.create_campaign(engine, name, "ldp-iht", names, "y", epsilon=1.0, options=options)
    simulate.simulate(engine, name, x, y, seed=12)
    fit = estimates.fit_campaign(engine, name, "iht")
    coef = np.array([fit.coefficients[k] for k in names])
    return float(np.linalg.norm(coef - theta) / np.linalg.norm(theta))


def test_ldp_iht_new_defaults_learn_where_the_papers_do_not(engine) -> None:  # noqa: ANN001
    """Isotropic design, p = 10, s = 2, eps = 1, n = 20,000: the defaults (T = 1, c = B_y) give each coordinate a
    noise of B / sqrt(p n), B the report norm at r = sqrt(p) c (derived error about 0.12); the paper's (T = 8, c =
    sqrt(s) + B_y) split n into 8 groups at twice the clip (about 0.68, and truncation errors on top)."""
    p, s, n = 10, 2, 20_000
    rng = np.random.default_rng(11)
    theta = np.zeros(p)
    theta[[1, 6]] = [0.8, -0.6]
    x = rng.choice([-1.0, 1.0], size=(n, p))
    y = x @ theta + rng.uniform(-0.05, 0.05, n)
    options = {"sparsity": s, "participants": n, "label_bound": math.sqrt(s) + 0.05}
    new = _iht_error(engine, "new", options, x, y, theta)
    old = _iht_error(engine, "old", {**options, "variant": "paper"}, x, y, theta)
    derived = math.sqrt(s) * l2_ball_output_norm(p, math.sqrt(p) * (math.sqrt(s) + 0.05), 1.0) / math.sqrt(p * n)
    assert new < 3 * derived < 0.4 and old > 2 * new


def test_ldp_iht_coordinate_randomizer_end_to_end(engine) -> None:  # noqa: ANN001
    """randomizer=coordinate: reports (coordinate, +-p C) stored as sent, the running sum their dense expansion, the
    estimate the IHT step on it, every participant charged epsilon once, and theta* recovered within the derived
    noise: each coordinate of the mean report has standard deviation at most sqrt(p) C / sqrt(n)."""
    n, eps, label_bound = 40_000, 4.0, 1.5
    created = campaigns.create_campaign(engine, "coord", "ldp-iht", NAMES, "y", epsilon=eps, options={
        "sparsity": 2, "participants": n, "label_bound": label_bound, "randomizer": "coordinate"})
    spec = created.spec
    assert (spec.randomizer, spec.feature_bound, spec.steps, spec.residual_bound) == ("coordinate", 1.0, 1, 1.5)
    x, y = sparse_rows(n, seed=21)
    assert simulate.simulate(engine, "coord", x, y, seed=22).reports == {0: n}
    payloads = _round_payloads(engine, "coord", 0, width=2)
    magnitude = P * duchi_label_magnitude(1.5, eps)
    assert set(np.unique(payloads[:, 0])) == set(range(P)) and set(np.unique(np.abs(payloads[:, 1]))) == {magnitude}
    dense = np.zeros((n, P))
    dense[np.arange(n), payloads[:, 0].astype(int)] = payloads[:, 1]
    np.testing.assert_allclose(aggregate_sums(engine, "coord")["gradient"], dense.sum(axis=0), rtol=1e-9)
    fit = estimates.fit_campaign(engine, "coord", "iht")
    coef = np.array([fit.coefficients[name] for name in NAMES])
    np.testing.assert_allclose(coef, iht_step(np.zeros(P), dense.mean(axis=0), 1.0, 2), atol=1e-9)
    coordinate_std = math.sqrt(P) * duchi_label_magnitude(1.5, eps) / math.sqrt(n) + 1.0 / math.sqrt(n)
    assert np.linalg.norm(coef - THETA) < 5 * coordinate_std * math.sqrt(P)
    assert {(r[2], r[3]) for r in ledger_reports(engine, "coord")} == {(int(eps * 1e12), 0)}


def test_a_forged_coordinate_report_is_refused_and_stored_nowhere(engine) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "coord", "ldp-iht", NAMES, "y", epsilon=1.0,
                              options={"sparsity": 2, "randomizer": "coordinate", "feature_bound": 2.0})
    magnitude = campaigns.get_campaign(engine, "coord").spec.coordinate_magnitude
    assert magnitude == P * duchi_label_magnitude(2.0, 1.0)  # b = feature_bound * c, c = label_bound 1
    for report, pattern in (({"coordinate": [0, 2.5], "value": [magnitude, magnitude]}, "whole number"),
                            ({"coordinate": [0, P], "value": [magnitude, magnitude]}, "outside its allowed range"),
                            ({"coordinate": [0, 1], "value": [magnitude, magnitude / 2]}, "exactly \\+pC or -pC")):
        with pytest.raises(InvalidInput, match=pattern):
            submission.submit_reports(engine, "coord", 0, report, submission.Submitter.simulator("f"), ["a", "b"])
    assert ledger_reports(engine, "coord") == []


def test_a_running_ldp_iht_campaign_answers_with_the_rounds_done(engine) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "iht", "ldp-iht", NAMES, "y", epsilon=4.0,
                              options={"sparsity": 2, "rounds": 3})
    with pytest.raises(Conflict, match="no reports yet"):
        estimates.fit_campaign(engine, "iht", "iht")
    x, y = sparse_rows(300, seed=3)
    state = campaigns.public_state(campaigns.get_campaign(engine, "iht"))
    from service.client.device import make_report

    index, report = make_report(state, x, y, np.random.default_rng(4))
    submission.submit_reports(engine, "iht", index, report, submission.Submitter.simulator("t"),
                              [str(i) for i in range(300)])
    fit = estimates.fit_campaign(engine, "iht", "iht")
    assert fit.details["rounds_used"] == 1 and fit.notes[0] == "the estimate after 1 of the 3 rounds"
    np.testing.assert_allclose([fit.coefficients[k] for k in NAMES],
                               iht_step(np.zeros(P), _round_payload_mean(engine, "iht", 0), 1.0, 2), atol=1e-9)


def test_a_forged_gradient_is_refused_and_stored_nowhere(engine) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "iht", "ldp-iht", NAMES, "y", epsilon=1.0, options={"sparsity": 2, "rounds": 2})
    info = campaigns.get_campaign(engine, "iht")
    bound = info.spec.report_norm
    forged = np.full((2, P), 0.9 * bound)  # each entry allowed, the norm 1.8 B is not
    with pytest.raises(InvalidInput, match="report 0: field 'gradient' has l2 norm") as refused:
        submission.submit_reports(engine, "iht", 0, {"gradient": forged}, submission.Submitter.simulator("f"),
                                  ["p1", "p2"])
    assert refused.value.code == "invalid_report"
    with pytest.raises(InvalidInput, match="field 'gradient' must have shape"):
        submission.submit_reports(engine, "iht", 0, {"gradient": np.zeros((1, P + 1))},
                                  submission.Submitter.simulator("f"), ["p1"])
    assert ledger_reports(engine, "iht") == []
    assert campaigns.get_campaign(engine, "iht").rounds[0].reports == 0
    with pytest.raises(InvalidInput, match="covariance applies to the Stein GLM campaigns"):
        estimates.fit_campaign(engine, "iht", "iht", covariance="pooled")


@pytest.fixture
def label_campaign(engine, tmp_path: Path) -> tuple[np.ndarray, float]:  # noqa: ANN001
    n, eps, delta, label_bound = 20_000, 2.0, 1e-5, 1.5
    x, y = sparse_rows(n, seed=5)
    load_public(engine, tmp_path, x, columns=NAMES)
    campaigns.create_campaign(engine, "labels", "label-ldp", NAMES, "y", "pub", eps, delta,
                              {"sparsity": 2, "participants": n, "label_bound": label_bound, "standardize": False,
                               "randomizer": "gaussian"})
    simulate.simulate(engine, "labels", x, y, seed=6)
    return x, label_noise_sigma(label_bound, eps, delta)


def test_label_ldp_answers_iht_and_the_lasso_from_one_collection(engine, label_campaign) -> None:  # noqa: ANN001
    x, sigma = label_campaign
    n = x.shape[0]
    info = campaigns.get_campaign(engine, "labels")
    assert info.status == "closed" and info.spec.iterations == math.ceil(math.log(n / P))
    # the stored reports are (public row id, tilde y); the server's moment is the mean of x_row tilde y
    stored = _round_payloads(engine, "labels", 0, width=2)
    code = np.array([1.0, 2.0, 4.0, 8.0])  # one number per point of {-1, +1}^4: the rows named are the rows simulated
    assert np.array_equal(np.sort(x[stored[:, 0].astype(int)] @ code), np.sort(x @ code))
    gram, moment = x.T @ x / n, (x[stored[:, 0].astype(int)] * stored[:, 1:]).mean(axis=0)
    iht = estimates.fit_campaign(engine, "labels", "iht")
    lasso = estimates.fit_campaign(engine, "labels", "lasso")
    assert iht.reports == lasso.reports == n
    iht_coef = np.array([iht.coefficients[k] for k in NAMES])
    lasso_coef = np.array([lasso.coefficients[k] for k in NAMES])
    # known answers: the estimators on (public X^T X / n, mean of the stored reports)
    expected = label_iht_from_moments(gram, moment, 2, info.spec.iterations, 1.0).theta
    np.testing.assert_allclose(iht_coef, expected, atol=1e-9)
    raw = lasso_from_moments(gram, moment, lasso.details["alpha"], "t")
    np.testing.assert_allclose(lasso_coef, refit_on_support(gram, moment, raw), atol=1e-6)  # the default: refit
    raw_fit = estimates.fit_campaign(engine, "labels", "lasso-raw")
    np.testing.assert_allclose([raw_fit.coefficients[k] for k in NAMES], raw, atol=1e-6)
    assert info.spec.randomizer == "gaussian" and lasso.details["randomizer"] == "gaussian"
    # ... and near theta*: b = X^T tilde y / n has coordinate noise sigma / sqrt(n); IHT (G ~ I) lands at
    # Trunc(theta* + noise), the Lasso at the soft-threshold of it, off by at most alpha more per coordinate
    noise = 5 * sigma / math.sqrt(n) + 5 / math.sqrt(n)
    assert np.linalg.norm(iht_coef - THETA) < math.sqrt(P) * noise
    assert np.linalg.norm(lasso_coef - THETA) < math.sqrt(P) * (noise + lasso.details["alpha"])
    assert iht.details["support"] == ["a", "c"]
    # one collection, one spend: each participant once, (epsilon, delta) of the campaign (2, 1e-5)
    rows = ledger_reports(engine, "labels")
    assert len(rows) == n == len({r[0] for r in rows})
    assert {(r[2], r[3]) for r in rows} == {(2 * 10**12, 10**13)}


def test_label_ldp_default_is_the_pure_randomizer_end_to_end(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """Issue 20: a new label-ldp campaign reports +-C (Duchi et al.), costs (epsilon, 0), and its refit Lasso and IHT
    land near theta* (b has coordinate noise at most C / sqrt(n))."""
    n, eps, label_bound = 20_000, 2.0, 1.5
    x, y = sparse_rows(n, seed=5)
    load_public(engine, tmp_path, x, columns=NAMES)
    campaigns.create_campaign(engine, "pure", "label-ldp", NAMES, "y", "pub", eps, 1e-5,
                              {"sparsity": 2, "participants": n, "label_bound": label_bound, "standardize": False})
    simulate.simulate(engine, "pure", x, y, seed=6)
    info = campaigns.get_campaign(engine, "pure")
    assert info.spec.randomizer == "pure" and info.spec.delta == 0.0
    magnitude = duchi_label_magnitude(label_bound, eps)
    stored = _round_payloads(engine, "pure", 0, width=2)
    assert set(np.unique(stored[:, 1])) == {-magnitude, magnitude}
    rows = ledger_reports(engine, "pure")
    assert len(rows) == n and {(r[2], r[3]) for r in rows} == {(2 * 10**12, 0)}  # (epsilon, 0): no delta spent
    noise = 5 * magnitude / math.sqrt(n) + 5 / math.sqrt(n)
    for model in ("iht", "lasso"):
        fit = estimates.fit_campaign(engine, "pure", model)
        coef = np.array([fit.coefficients[k] for k in NAMES])
        assert np.linalg.norm(coef - THETA) < math.sqrt(P) * noise, model
        assert fit.details["randomizer"] == "pure" and fit.details["label_noise_std"] == magnitude


def test_a_lasso_solver_failure_is_named(engine, label_campaign, monkeypatch) -> None:  # noqa: ANN001
    import cvxpy as cp

    def infeasible(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        return None

    monkeypatch.setattr(cp.Problem, "solve", infeasible)
    monkeypatch.setattr(cp.Problem, "status", property(lambda self: "infeasible_inaccurate"))
    with pytest.raises(ServiceError, match="infeasible_inaccurate") as failed:
        estimates.fit_campaign(engine, "labels", "lasso")
    assert failed.value.code == "solver_failed"


@pytest.mark.parametrize(
    ("protocol", "options", "kwargs", "pattern"),
    [
        ("ldp-iht", {"sparsity": 5, "rounds": 2}, {}, "sparsity must be at most the number of features p=4"),
        ("ldp-iht", {"sparsity": 2, "rounds": 0}, {}, "option rounds must be a positive integer"),
        ("ldp-iht", {"sparsity": 2, "rounds": 2, "eta": 0}, {}, "option eta must be a finite positive number"),
        ("ldp-iht", {"sparsity": 2, "rounds": 2, "eta": -0.5}, {}, "option eta"),
        ("ldp-iht", {"sparsity": 2, "variant": "paper"}, {}, "variant=paper needs option rounds"),
        ("ldp-iht", {"sparsity": 2, "variant": "fast"}, {}, "option variant must be one of"),
        ("ldp-iht", {"rounds": 2}, {}, "needs option sparsity"),
        ("ldp-iht", {"sparsity": 2, "rounds": 2}, {"delta": 1e-6}, "delta must be 0 for ldp-iht"),
        ("ldp-iht", {"sparsity": 2, "rounds": 2, "dimension": 5}, {}, "dimension mismatch"),
        ("ldp-iht", {"sparsity": 2, "rounds": 5, "participants": 3}, {}, "at least the number of rounds"),
        ("ldp-iht", {"sparsity": 2, "rounds": 2, "speed": 3}, {}, "'speed' is not an option"),
        ("ldp-iht", {"sparsity": 2, "randomizer": "hadamard"}, {}, "option randomizer must be one of"),
        ("ldp-iht", {"sparsity": 2, "feature_bound": 1.0}, {},
         "option feature_bound applies to randomizer=coordinate, not to randomizer=l2ball"),
        ("ldp-iht", {"sparsity": 2, "randomizer": "coordinate", "feature_bound": 0}, {}, "option feature_bound"),
        ("label-ldp", {"sparsity": 2}, {"delta": 1e-6}, "needs a public table"),
    ],
)
def test_bad_parameters_are_refused_before_anything_is_stored(engine, protocol, options, kwargs, pattern) -> None:  # noqa: ANN001
    with pytest.raises(InvalidInput, match=pattern):
        campaigns.create_campaign(engine, "bad", protocol, NAMES, "y", epsilon=1.0, options=options, **kwargs)
    assert campaigns.list_campaigns(engine) == []


def test_label_ldp_public_table_must_match(engine, tmp_path: Path) -> None:  # noqa: ANN001
    x, _ = sparse_rows(100, seed=7)
    load_public(engine, tmp_path, x[:, :3], columns=NAMES[:3])
    with pytest.raises(InvalidInput, match="public table 'pub' has no column 'd'"):
        campaigns.create_campaign(engine, "bad", "label-ldp", NAMES, "y", "pub", 1.0, 1e-6, {"sparsity": 2})
    with pytest.raises(InvalidInput, match="sparsity must be at most the number of features p=3"):
        campaigns.create_campaign(engine, "bad", "label-ldp", NAMES[:3], "y", "pub", 1.0, 1e-6, {"sparsity": 4})
    with pytest.raises(InvalidInput, match="delta must be in .* with randomizer=gaussian"):
        campaigns.create_campaign(engine, "bad", "label-ldp", NAMES[:3], "y", "pub", 1.0, 0.0,
                                  {"sparsity": 2, "randomizer": "gaussian"})
    with pytest.raises(InvalidInput, match="option randomizer must be one of"):
        campaigns.create_campaign(engine, "bad", "label-ldp", NAMES[:3], "y", "pub", 1.0, 0.0,
                                  {"sparsity": 2, "randomizer": "laplace"})
    assert campaigns.list_campaigns(engine) == []
