"""Private regression as a service (issue 4): fits answered from releases, their charges, their noise, bad input.

Statistical tests use fixed seeds; each tolerance is a multiple of the sampling standard deviation of the statistic
it bounds (stated next to it), so a correct implementation fails with negligible probability and a wrong
calibration (a factor of sqrt(2) or more in sigma) fails for sure.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sqlalchemy import text
from typer.testing import CliRunner

from estimators.central.linear import DDSSPLinearRegression
from estimators.central.objpert import objpert_noise_scale, objpert_regularization
from estimators.central.reference import OLSReference
from estimators.central.sufficient_stats import gram_from_marginals, gram_from_rows
from service.accounting import accountant
from service.cli import app
from service.data import datasets
from service.data.oracle import TableCountOracle
from service.mechanisms import gram, registry
from service.mechanisms.base import MechanismError
from service.mechanisms.objpert import ObjPertRelease
from service.privacy import conversions
from service.privacy.cost import PrivacyCost
from service.privacy.noise import NoiseSource
from service.regression.design import RegressionInputError, ReleaseCannotAnswer, build_design
from service.regression.fit import fit as fit_regression
from service.releases import answers
from service.releases import engine as release_engine
from workloads.domain import Domain
from workloads.encodings import DesignEncoding

TITANIC_CATEGORICAL = ("Sex", "Embarked", "Cabin", "Pclass", "Survived")
LINEAR_FEATURES = ["Pclass", "Sex", "SibSp", "Embarked"]  # a small model: marginal releases stay fast
GRAM_FEATURES = ["Pclass", "Sex", "SibSp", "Parch"]
LOGISTIC_FEATURES = ["Pclass", "SibSp", "Embarked", "Fare"]


@pytest.fixture
def titanic_csv(data_dir: Path) -> tuple[Path, Path]:
    return data_dir / "titanic" / "titanic.csv", data_dir / "titanic" / "titanic-domain.json"


def _load(engine, name: str, files: tuple[Path, Path], epsilon: str = "50", delta: str = "1e-3") -> None:  # noqa: ANN001
    datasets.load_coded_csv(engine, name, files[0], files[1], TITANIC_CATEGORICAL)
    accountant.set_budget(engine, name, epsilon, delta)


@pytest.fixture
def titanic(engine, titanic_csv):  # noqa: ANN001, ANN201
    _load(engine, "titanic", titanic_csv)
    return engine


def _charges(engine, name: str) -> list[dict[str, object]]:  # noqa: ANN001
    return [r for r in accountant.ledger_rows(engine, name) if r["entry"] == "charge"]


def _frame(titanic_csv: tuple[Path, Path]) -> tuple[pd.DataFrame, Domain]:
    domain = Domain.from_json(titanic_csv[1].read_text(), TITANIC_CATEGORICAL)
    return pd.read_csv(titanic_csv[0]), domain


# dd-ssp: a new release is charged exactly; the next question is free -------------------------------------------
def test_dd_ssp_is_charged_once_then_answers_other_targets_free(titanic) -> None:  # noqa: ANN001
    engine = titanic
    first = fit_regression(engine, "titanic", "linear", "Fare", LINEAR_FEATURES, method="dd-ssp", epsilon="1",
                           delta="1e-5", mechanism="gaussian")
    expected = registry.get("gaussian").cost("1", "1e-5", None)
    assert not first.reused and first.cost == expected and first.release_cost == expected
    budget = first.to_json()["budget"]  # what the new release cost in the budget's own epsilon, and why
    assert budget["epsilon_spent_before"] == 0 and budget["epsilon_spent_after"] > 1 and "first zCDP" in budget["note"]
    (charge,) = _charges(engine, "titanic")
    assert charge["release_id"] == first.release_id and charge["mechanism"] == "gaussian"
    assert (charge["epsilon"], charge["delta"], charge["rho"]) == (0.0, 0.0, float(expected.rho))
    # the marginal release measured every pair among target and features
    stored = answers.get_release(engine, first.release_id)
    pairs = {frozenset(w["attributes"]) for w in stored.params["workload"]}
    assert pairs == {frozenset(p) for p in itertools.combinations([*LINEAR_FEATURES, "Fare"], 2)}

    second = fit_regression(engine, "titanic", "linear", "SibSp", ["Pclass", "Sex", "Fare"], method="dd-ssp",
                            epsilon="1", delta="1e-5")
    logistic = fit_regression(engine, "titanic", "logistic", "Sex", ["Pclass", "SibSp", "Fare"], method="dd-ssp",
                              epsilon="1", delta="1e-5", intercept=False)
    for answer in (second, logistic):
        assert answer.reused and answer.release_id == first.release_id and answer.cost == PrivacyCost()
        assert answer.to_json()["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
    assert len(_charges(engine, "titanic")) == 1
    body = second.to_json()
    assert body["release_id"] == first.release_id and body["reused"] is True
    assert set(body["coefficients"]) == {"(intercept)", *second.feature_names}
    assert "(intercept)" not in logistic.coefficients

    # a stronger marginal release that did not measure the pairs is not preferred when another one did ...
    oneway = release_engine.release_marginals(engine, "titanic", "gaussian", [["Fare"], ["Pclass"], ["Age"]],
                                              epsilon="5", delta="1e-5")
    again = fit_regression(engine, "titanic", "linear", "Fare", LINEAR_FEATURES, method="dd-ssp", epsilon="1",
                           delta="1e-5")
    assert again.release_id == first.release_id and again.cost.is_zero
    # ... and a release that did not measure them answers only when asked to, saying what it extrapolated ...
    extrapolated = fit_regression(engine, "titanic", "linear", "Age", ["Cabin"], method="dd-ssp", epsilon="1",
                                  delta="1e-5", allow_unmeasured=True)
    assert extrapolated.release_id == oneway.release_id and extrapolated.cost.is_zero
    assert extrapolated.details["coverage"]["unmeasured_attributes"] == ["Cabin"]
    assert any("extrapolation" in note for note in extrapolated.notes)
    assert len(_charges(engine, "titanic")) == 2
    # ... otherwise a new release measures them (charged) instead of a free extrapolation
    measured = fit_regression(engine, "titanic", "linear", "Age", ["Cabin"], method="dd-ssp", epsilon="1",
                              delta="1e-5", seed=3, mechanism="gaussian")
    assert not measured.reused and measured.release_id not in (first.release_id, oneway.release_id)
    assert measured.details["coverage"]["measured"] and measured.notes == ()
    assert len(_charges(engine, "titanic")) == 3


def test_dd_ssp_reads_the_release_marginals_and_nearly_recovers_ols(titanic, titanic_csv) -> None:  # noqa: ANN001
    """End to end through SQL counts, the graphical model and Prop. 3.2."""
    accountant.set_budget(titanic, "titanic", "100000", "1e-3")
    outcome = fit_regression(titanic, "titanic", "linear", "Fare", LINEAR_FEATURES, method="dd-ssp",
                             epsilon="5000", delta="1e-5", seed=1, mechanism="gaussian")
    design = outcome.design

    # the same statistics from the public marginal-answering path (which orders axes on its own) give the same fit
    def marginal(attrs: tuple[str, ...]) -> np.ndarray:
        answer = answers.answer_marginal(titanic, outcome.release_id, list(attrs), allow_seeded=True)  # in-process
        return np.asarray(answer["counts"])

    stats = gram_from_marginals(design, marginal, total=outcome.details["total"])
    assert np.allclose(DDSSPLinearRegression().fit(stats).coef_, outcome.model.coef_, rtol=1e-9, atol=1e-12)

    # with almost no noise (rho ~ 4.5e3) the model's Z^T Z is the exact one up to the model fit's own residual
    # (mirror descent stopped after 1,000 iterations: ~0.6 % of an entry here), so DD-SSP is close to OLS
    frame, _ = _frame(titanic_csv)
    X, y = design.encode(frame)
    exact = gram_from_rows(X, y, intercept=True)
    assert np.max(np.abs(stats.zz - exact) / np.maximum(np.abs(exact), 1.0)) < 0.02
    ols = OLSReference(True).fit(X, y, design.feature_names)
    assert np.max(np.abs(outcome.model.coef_ - ols.coef_)) < 0.05


# AdaSSP: one Gram release, any target among its columns ---------------------------------------------------------
def test_gram_release_answers_a_second_target_for_free(titanic) -> None:  # noqa: ANN001
    engine = titanic
    first = fit_regression(engine, "titanic", "linear", "Fare", GRAM_FEATURES, method="adassp", epsilon="0.5",
                           delta="1e-5")
    expected = registry.get("gaussian").cost("0.5", "1e-5", None)  # the Gaussian conversion, charged as rho
    assert first.cost == expected and first.release_kind == "gram" and first.release_mechanism == "adassp"
    (charge,) = _charges(engine, "titanic")
    assert (charge["epsilon"], charge["delta"], charge["rho"]) == (0.0, 0.0, float(expected.rho))
    for target, features, intercept in (("SibSp", ["Pclass", "Sex", "Parch", "Fare"], True),
                                        ("Parch", ["Sex", "Fare"], False)):
        again = fit_regression(engine, "titanic", "linear", target, features, method="adassp", epsilon="0.5",
                               delta="1e-5", intercept=intercept)
        assert again.reused and again.release_id == first.release_id and again.cost.is_zero
        assert again.details["ridge"] >= 0
    assert len(_charges(engine, "titanic")) == 1
    # a column the release does not have needs a new release
    other = fit_regression(engine, "titanic", "linear", "Fare", [*GRAM_FEATURES, "Age"], method="adassp",
                           epsilon="0.5", delta="1e-5", seed=4)
    assert not other.reused and other.release_id != first.release_id


def _titanic_on_sqlite(
    tmp_path: Path, titanic_csv: tuple[Path, Path], task: str, target: str, features: list[str]
) -> tuple[object, TableCountOracle, pd.DataFrame]:
    """Titanic loaded into a fresh SQLite file: the design, a count oracle over it and the rows (for
    statistical tests that draw many seeded releases and need no second backend)."""
    from db.engine import make_engine
    from db.migrate import upgrade_to_head

    engine = make_engine(f"sqlite:///{tmp_path / 'stats.db'}")
    upgrade_to_head(engine)
    _load(engine, "titanic", titanic_csv)
    stored = datasets.get_dataset(engine, "titanic")
    design = build_design(stored.domain, task, target, features)
    frame, _ = _frame(titanic_csv)
    return design, TableCountOracle(engine, stored), frame


def test_gram_release_noise_matches_its_calibration(tmp_path: Path, titanic_csv) -> None:  # noqa: ANN001
    design, oracle, frame = _titanic_on_sqlite(tmp_path, titanic_csv, "linear", "Fare", GRAM_FEATURES)

    # Z^T Z computed from SQL counts equals the row computation (Prop. 3.2 with exact marginals)
    exact = gram.exact_gram(oracle, design)
    X, y = design.encode(frame)
    assert np.allclose(exact.zz, gram_from_rows(X, y, intercept=True), rtol=0, atol=1e-9)

    # the sensitivity is the largest change any single row makes to the upper triangle (brute force over rows)
    sizes = [oracle.domain.size(a) for a in (*GRAM_FEATURES, "Fare")]
    rows = pd.DataFrame(list(itertools.product(*[range(k) for k in sizes])), columns=[*GRAM_FEATURES, "Fare"])
    Xa, ya = design.encode(rows)
    Z = np.column_stack([np.ones(len(Xa)), Xa, ya])
    upper = np.triu_indices(Z.shape[1])
    brute = float(np.sqrt(np.max(np.sum((Z[:, upper[0]] * Z[:, upper[1]]) ** 2, axis=1))))
    assert gram.upper_triangle_sensitivity(design) == pytest.approx(brute, rel=1e-12)
    assert gram.lambda_min_sensitivity(design) == pytest.approx(float(np.max(np.sum(Z**2, axis=1))), rel=1e-12)

    rho = Fraction(1, 10)
    release = gram.GramRelease(design, rho)
    cal = release.calibration
    assert cal.cost == PrivacyCost(rho=rho) and cal.rho_lambda == rho / 3
    assert cal.sigma_gram == pytest.approx(cal.sensitivity_gram / math.sqrt(2 * float(rho) * 2 / 3), rel=1e-12)
    assert cal.sigma_lambda == pytest.approx(cal.sensitivity_lambda / math.sqrt(2 * float(rho) / 3), rel=1e-12)
    lambda_exact = float(np.linalg.eigvalsh(exact.zz)[0])
    draws, lambdas = [], []
    for seed in range(300):
        result = release(oracle, NoiseSource(seed))
        assert result.cost == PrivacyCost(rho=rho)
        noisy = result.payload.zz
        assert np.array_equal(noisy, noisy.T)
        draws.append((noisy - exact.zz)[upper])
        lambdas.append(result.payload.lambda_min_noisy - lambda_exact)
    entries = np.concatenate(draws) / cal.sigma_gram
    n = entries.size  # 300 x 28 = 8,400 standardised entries
    # sample variance of N(0,1) draws has sd sqrt(2/n); the mean has sd 1/sqrt(n): 5 sd each
    assert abs(np.mean(entries**2) - 1) < 5 * math.sqrt(2 / n)
    assert abs(np.mean(entries)) < 5 / math.sqrt(n)
    lam = np.asarray(lambdas) / cal.sigma_lambda
    assert abs(np.mean(lam**2) - 1) < 5 * math.sqrt(2 / lam.size)
    assert abs(np.mean(lam)) < 5 / math.sqrt(lam.size)


def _discrete_gaussian_cdf(sigma2: float, values: np.ndarray) -> np.ndarray:
    """P(X <= v) for X ~ N_Z(0, sigma2), from the pmf summed over +-14 sigma (the rest is below 1e-40)."""
    half = int(14 * math.sqrt(sigma2)) + 2
    support = np.arange(-half, half + 1)
    pmf = np.exp(-support.astype(float) ** 2 / (2 * sigma2))
    cdf = np.cumsum(pmf / pmf.sum())
    return np.where(values < -half, 0.0, cdf[np.clip(values + half, 0, 2 * half)])


def test_gram_release_adds_exact_discrete_gaussian_noise(tmp_path: Path, titanic_csv) -> None:  # noqa: ANN001
    """Issue 11, finding 7: each column is scaled by an integer (k - 1 for a scalar column) so that S Z^T Z S is an
    integer matrix; each upper-triangle entry gets N_Z(0, sigma_gram^2 s_i^2 s_j^2), and the release divides back."""
    design, oracle, frame = _titanic_on_sqlite(tmp_path, titanic_csv, "linear", "Fare", GRAM_FEATURES)
    release = gram.GramRelease(design, Fraction(1, 10))
    scales = np.array(release.integral.scales)
    # 2 v / (k - 1) - 1 = (2 v - (k - 1)) / (k - 1): the smallest integer scale is (k - 1) / gcd(2, k - 1)
    scalar = [(k - 1) // math.gcd(2, k - 1) for k in (oracle.domain.size(a) for a in ("SibSp", "Parch", "Fare"))]
    assert list(scales) == [1, 1, 1, 1, *scalar] and max(scalar) > 1
    W = gram.integer_gram(oracle, design, release.integral)
    X, y = design.encode(frame)
    assert all(isinstance(v, int) for v in W.ravel())
    assert np.allclose(W.astype(float), gram_from_rows(X, y, intercept=True) * np.outer(scales, scales), atol=1e-6)
    cal = release.calibration
    assert cal.sigma2_gram == Fraction(gram.gram_sensitivity_squared(design)) / (2 * cal.rho_gram)  # exact
    upper = np.triu_indices(len(scales))
    product = np.outer(scales, scales)[upper]
    uniforms, rng = [], np.random.default_rng(0)
    for seed in range(120):
        payload = release(oracle, NoiseSource(seed)).payload
        shifted = payload.zz[upper] * product
        noise = np.rint(shifted).astype(np.int64) - W[upper].astype(np.int64)
        assert np.max(np.abs(shifted - np.rint(shifted))) < 1e-6  # integers, divided back by s_i s_j
        # randomised probability integral transform of a discrete law: exactly Uniform(0, 1) under N_Z(0, sigma^2)
        for value, p in zip(noise, product, strict=True):
            sigma2 = float(cal.sigma2_gram) * float(p) ** 2
            low, high = _discrete_gaussian_cdf(sigma2, np.array([value - 1, value]))
            uniforms.append(low + rng.uniform() * (high - low))
    # 120 releases x 28 entries; Kolmogorov-Smirnov p-value floor 1e-4 as in tests/service/privacy/test_noise.py
    assert stats.kstest(uniforms, "uniform").pvalue > 1e-4
    assert payload.zz.dtype == np.float64 and np.array_equal(payload.zz, payload.zz.T)


def test_gram_release_needs_an_integral_encoding(titanic_csv) -> None:  # noqa: ANN001
    _, domain = _frame(titanic_csv)
    fine = build_design(domain, "linear", "Fare", ["Pclass", "Sex"])
    quarters = DesignEncoding(domain, ["Pclass", "Sex"], "Fare", "linear", True,
                              overrides={"Pclass": [[0.5, -1.0, 0.25]]})
    assert gram.GramRelease(quarters, Fraction(1, 10)).integral.scales[1] == 4
    tenths = DesignEncoding(domain, ["Pclass", "Sex"], "Fare", "linear", True, overrides={"Pclass": [[0.1, 0.2, 0.3]]})
    with pytest.raises(MechanismError, match="Pclass.*not rationals"):
        gram.GramRelease(tenths, Fraction(1, 10))
    assert gram.GramRelease(fine, Fraction(1, 10)).calibration.cost == PrivacyCost(rho=Fraction(1, 10))


# ObjPert: the model is the payload -------------------------------------------------------------------------------
def test_objpert_is_charged_epsilon_delta_and_reused_only_for_the_same_request(titanic) -> None:  # noqa: ANN001
    engine = titanic
    first = fit_regression(engine, "titanic", "logistic", "Sex", LOGISTIC_FEATURES, method="objpert",
                           epsilon="1", delta="1e-5")
    assert first.cost == PrivacyCost(epsilon=Fraction(1), delta=Fraction(1, 100_000))
    assert first.release_kind == "model" and set(first.details) == set(registry.get("objpert").public_details)
    (charge,) = _charges(engine, "titanic")
    assert (charge["epsilon"], charge["delta"], charge["rho"]) == (1.0, 1e-5, 0.0)
    same = fit_regression(engine, "titanic", "logistic", "Sex", list(reversed(LOGISTIC_FEATURES)), method="objpert",
                          epsilon="1", delta="1e-5")
    assert same.reused and same.release_id == first.release_id and same.cost.is_zero
    assert same.coefficients == pytest.approx(first.coefficients)
    other = fit_regression(engine, "titanic", "logistic", "Sex", LOGISTIC_FEATURES, method="objpert",
                           epsilon="0.5", delta="1e-5", seed=6)
    assert not other.reused and len(_charges(engine, "titanic")) == 2


def test_objpert_noise_norm_matches_its_calibration(tmp_path: Path, titanic_csv) -> None:  # noqa: ANN001
    """The noise b inside the release is recovered from the released model by the first-order condition of
    Alg. 3: sum_i grad l(theta; z_i) + Delta theta + b = 0. Its squared norm over sigma^2 must be chi^2_d. (The
    output noise, sd ~1e-6 here, moves the recovered b by ~1e-3 of its sd: invisible at this sample size.)"""
    design, oracle, frame = _titanic_on_sqlite(tmp_path, titanic_csv, "logistic", "Sex", LOGISTIC_FEATURES)
    X, y = design.encode(frame)
    Z = np.column_stack([np.ones(len(X)), X])
    release = ObjPertRelease(design, Fraction(1), Fraction(1, 100_000), curvature_share=0)
    # without a curvature the objective gets (1 - 1/1000) of (epsilon, delta), the output noise the rest; both
    # calibrations round up (the three-way split: test_error_bars_objpert.py)
    bound = design.feature_norm_bound()
    sigma = objpert_noise_scale(0.999, 0.999e-5, bound)
    regularization = objpert_regularization(0.999, bound)
    assert release.noise_std == pytest.approx(sigma, rel=1e-13) and release.noise_std >= sigma
    assert release.regularization == pytest.approx(regularization, rel=1e-13) and release.dimension == Z.shape[1]
    assert release.output_noise_std == pytest.approx(2e-10 / math.sqrt(2 * conversions.cdp_rho(1e-3, 1e-8)), rel=1e-9)
    norms = []
    for seed in range(300):
        payload = release(oracle, NoiseSource(seed)).payload
        theta = np.array([payload.intercept, *payload.coef])
        margins = y * (Z @ theta)
        gradient = Z.T @ (-y / (1.0 + np.exp(margins)))
        b = -(gradient + release.regularization * theta)
        norms.append(float(b @ b) / release.noise_std**2)
    d, k = Z.shape[1], len(norms)
    # ||b||^2 / sigma^2 ~ chi^2_d: mean d, variance 2d; the mean of k draws has sd sqrt(2d / k): 5 sd
    assert abs(np.mean(norms) - d) < 5 * math.sqrt(2 * d / k)
    # and its variance (chi^2_d has variance 2d; the sample variance's sd is about sqrt((8d^2 + 48d) / k)): 5 sd
    assert abs(np.var(norms) - 2 * d) < 5 * math.sqrt((8 * d * d + 48 * d) / k)
    assert oracle.rows_read == 300 * len(frame)


# bad input: clear errors naming the parameter, nothing charged ----------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"target": "Nope"}, "target 'Nope' is not a column"),
        ({"features": ["Pclass", "Nope"]}, r"features \['Nope'\] are not columns"),
        ({"features": ["Pclass", "Fare"]}, "features must not contain the target"),
        ({"task": "logistic", "target": "Survived", "method": "objpert"}, "Survived.*3 levels.*binary"),
        ({"epsilon": "-1"}, "epsilon must be > 0"),
        ({"epsilon": "abc"}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon must be finite"),
        ({"delta": "0"}, "delta must be > 0"),
        ({"delta": "1.5"}, "delta"),
        ({"method": "objpert"}, "objpert.*logistic"),
        ({"method": "nope"}, "method must be one of"),
        ({"categorical": ["Nope"]}, "categorical"),
        ({"release_id": 1}, "either a release id or epsilon and delta"),
    ],
)
def test_bad_input_names_the_parameter_and_charges_nothing(titanic, kwargs: dict, fragment: str) -> None:  # noqa: ANN001
    request = {"task": "linear", "target": "Fare", "features": None, "method": "adassp", "epsilon": "1",
               "delta": "1e-5"} | kwargs
    name = request.pop("task"), request.pop("target")
    with pytest.raises(RegressionInputError, match=fragment) as caught:
        fit_regression(titanic, "titanic", *name, **request)
    assert isinstance(caught.value, ValueError)
    with titanic.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM releases")).scalar_one() == 0
    assert _charges(titanic, "titanic") == []


def test_a_release_of_the_wrong_kind_cannot_answer(titanic) -> None:  # noqa: ANN001
    first = fit_regression(titanic, "titanic", "linear", "Fare", GRAM_FEATURES, method="adassp", epsilon="1",
                           delta="1e-5")
    with pytest.raises(ReleaseCannotAnswer, match="gram release by adassp, which cannot answer dd-ssp"):
        fit_regression(titanic, "titanic", "linear", "Fare", GRAM_FEATURES, method="dd-ssp",
                       release_id=first.release_id)
    with pytest.raises(ReleaseCannotAnswer, match="no column 'Age'"):
        fit_regression(titanic, "titanic", "linear", "Age", GRAM_FEATURES, method="adassp",
                       release_id=first.release_id)
    answered = fit_regression(titanic, "titanic", "linear", "SibSp", ["Fare", "Parch"], method="adassp",
                              release_id=first.release_id)
    assert answered.reused and answered.cost.is_zero and len(_charges(titanic, "titanic")) == 1


# the command line -------------------------------------------------------------------------------------------------
def test_cli_fit_prints_the_answer_and_refuses_bad_input(titanic) -> None:  # noqa: ANN001
    runner = CliRunner()
    args = ["fit", "linear", "titanic", "--target", "Fare", "--features", ",".join(GRAM_FEATURES), "--method",
            "adassp", "--epsilon", "1", "--delta", "1e-5", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["reused"] is False and body["cost"]["rho"] > 0 and body["release"]["kind"] == "gram"
    assert body["feature_names"] == ["Pclass=1", "Pclass=2", "Sex=1", "SibSp", "Parch"]
    again = json.loads(runner.invoke(app, [*args[:-1], "--no-intercept", "--json"]).output)
    assert again["reused"] is True and again["release_id"] == body["release_id"] and again["cost"]["rho"] == 0
    assert "(intercept)" not in again["coefficients"]
    bad = runner.invoke(app, ["fit", "linear", "titanic", "--target", "Nope", "--epsilon", "1", "--delta", "1e-5",
                              "--json"])
    assert bad.exit_code == 2
    assert json.loads(bad.output)["error"] == "invalid_parameter" and "Nope" in json.loads(bad.output)["message"]
