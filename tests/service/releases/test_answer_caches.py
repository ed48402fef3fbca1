"""The per-process caches of answers from stored releases (issue 22): what DD-SSP reads of a complete release is
computed once per (database, release, design), gives exactly the uncached answer, and nothing is cached for -- nor
served from -- a release that is not complete or is seeded."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from db.engine import make_engine
from db.migrate import upgrade_to_head
from service.access import auth
from service.accounting import accountant
from service.api import create_app
from service.errors import ServiceError
from service.privacy.cost import PrivacyCost
from service.regression import answering
from service.regression.fit import fit as fit_regression
from service.releases import answers
from service.releases import engine as release_engine
from tests.support.datasets import titanic_with_budget

LINEAR = ("linear", "Fare", ["Pclass", "Sex", "Age"])
LOGISTIC = ("logistic", "Sex", ["Pclass", "Fare", "Survived"])


@pytest.fixture(autouse=True)
def empty_caches():  # noqa: ANN201
    answers.clear_caches()
    yield
    answers.clear_caches()


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "100", "1e-5")


def _fit(engine, release_id: int, question, **kwargs):  # noqa: ANN001, ANN202
    task, target, features = question
    return fit_regression(engine, "titanic", task, target, features, release_id=release_id, allow_seeded=True,
                          **kwargs)


def _counting_statistics(monkeypatch) -> list[int]:  # noqa: ANN001
    calls: list[int] = []
    original = answering.gram_from_marginals

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(answering, "gram_from_marginals", counted)
    return calls


@pytest.mark.parametrize(("mechanism", "workload", "unmeasured"), [
    ("laplace", "all-2way", False),  # Z^T Z from the measurements themselves
    ("gaussian", "all-1way", True),  # Z^T Z from the graphical model fitted to them
])
def test_dd_ssp_statistics_are_computed_once_and_answer_exactly_as_uncached(
        engine, titanic, monkeypatch, mechanism: str, workload: str, unmeasured: bool) -> None:  # noqa: ANN001
    privacy = {"epsilon": 1} if mechanism == "laplace" else {"rho": "0.5"}
    # the logistic fit's calibration reads the release's model: a short fit of it (what is cached is the same)
    release_id = release_engine.release_marginals(engine, "titanic", mechanism, workload, seed=3,
                                                  options={"iters": 60}, **privacy).release_id
    calls = _counting_statistics(monkeypatch)
    for question in (LINEAR, LOGISTIC):
        answers.clear_caches()
        uncached = _fit(engine, release_id, question, allow_unmeasured=unmeasured)
        cached = [_fit(engine, release_id, question, allow_unmeasured=unmeasured) for _ in range(3)]
        assert all(c.coefficients == uncached.coefficients for c in cached)  # the very same floats
        assert all(c.details == uncached.details for c in cached)
    assert len(calls) == 2  # one computation per (release, design), not one per fit
    # another design of the same release is not answered from the first one's statistics
    other = _fit(engine, release_id, ("linear", "Fare", ["Pclass", "Sex"]), allow_unmeasured=unmeasured)
    assert len(calls) == 3 and set(other.coefficients) == {"(intercept)", "Pclass", "Sex=1"}


def test_cached_marginals_are_bitwise_the_uncached_ones(engine, titanic) -> None:  # noqa: ANN001
    release_id = release_engine.release_marginals(engine, "titanic", "gaussian", "all-1way", rho="0.5",
                                                  seed=5).release_id
    for attributes in (["Sex"], ["Pclass", "Sex"], ["Age", "Fare"]):
        answers.clear_caches()
        first = answers.answer_marginal(engine, release_id, attributes, allow_seeded=True)
        again = answers.answer_marginal(engine, release_id, attributes, allow_seeded=True)
        assert np.asarray(first["counts"]).tobytes() == np.asarray(again["counts"]).tobytes()
        assert first == again


def test_nothing_is_derived_from_or_cached_for_a_release_that_is_not_complete(engine, titanic) -> None:  # noqa: ANN001
    pending, _ = accountant.reserve_release(engine, "titanic", "marginals", "gaussian",
                                            PrivacyCost(rho=Fraction(1, 10)), {}, "test")
    built: list[int] = []
    with pytest.raises(ServiceError) as refused:
        answers.derived_statistics(engine, pending, ("dd-ssp", "any"), lambda: built.append(1))
    assert refused.value.code == "release_not_complete" and built == []
    with pytest.raises(ServiceError) as again:  # still refused: no entry was left behind
        answers.derived_statistics(engine, pending, ("dd-ssp", "any"), lambda: built.append(1))
    assert again.value.code == "release_not_complete" and built == []


def test_a_warm_cache_does_not_let_a_seeded_release_answer_over_http(engine, titanic) -> None:  # noqa: ANN001
    seeded = release_engine.release_marginals(engine, "titanic", "laplace", "all-2way", epsilon=1, seed=2).release_id
    task, target, features = LINEAR
    _fit(engine, seeded, LINEAR)  # in process, allowed: the statistics are now cached
    answers.answer_marginal(engine, seeded, ["Sex"], allow_seeded=True)
    _, key = auth.create_key(engine, "analyst", "cache test")
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    headers = {"Authorization": f"Bearer {key}"}
    fitted = client.post(f"/datasets/titanic/fit/{task}", headers=headers,
                         json={"target": target, "features": features, "release": seeded})
    marginal = client.post(f"/releases/{seeded}/marginal", headers=headers, json={"attributes": ["Sex"]})
    assert (fitted.status_code, fitted.json()["error"]) == (409, "seeded_release")
    assert marginal.status_code == 409 and marginal.json()["error"] == "seeded_release"


def test_the_caches_never_answer_across_databases(tmp_path: Path, data_dir: Path) -> None:
    """Two databases whose releases have the same id and different noise: each answers its own."""
    fitted = []
    for name, seed in (("a", 11), ("b", 12)):
        engine = make_engine(f"sqlite:///{tmp_path / name}.db")
        upgrade_to_head(engine)
        titanic_with_budget(engine, data_dir, "100", "1e-5")
        release_id = release_engine.release_marginals(engine, "titanic", "laplace", "all-2way", epsilon=1,
                                                      seed=seed).release_id
        fitted.append((release_id, _fit(engine, release_id, LINEAR).coefficients,
                       answers.answer_marginal(engine, release_id, ["Age"], allow_seeded=True)["counts"]))
        engine.dispose()
    (id_a, coef_a, counts_a), (id_b, coef_b, counts_b) = fitted
    assert id_a == id_b and coef_a != coef_b and counts_a != counts_b
