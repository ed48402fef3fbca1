"""DP-IHT as a central release (issue 10): the exact charge, a known sparse answer end to end, reuse, bad input.

The table is built so that the sparse answer is known: eight independent fair bits ``x0..x7`` (scalar-encoded to
``{-1, +1}``) and a target coded ``x0 + x1`` in ``{0, 1, 2}`` (scalar-encoded to ``{-1, 0, +1}``), so the encoded target
is exactly ``0.5 x0 + 0.5 x1``: the least-squares optimum with at most two non-zero coefficients (and no intercept) is
``theta* = (0.5, 0.5, 0, ..., 0)`` with zero residual. The tolerance of each comparison is derived from the noise in
the comment next to it.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from estimators.central.dp_iht import dp_iht_calibration
from service.accounting import accountant
from service.accounting.accountant import release_costs
from service.cli import app
from service.data import datasets
from service.data.oracle import TableCountOracle
from service.mechanisms import registry
from service.mechanisms.dp_iht import COUNT_SHARE, DPIHTRelease
from service.privacy import conversions
from service.privacy.cost import PrivacyCost, floor_to_grid
from service.privacy.noise import NoiseSource
from service.regression.design import RegressionInputError, build_design
from service.regression.fit import fit as fit_regression
from tests.support.dp_iht import FEATURES, TRUTH, noise_tolerance

ROWS = 2000
SETTINGS = {"sparsity": 2, "iterations": 30, "step": 0.5}


@pytest.fixture(scope="module")
def sparse_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("sparse")
    bits = np.random.default_rng(10).integers(0, 2, size=(ROWS, len(FEATURES)))
    y = bits[:, 0] + bits[:, 1]
    lines = [",".join([*FEATURES, "y"])] + [",".join(map(str, [*row, t])) for row, t in zip(bits, y, strict=True)]
    (folder / "sparse.csv").write_text("\n".join(lines) + "\n")
    (folder / "sparse-domain.json").write_text(json.dumps({**{f: 2 for f in FEATURES}, "y": 3}))
    return folder / "sparse.csv", folder / "sparse-domain.json"


@pytest.fixture
def sparse(engine, sparse_table):  # noqa: ANN001, ANN201
    datasets.load_coded_csv(engine, "sparse", *sparse_table)
    accountant.set_budget(engine, "sparse", "100", "1e-3")
    return engine


def _charges(engine, name: str = "sparse") -> list[dict[str, object]]:  # noqa: ANN001
    return [r for r in accountant.ledger_rows(engine, name) if r["entry"] == "charge"]


def test_cli_fit_recovers_the_sparse_answer_charges_exactly_and_reuses_the_model(sparse, sparse_table) -> None:  # noqa: ANN001
    runner = CliRunner()
    args = ["fit", "linear", "sparse", "--target", "y", "--method", "dp-iht", "--sparsity", "2", "--iterations", "30",
            "--step", "0.5", "--no-intercept", "--epsilon", "10", "--delta", "1e-5", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["reused"] is False and body["release"]["kind"] == "model" and body["release"]["mechanism"] == "dp-iht"
    # the charge: cdp_rho(10, 1e-5) on the accountant's grid, and the calibration spends exactly that, no more
    rho = floor_to_grid(conversions.cdp_rho(10.0, 1e-5))
    clip = 2 * math.sqrt(8)  # the default for the squared loss: 2 B, B = sqrt(8) for eight {-1, +1} columns
    # the fit gets (1 - h) rho, the curvature h rho (h = curvature_share, 1/10 by default)
    calibration = dp_iht_calibration(rho * Fraction(9, 10), 30, clip, COUNT_SHARE)
    (charge,) = _charges(sparse)
    assert release_costs(sparse, [body["release_id"]])[body["release_id"]] == PrivacyCost(rho=rho)
    assert calibration.rho_total + rho / 10 == rho and (charge["epsilon"], charge["delta"]) == (0.0, 0.0)
    assert body["details"]["rho_curvature"] == float(rho / 10)
    assert body["details"]["sigma_gradient"] == calibration.sigma_gradient
    assert set(body["details"]) == set(registry.get("dp-iht").public_details)
    # the known sparse answer
    coef = np.array([body["coefficients"][f] for f in FEATURES])
    assert np.count_nonzero(coef) <= 2 and set(np.flatnonzero(coef)) == {0, 1}
    X = 2.0 * np.loadtxt(sparse_table[0], delimiter=",", skiprows=1)[:, :2] - 1.0
    curvature = float(np.linalg.eigvalsh(X.T @ X / ROWS)[0])
    assert np.max(np.abs(coef - TRUTH)) < noise_tolerance(calibration.sigma_gradient, 0.5, ROWS, curvature)
    # the same request again (options spelled differently, defaults given explicitly) is the stored model, free
    again = runner.invoke(app, [*args[:-1], "--clip-norm", repr(clip), "--l2", "0", "--json"])
    assert again.exit_code == 0, again.output
    reused = json.loads(again.output)
    assert reused["reused"] is True and reused["release_id"] == body["release_id"] and reused["cost"]["rho"] == 0
    assert reused["coefficients"] == body["coefficients"] and len(_charges(sparse)) == 1
    # another sparsity is another question: a new release, charged
    other = json.loads(runner.invoke(app, [*args[:8], "3", *args[9:]]).output)
    assert other["reused"] is False and len(_charges(sparse)) == 2


def test_logistic_model_predicts_and_its_noise_is_the_engines(sparse) -> None:  # noqa: ANN001
    """A logistic DP-IHT fit (l2 penalty as in Sec. 7.2) is the fitted type of every regression (coef_, predict,
    predict_proba), and a seeded release is reproducible (the noise is the engine's NoiseSource)."""
    kwargs = {"method": "dp-iht", "epsilon": "1", "delta": "1e-5", "options": {"sparsity": 3, "l2": 1e-3},
              "reuse": False, "seed": 7}
    first = fit_regression(sparse, "sparse", "logistic", "x0", ["x1", "x2", "x3"], **kwargs)
    second = fit_regression(sparse, "sparse", "logistic", "x0", ["x1", "x2", "x3"], **kwargs)
    assert first.release_id != second.release_id and first.coefficients == second.coefficients
    model = first.model
    assert model.coef_.shape == (3,) and np.count_nonzero([model.intercept_, *model.coef_]) <= 3
    X = np.array([[1.0, -1.0, 1.0], [-1.0, 1.0, -1.0]])
    proba = model.predict_proba(X)
    assert proba.shape == (2, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert set(model.predict(X)) <= {-1, 1}
    assert first.details["l2"] == 1e-3 and first.details["clip_norm"] == pytest.approx(2.0)  # B = sqrt(1 + 3)


def test_release_draws_one_count_and_t_gradient_vectors_of_the_calibrated_scale(tmp_path: Path, sparse_table) -> None:  # noqa: ANN001
    """The runner's noise, recovered from the release: with the step 1 and l2 = 0 on a design whose data gradient is
    zero at theta = 0 for every row (target always at its middle code, so y = 0), theta_1 = Trunc(-z_0 / n_hat, k)
    and the kept coordinates are the k largest of |z_0|. With k = p nothing is cut, so n_hat * theta_1 = -z_0 exactly
    ~ N(0, sigma^2 I). Over 200 seeded releases of p = 8 coordinates: mean 0 (sd sigma / sqrt(1600), 5 sd) and
    E[z^2] = sigma^2 (sd sigma^2 sqrt(2 / 1600), 5 sd); a factor sqrt(2) in sigma fails both bounds by far."""
    from db.engine import make_engine
    from db.migrate import upgrade_to_head

    csv = tmp_path / "flat.csv"
    bits = np.random.default_rng(3).integers(0, 2, size=(300, 8))
    csv.write_text(",".join([*FEATURES, "y"]) + "\n" + "\n".join(",".join(map(str, [*r, 1])) for r in bits) + "\n")
    engine = make_engine(f"sqlite:///{tmp_path / 'flat.db'}")
    upgrade_to_head(engine)
    datasets.load_coded_csv(engine, "flat", csv, sparse_table[1])
    stored = datasets.get_dataset(engine, "flat")
    design = build_design(stored.domain, "linear", "y", FEATURES, intercept=False)
    oracle = TableCountOracle(engine, stored)
    settings = registry.get("dp-iht").settings(design, {"sparsity": 8, "iterations": 1, "step": 1.0})
    release = DPIHTRelease(design, Fraction(1, 2), settings)
    sigma = release.calibration.sigma_gradient
    # exact: the fit gets 9/10 of rho (the curvature 1/10), and its one iteration 9/10 of that; G^2 / (2 sigma^2)
    # <= rho_iter
    assert release.calibration.rho_per_iteration == Fraction(81, 200)
    assert release.calibration.rho_total + release.rho_curvature == Fraction(1, 2)
    assert Fraction(release.options["clip_norm"]) ** 2 / (2 * Fraction(sigma) ** 2) <= Fraction(81, 200)
    draws = []
    for seed in range(200):
        payload = release(oracle, NoiseSource(seed)).payload
        draws.append(-release.estimator.normalizer_ * np.asarray(payload.coef))
    z = np.concatenate(draws) / sigma
    assert abs(z.mean()) < 5 / math.sqrt(z.size)
    assert abs(np.mean(z**2) - 1) < 5 * math.sqrt(2 / z.size)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({}, "sparsity is required"),
        ({"sparsity": 9}, "sparsity must be at most the number of coefficients p=8"),
        ({"sparsity": 0}, "option sparsity must be a positive int"),
        ({"sparsity": 2.5}, "option sparsity must be a positive int"),
        ({"sparsity": 2, "iterations": 0}, "option iterations must be a positive int"),
        ({"sparsity": 2, "step": -0.1}, "option step must be a positive float"),
        ({"sparsity": 2, "step": float("inf")}, "option step"),
        ({"sparsity": 2, "clip_norm": 0}, "option clip_norm"),
        ({"sparsity": 2, "l2": -1}, "l2 must be a finite number >= 0"),
        ({"sparsity": 2, "rounds": 3}, "dp-iht has no option 'rounds'"),
        ({"sparsity": 2, "epsilon": "-1"}, "epsilon must be > 0"),
        ({"sparsity": 2, "delta": "0"}, "delta must be > 0"),
        ({"sparsity": 2, "delta": "1.5"}, "delta"),
        ({"sparsity": 2, "epsilon": float("nan")}, "epsilon must be finite"),
    ],
)
def test_bad_settings_name_the_parameter_and_store_and_charge_nothing(sparse, options: dict, fragment: str) -> None:  # noqa: ANN001
    options = dict(options)  # the parameter is shared by the SQLite and PostgreSQL runs
    budget = {"epsilon": options.pop("epsilon", "1"), "delta": options.pop("delta", "1e-5")}
    with pytest.raises(RegressionInputError, match=fragment):
        fit_regression(sparse, "sparse", "linear", "y", FEATURES, method="dp-iht", intercept=False, options=options,
                       **budget)
    with sparse.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM releases")).scalar_one() == 0
    assert _charges(sparse) == []


