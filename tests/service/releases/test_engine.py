"""The release engine: exact charges, noise distributions of the direct mechanisms, rollback before
noise, charges that stand after noise, free answers, seeds."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sqlalchemy import text

from service.accounting import accountant
from service.errors import InvalidInput, ServiceError
from service.mechanisms import direct, registry
from service.mechanisms.base import MechanismError
from service.mechanisms.selection import ArrayOracle
from service.privacy.noise import NoiseSource
from service.releases import answers
from service.releases import engine as release_engine
from tests.support.datasets import titanic_with_budget
from workloads.domain import Domain
from workloads.marginals import Query


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "4", "1e-6")


SMALL = [["Sex"], ["Pclass", "Survived"]]


def _ledger_charges(engine) -> list[tuple[int, int, int, int]]:  # noqa: ANN001
    with engine.connect() as connection:
        return [tuple(r) for r in connection.execute(text(
            "SELECT release_id, epsilon_units, delta_units, rho_units FROM ledger_entries "
            "WHERE entry = 'charge' ORDER BY id"))]


def test_laplace_release_is_charged_exactly_its_epsilon(engine, titanic) -> None:  # noqa: ANN001
    outcome = release_engine.release_marginals(engine, "titanic", "laplace", SMALL, epsilon="0.3", seed=1)
    assert outcome.cost.epsilon == Fraction(3, 10) and outcome.cost.rho == 0
    assert _ledger_charges(engine) == [(outcome.release_id, 3 * 10**11, 0, 0)]
    assert answers.get_release(engine, outcome.release_id).status == "complete"


def test_gaussian_release_at_epsilon_delta_is_charged_the_converted_rho(engine, titanic) -> None:  # noqa: ANN001
    outcome = release_engine.release_marginals(engine, "titanic", "gaussian", SMALL, epsilon="1", delta="1e-6", seed=1)
    expected = registry.get("gaussian").cost("1", "1e-6", None).rho
    assert outcome.cost.rho == expected
    assert _ledger_charges(engine) == [(outcome.release_id, 0, 0, int(expected * 10**12))]


@pytest.mark.parametrize("mechanism", ["mst", "aim"])
def test_data_dependent_releases_are_charged_exactly(engine, titanic, mechanism: str) -> None:  # noqa: ANN001
    options = {"rounds": 20} if mechanism == "aim" else {}
    workload = [["Sex", "Survived"], ["Pclass", "Survived"], ["Age"]] if mechanism == "aim" else "all-1way"
    outcome = release_engine.release_marginals(engine, "titanic", mechanism, workload, rho="0.05", seed=3,
                                               options=options)
    assert outcome.cost.rho == Fraction(5, 100)
    assert _ledger_charges(engine) == [(outcome.release_id, 0, 0, 5 * 10**10)]
    answer = answers.answer_marginal(engine, outcome.release_id, ["Survived", "Sex"], allow_seeded=True)
    assert answer["shape"] == [3, 2] and abs(np.sum(answer["counts"]) - 1304) < 200


def _oracle(data_dir: Path) -> ArrayOracle:
    import pandas as pd

    frame = pd.read_csv(data_dir / "titanic/titanic.csv")
    sizes = json.loads((data_dir / "titanic/titanic-domain.json").read_text())
    return ArrayOracle(Domain.from_sizes(sizes), {c: frame[c].to_numpy() for c in sizes})


def _exact_variance(pmf_log: callable, support: np.ndarray) -> float:  # noqa: ANN001
    weights = np.exp(pmf_log(support) - pmf_log(support).max())
    weights /= weights.sum()
    return float(np.sum(weights * support.astype(float) ** 2))


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_direct_noise_has_the_calibrated_distribution(data_dir: Path, mechanism: str) -> None:
    """noisy - exact over every cell of a 2-way workload follows the discrete distribution the
    privacy analysis assumes (Kolmogorov-Smirnov against the exact pmf, and its variance)."""
    oracle = _oracle(data_dir)
    workload = [Query(("Age", "Fare")), Query(("Age", "SibSp")), Query(("Fare", "Parch"))]
    total = Fraction(3, 10)
    run = direct.run_gaussian if mechanism == "gaussian" else direct.run_laplace
    result = run(oracle, workload, total, NoiseSource(11), max_model_size=1.0, iters=10)
    noise = np.concatenate([(m.values - oracle.counts(m.attributes)).ravel() for m in result.payload.measurements])
    assert np.allclose(noise, np.round(noise))  # integer noise on integer counts
    share = total / 3
    support = np.arange(-2000, 2001)
    if mechanism == "gaussian":
        sigma2 = 1 / (2 * share)  # rho_i = rho / 3 per marginal
        log_pmf = lambda x: -(x.astype(float) ** 2) / (2 * float(sigma2))  # noqa: E731
    else:
        scale = 1 / share  # eps_i = eps / 3 per marginal
        log_pmf = lambda x: -np.abs(x.astype(float)) / float(scale)  # noqa: E731
    weights = np.exp(log_pmf(support))
    cdf = np.cumsum(weights / weights.sum())
    # KS on a discrete law: compare the empirical CDF with the exact one at every support point.
    empirical = np.searchsorted(np.sort(noise), support, side="right") / noise.size
    distance = np.max(np.abs(empirical - cdf))
    assert distance < 1.63 / np.sqrt(noise.size) + 0.005, distance  # 1% KS critical value, n > 20k cells
    variance = _exact_variance(log_pmf, support)
    # the sample variance's standard error is about variance * sqrt(2/n) (light tails); 5 of them
    assert abs(noise.var() - variance) < 5 * variance * np.sqrt(2 / noise.size)
    assert stats.skew(noise) == pytest.approx(0, abs=0.1)


def test_failure_before_noise_refunds_the_charge(engine, titanic, monkeypatch) -> None:  # noqa: ANN001
    def refuse(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise MechanismError("model too large (raised before any noise)")

    monkeypatch.setattr(direct, "run_gaussian", refuse)
    with pytest.raises(MechanismError):
        release_engine.release_marginals(engine, "titanic", "gaussian", SMALL, rho="0.1", seed=1)
    rows = accountant.ledger_rows(engine, "titanic")
    assert [r["entry"] for r in rows] == ["budget", "charge", "refund"]
    assert rows[-1]["rho"] == -0.1 and rows[-1]["release_status"] == "failed_before_noise"
    assert accountant.budget_status(engine, "titanic").rho_spent == 0


def test_failure_after_noise_keeps_the_charge(engine, titanic, monkeypatch) -> None:  # noqa: ANN001
    real = direct.run_gaussian

    def noisy_then_fail(oracle, workload, rho, noise, **kwargs):  # noqa: ANN001, ANN003, ANN202
        real(oracle, workload, rho, noise, **kwargs)
        raise RuntimeError("disk full while storing the payload")

    monkeypatch.setattr(direct, "run_gaussian", noisy_then_fail)
    with pytest.raises(RuntimeError):
        release_engine.release_marginals(engine, "titanic", "gaussian", SMALL, rho="0.1", seed=1)
    rows = accountant.ledger_rows(engine, "titanic")
    assert [r["entry"] for r in rows] == ["budget", "charge"]
    assert rows[-1]["release_status"] == "failed_after_noise"
    assert accountant.budget_status(engine, "titanic").rho_spent == Fraction(1, 10)
    with pytest.raises(ServiceError, match="failed_after_noise"):
        answers.answer_marginal(engine, rows[-1]["release_id"], ["Sex"])


@pytest.mark.parametrize(("mechanism", "options", "fragment"), [
    ("mst", {"rounds": 3}, "no option 'rounds'"),
    ("laplace", {"max_model_size": -1}, "positive"),
    ("aim", {"rounds": 2.5}, "positive int"),
])
def test_bad_options_are_refused_before_anything_is_charged(engine, titanic, mechanism, options, fragment) -> None:  # noqa: ANN001
    kwargs = {"epsilon": "0.1"} if mechanism == "laplace" else {"rho": "0.01"}
    with pytest.raises(InvalidInput, match=fragment):
        release_engine.release_marginals(engine, "titanic", mechanism, SMALL, options=options, **kwargs)
    assert _ledger_charges(engine) == []


def test_answers_are_free_and_seeds_reproduce(engine, titanic) -> None:  # noqa: ANN001
    first = release_engine.release_marginals(engine, "titanic", "gaussian", SMALL, rho="0.05", seed=5)
    second = release_engine.release_marginals(engine, "titanic", "gaussian", SMALL, rho="0.05", seed=5)
    before = accountant.budget_status(engine, "titanic")
    # seeded releases answer in-process only when the caller says so (tests, benchmarks)
    a = answers.answer_marginal(engine, first.release_id, ["Survived", "Pclass"], allow_seeded=True)
    b = answers.answer_marginal(engine, second.release_id, ["Survived", "Pclass"], allow_seeded=True)
    np.testing.assert_allclose(a["counts"], np.asarray(b["counts"]).tolist())
    # axes come back in the order asked
    np.testing.assert_allclose(np.asarray(a["counts"]).T, answers.answer_marginal(
        engine, first.release_id, ["Pclass", "Survived"], allow_seeded=True)["counts"])
    sample_1 = answers.synthetic_frame(engine, first.release_id, 50, seed=9, allow_seeded=True)
    sample_2 = answers.synthetic_frame(engine, first.release_id, 50, seed=9, allow_seeded=True)
    assert sample_1.equals(sample_2) and list(sample_1.columns) == list(titanic.domain.names)
    assert accountant.budget_status(engine, "titanic") == before


def test_unseeded_releases_differ(engine, titanic) -> None:  # noqa: ANN001
    first = release_engine.release_marginals(engine, "titanic", "laplace", SMALL, epsilon="0.5")
    second = release_engine.release_marginals(engine, "titanic", "laplace", SMALL, epsilon="0.5")
    a = answers.answer_marginal(engine, first.release_id, ["Pclass", "Survived"])["counts"]
    b = answers.answer_marginal(engine, second.release_id, ["Pclass", "Survived"])["counts"]
    assert not np.allclose(a, b)


def test_cli_release_json_and_bad_input(engine, titanic, tmp_path: Path) -> None:  # noqa: ANN001
    from typer.testing import CliRunner

    from service.cli import app

    runner = CliRunner()
    done = runner.invoke(app, ["release", "marginals", "titanic", "--mechanism", "laplace", "--workload", "all-1way",
                               "--epsilon", "0.2", "--quiet", "--json"])
    assert done.exit_code == 0, done.output
    payload = json.loads(done.stdout)
    assert payload["cost"] == {"epsilon": 0.2, "delta": 0.0, "rho": 0.0} and payload["release_id"] >= 1
    answer = runner.invoke(app, ["marginal", str(payload["release_id"]), "Sex", "Survived", "--json"])
    assert json.loads(answer.stdout)["shape"] == [2, 3]
    bad = runner.invoke(app, ["release", "marginals", "titanic", "--mechanism", "gaussian", "--workload", "all-1way",
                              "--epsilon", "nan", "--delta", "1e-6", "--json"])
    assert bad.exit_code == 2 and json.loads(bad.stdout)["error"] == "invalid_parameter"
    unknown = runner.invoke(app, ["marginal", str(payload["release_id"]), "Nope"])
    assert unknown.exit_code == 2 and "Nope" in unknown.output
    out = tmp_path / "synthetic.csv"
    synth = runner.invoke(app, ["synth", str(payload["release_id"]), "--rows", "20", "--out", str(out), "--seed", "2"])
    assert synth.exit_code == 0 and len(out.read_text().splitlines()) == 21


# issue 11: seeds are for tests only; sub-grid rho; the progress bar -------------------------------------------------
def test_seeded_releases_are_marked_and_answer_only_when_allowed(engine, titanic) -> None:  # noqa: ANN001
    seeded = release_engine.release_marginals(engine, "titanic", "laplace", SMALL, epsilon="0.1", seed=1)
    plain = release_engine.release_marginals(engine, "titanic", "laplace", SMALL, epsilon="0.1")
    assert seeded.seeded and not plain.seeded and seeded.to_json()["seeded"] is True
    with engine.connect() as connection:
        marks = dict(connection.execute(text("SELECT id, seeded FROM releases")).all())
    assert bool(marks[seeded.release_id]) and not bool(marks[plain.release_id])
    stored = answers.get_release(engine, seeded.release_id)
    assert stored.seeded and stored.to_json()["seeded"] is True
    assert stored.to_json(hide_seeded_details=True)["details"] == {} and stored.to_json()["details"]
    with pytest.raises(answers.SeededReleaseError, match="known seed.*no privacy") as refused:
        answers.answer_marginal(engine, seeded.release_id, ["Sex"])
    assert refused.value.status == 409 and refused.value.code == "seeded_release"
    with pytest.raises(answers.SeededReleaseError):
        answers.synthetic_frame(engine, seeded.release_id, 5)
    assert answers.answer_marginal(engine, seeded.release_id, ["Sex"], allow_seeded=True)["shape"] == [2]
    assert answers.answer_marginal(engine, plain.release_id, ["Sex"])["shape"] == [2]


def test_cli_refuses_seeds_unless_the_unsafe_switch_is_on(engine, titanic, monkeypatch) -> None:  # noqa: ANN001
    from typer.testing import CliRunner

    from service.cli import app

    runner = CliRunner()
    monkeypatch.delenv(release_engine.UNSAFE_SEEDED_RELEASES_ENV, raising=False)
    release = ["release", "marginals", "titanic", "--mechanism", "laplace", "--workload", "all-1way",
               "--epsilon", "0.2", "--seed", "1", "--json"]
    refused = runner.invoke(app, release)
    assert refused.exit_code == 2 and release_engine.UNSAFE_SEEDED_RELEASES_ENV in json.loads(refused.stdout)["message"]
    fit = ["fit", "linear", "titanic", "--target", "Fare", "--features", "Sex", "--method", "adassp",
           "--epsilon", "1", "--delta", "1e-6", "--seed", "3", "--json"]
    assert runner.invoke(app, fit).exit_code == 2
    assert _ledger_charges(engine) == []  # nothing was reserved or charged
    monkeypatch.setenv(release_engine.UNSAFE_SEEDED_RELEASES_ENV, "1")
    allowed = runner.invoke(app, release)
    assert allowed.exit_code == 0, allowed.output
    payload = json.loads(allowed.stdout)
    assert payload["seeded"] is True
    assert runner.invoke(app, ["marginal", str(payload["release_id"]), "Sex", "--json"]).exit_code == 0
    monkeypatch.delenv(release_engine.UNSAFE_SEEDED_RELEASES_ENV)
    answer = runner.invoke(app, ["marginal", str(payload["release_id"]), "Sex", "--json"])
    assert answer.exit_code == 2 and json.loads(answer.stdout)["error"] == "seeded_release"


def test_rho_below_the_ledger_unit_is_refused_up_front(engine, titanic) -> None:  # noqa: ANN001
    """Issue 11, finding 6: a rho that rounds to 0 on the ledger's grid is refused, naming rho, before anything is
    reserved (it used to become a zero charge, then a ZeroDivisionError and a refund)."""
    with pytest.raises(InvalidInput, match=r"rho=1e-13 is below the accountant's resolution") as refused:
        release_engine.release_marginals(engine, "titanic", "gaussian", SMALL, rho="1e-13")
    assert refused.value.code == "invalid_parameter"
    with engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM releases")).scalar_one() == 0
        assert connection.execute(text("SELECT COUNT(*) FROM ledger_entries WHERE entry <> 'budget'")).scalar_one() == 0
    assert registry.get("gaussian").cost(None, None, "1e-12").rho == Fraction(1, 10**12)


def test_cli_validates_before_drawing_a_progress_bar(engine, titanic) -> None:  # noqa: ANN001
    """A refused release prints its error alone: no (empty) progress bar above it."""
    from typer.testing import CliRunner

    from service.cli import app

    runner = CliRunner()
    bad = runner.invoke(app, ["release", "marginals", "titanic", "--mechanism", "laplace", "--epsilon", "-1"])
    assert bad.exit_code == 2 and "epsilon must be > 0" in bad.output
    assert "laplace release of titanic" not in bad.output and "0:00:00" not in bad.output
    bad_fit = runner.invoke(app, ["fit", "linear", "titanic", "--target", "Fare", "--method", "adassp",
                                  "--epsilon", "nan", "--delta", "1e-6"])
    assert bad_fit.exit_code == 2 and "epsilon" in bad_fit.output and "regression of titanic" not in bad_fit.output
    good = runner.invoke(app, ["release", "marginals", "titanic", "--mechanism", "laplace", "--workload", "all-1way",
                               "--epsilon", "0.1"])
    assert good.exit_code == 0 and "laplace release of titanic" in good.output  # the bar, once work started
    assert "budget epsilon spent 0 -> 0.1 of 4" in good.output
