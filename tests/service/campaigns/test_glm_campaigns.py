"""The ``glm`` campaign in process: create with a public table, simulate, fit every link from one collection with an
estimated intercept and standard errors in the features' own units; the ledger charges exactly the campaign's
(epsilon, delta) per participant; forged reports and bad options are refused with nothing stored."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.moment import PublicMomentGLM
from service.campaigns import campaigns, estimates, simulate, submission
from service.campaigns.public_tables import campaign_public_rows
from service.errors import InvalidInput
from tests.support.campaign_data import FEATURES, load_public
from tests.support.campaign_rows import aggregate_sums, ledger_reports
from workloads.local.protocols import RoundState

#: features in their own units (shifted and scaled), and a logistic model on them with an intercept
SHIFT, SCALE = np.array([5.0, -2.0, 10.0]), np.array([2.0, 0.5, 4.0])
COEF, INTERCEPT = np.array([0.5, -1.0, 0.2]), -6.0  # the score is centred near 0.5


def _people(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3)) * SCALE + SHIFT
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(INTERCEPT + x @ COEF)))).astype(float)
    return x, y


@pytest.fixture
def collected(engine, tmp_path: Path):  # noqa: ANN001, ANN201
    load_public(engine, tmp_path, _people(4000, seed=1)[0])
    campaigns.create_campaign(engine, "moments", "glm", FEATURES, "y", "pub", 4.0, 0.0, {"participants": 30_000})
    x, y = _people(30_000, seed=2)
    simulate.simulate(engine, "moments", x, y, seed=3)
    return campaigns.get_campaign(engine, "moments")


def test_every_link_from_one_collection_with_an_intercept_and_standard_errors(engine, collected) -> None:  # noqa: ANN001
    info = collected
    assert info.status == "closed" and info.spec.randomizer == "privunit" and info.spec.dimension == 3
    fit = estimates.fit_campaign(engine, "moments", "logistic")
    answer = fit.to_json()
    assert list(answer["coefficients"]) == [*FEATURES, "(intercept)"] and answer["kind"] == "classifier"
    assert list(answer["standard_errors"]) == [*FEATURES, "(intercept)"] and answer["cost"]["epsilon"] == 0.0
    truth = {**dict(zip(FEATURES, COEF, strict=True)), "(intercept)": INTERCEPT}
    for name, value in truth.items():  # within 4 of its own standard errors (in the features' own units)
        assert abs(answer["coefficients"][name] - value) < 4 * answer["standard_errors"][name], name
    # the service's numbers are the estimator's on the stored aggregate, mapped to the features' own units
    aggregate = ReportAggregate.for_round(info.spec, 0, RoundState(0))
    aggregate.count, aggregate.sums["u"] = 30_000, aggregate_sums(engine, "moments")["u"]
    model = PublicMomentGLM("logistic").fit(aggregate, info.spec, campaign_public_rows(engine, info))
    np.testing.assert_allclose([answer["coefficients"][f] for f in FEATURES],
                               model.coef_ / np.asarray(info.transform.scale), rtol=1e-9)
    for link, kind in (("probit", "classifier"), ("linear", "regressor"), ("poisson", "regressor")):
        other = estimates.fit_campaign(engine, "moments", link)
        assert other.kind == kind and set(other.standard_errors) == set(truth)
        # every link orders the features' effects alike (one collection, each fit free)
        assert np.sign(other.coefficients["b"]) == -1 and np.sign(other.coefficients["a"]) == 1


def test_each_participant_is_charged_exactly_the_campaigns_epsilon(engine, collected) -> None:  # noqa: ANN001
    rows = ledger_reports(engine, "moments")
    assert len({r[0] for r in rows}) == 30_000 and {(r[2], r[3]) for r in rows} == {(int(4.0 * 1e12), 0)}


def test_forged_reports_are_refused_and_nothing_is_stored(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_public(engine, tmp_path, _people(500, seed=4)[0])
    info = campaigns.create_campaign(engine, "g", "glm", FEATURES, "y", "pub", 2.0, 1e-6,
                                     {"randomizer": "gaussian"})
    grid = info.spec.report_schema(0, RoundState(0)).fields[0].grid
    forged = {"u": np.array([[grid / 2, 0.0, 0.0, 0.0]])}
    with pytest.raises(InvalidInput, match="not a multiple of its grid step") as refused:
        submission.submit_reports(engine, "g", 0, forged, submission.Submitter.simulator("f"), ["f"])
    assert refused.value.code == "invalid_report" and ledger_reports(engine, "g") == []
    campaigns.create_campaign(engine, "ball", "glm", FEATURES, "y", "pub", 2.0)
    with pytest.raises(InvalidInput, match="every honest report has norm"):
        submission.submit_reports(engine, "ball", 0, {"u": np.array([[0.1, 0.0, 0.0, 0.0]])},
                                  submission.Submitter.simulator("f"), ["f"])
    assert ledger_reports(engine, "ball") == []


@pytest.mark.parametrize(("public", "delta", "options", "message"), [
    (None, 0.0, {}, r"glm needs a public table \(parameter public"),
    ("pub", 1e-6, {}, "delta must be 0 with the privunit randomizer"),
    ("pub", 0.0, {"randomizer": "gaussian"}, "delta must be in \\(0, 1\\) with the gaussian randomizer"),
    ("pub", 0.0, {"randomizer": "laplace"}, "option randomizer must be one of \\['privunit', 'l2ball', 'gaussian'\\]"),
    ("pub", 0.0, {"labels": "counts"}, "option labels must be one of"),
    ("pub", 0.0, {"label_bound": 2}, "option label_bound applies to labels=bounded"),
    ("pub", 0.0, {"whiten": "yes"}, "option whiten must be true or false"),
    ("pub", 0.0, {"norm_bound": 2}, "option 'norm_bound' is not an option of protocol 'glm'"),
])
def test_bad_options_are_named_and_nothing_is_stored(engine, tmp_path: Path, public: str | None, delta: float,  # noqa: ANN001
                                                      options: dict, message: str) -> None:
    load_public(engine, tmp_path, _people(300, seed=5)[0])
    with pytest.raises(InvalidInput, match=message):
        campaigns.create_campaign(engine, "bad", "glm", FEATURES, "y", public, 1.0, delta, options)
    assert campaigns.list_campaigns(engine) == []


def test_bounded_labels_and_whitening(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """A linear model on bounded labels (``s(y) = clip(y, -B, B) / B``) with whitened public constants."""
    rng = np.random.default_rng(6)
    public = rng.standard_normal((3000, 3)) @ np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.0, 0.0, 1.0]])
    load_public(engine, tmp_path, public)
    info = campaigns.create_campaign(engine, "lin", "glm", FEATURES, "y", "pub", 8.0, 0.0,
                                     {"labels": "bounded", "label_bound": 6, "whiten": True})
    assert info.spec.labels == "bounded" and info.spec.label_bound == 6.0
    x = rng.standard_normal((40_000, 3)) @ np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.0, 0.0, 1.0]])
    y = 1.0 + x @ np.array([0.8, -0.5, 0.3]) + rng.uniform(-0.5, 0.5, 40_000)
    simulate.simulate(engine, "lin", x, y, seed=7)
    fit = estimates.fit_campaign(engine, "lin", "linear")
    for name, value in zip([*FEATURES, "(intercept)"], [0.8, -0.5, 0.3, 1.0], strict=True):
        assert abs(fit.coefficients[name] - value) < 4 * fit.standard_errors[name] + 0.01, name


def test_the_default_map_whitens_and_falls_back_to_standardising_a_singular_public_table(engine, tmp_path) -> None:  # noqa: ANN001
    """Whitening is the default (it measured 0.03 AUC better on ACSemployment); a public table whose covariance is
    singular is standardised instead, unless whiten=true insists (then refused, naming the option)."""
    rng = np.random.default_rng(3)
    base = rng.normal(size=(2_000, 3))
    correlated = np.c_[base[:, 0], base[:, 0] + 0.5 * base[:, 1], base[:, 2] - 0.3 * base[:, 1]]
    load_public(engine, tmp_path, correlated, name="corr")
    info = campaigns.create_campaign(engine, "w", "glm", FEATURES, "y", "corr", 2.0)
    matrix = np.asarray(info.spec.matrix)
    assert not np.allclose(matrix, np.diag(np.diag(matrix)))  # whitened: off-diagonal entries
    transformed = info.transform.apply(correlated) - np.asarray(info.spec.center)
    assert np.allclose(np.cov(transformed @ matrix.T, rowvar=False, bias=True), np.eye(3), atol=1e-8)
    singular = np.c_[base[:, 0], base[:, 1], base[:, 0] + base[:, 1]]
    load_public(engine, tmp_path, singular, name="sing")
    info = campaigns.create_campaign(engine, "s", "glm", FEATURES, "y", "sing", 2.0)
    matrix = np.asarray(info.spec.matrix)
    assert np.allclose(matrix, np.diag(np.diag(matrix)))  # standardised
    with pytest.raises(InvalidInput, match="whiten"):
        campaigns.create_campaign(engine, "t", "glm", FEATURES, "y", "sing", 2.0, 0.0, {"whiten": True})
    assert [c.name for c in campaigns.list_campaigns(engine)] == ["w", "s"]