def test_settings_are_resolved_with_public_defaults(sparse) -> None:  # noqa: ANN001
    design = build_design(datasets.get_dataset(sparse, "sparse").domain, "logistic", "x0", ["x1", "x2"])
    resolved = registry.get("dp-iht").settings(design, {"sparsity": 2})
    # B^2 = 1 (intercept) + 2 scalar columns = 3; logistic smoothness B^2 / 4 = 3/4, so the default step is 4/3
    assert resolved == {"sparsity": 2, "iterations": 50, "step": pytest.approx(4 / 3), "clip_norm": math.sqrt(3),
                        "l2": 0.0, "curvature_share": 0.1}
    assert registry.get("dp-iht").kind == "model" and registry.get("dp-iht").notion == "zcdp"


def test_the_command_line_refuses_dp_iht_settings_for_another_method_before_opening_the_database() -> None:
    """The settings are the method's declared options (service/regression/methods.py): given with another method,
    they are refused naming them and the method that takes them."""
    result = CliRunner().invoke(app, ["fit", "linear", "any", "--target", "y", "--method", "dd-ssp", "--sparsity", "2",
                                      "--clip-norm", "1.5"])
    assert result.exit_code == 2
    assert "--sparsity/--clip-norm apply to --method dp-iht only, not dd-ssp" in " ".join(result.output.split())
