"""MST and AIM (service/mechanisms/mst.py, aim.py), their shared pieces (selection.py) and the
compilation-free estimator they run on (tests of the estimator itself: tests/estimators/graphical/).

Tables are small slices of the real titanic data so the whole file stays fast; AIM on Adult is a
benchmark (benchmarks/aim_profile.py), not a test.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from estimators.graphical import junction_tree, mbi_adapter, mirror_descent
from estimators.graphical.mbi_adapter import Model
from estimators.graphical.mirror_descent import Measurement
from service.mechanisms.aim import plan_round, run_aim
from service.mechanisms.base import FIT_PHASE, MechanismError
from service.mechanisms.mst import project_to_simplex, run_mst
from service.mechanisms.selection import ArrayOracle, downward_closure
from service.privacy.calibration import exponential_rho, gaussian_rho
from service.privacy.noise import NoiseSource
from tests.support.paths import DATA, REPO
from tests.support.tables import titanic_oracle
from workloads.marginals import Query, all_kway


class RecordingNoise:
    """The real noise source, with every call's parameters recorded (to recompute the privacy
    spent from what was actually drawn, and to see whether anything was drawn at all)."""

    def __init__(self, seed: int) -> None:
        self.source = NoiseSource(seed)
        self.calls: list[tuple[str, object, object]] = []

    def discrete_gaussian(self, sigma2: Fraction, size: int) -> np.ndarray:
        self.calls.append(("gaussian", sigma2, size))
        return self.source.discrete_gaussian(sigma2, size)

    def exponential_mechanism(self, scores: np.ndarray, epsilon: float, sensitivity: float) -> int:
        self.calls.append(("exponential", epsilon, sensitivity))
        return self.source.exponential_mechanism(scores, epsilon, sensitivity)


def rho_from_calls(noise: RecordingNoise) -> Fraction:
    """zCDP spent according to the draws themselves: 1/(2 sigma^2) per marginal measured (L2
    sensitivity 1), epsilon^2/8 per selection, with epsilon read back exactly from the float."""
    total = Fraction(0)
    for kind, parameter, _ in noise.calls:
        if kind == "gaussian":
            total += 1 / (2 * Fraction(parameter))
        else:
            total += Fraction(parameter) ** 2 / 8
    return total


def workload_error(model: Model, oracle: ArrayOracle) -> float:
    """Mean over all 2-way marginals of the L1 error divided by N (the issue's metric)."""
    pairs = list(itertools.combinations(oracle.domain.names, 2))
    errors = [float(np.abs(mbi_adapter.marginal(model, p) - oracle.counts(p)).sum()) for p in pairs]
    return sum(errors) / oracle.rows / len(pairs)


# exact accounting ------------------------------------------------------------------------------
def test_last_round_spends_exactly_the_rest() -> None:
    rho, sigma2, epsilon = Fraction(30557, 10**6), Fraction(4363), Fraction(1, 64)
    round_cost = gaussian_rho(sigma2) + exponential_rho(epsilon)
    early = plan_round(rho, rho - 2 * round_cost - Fraction(1, 10**12), sigma2, epsilon)
    assert (early.sigma2, early.epsilon, early.last) == (sigma2, epsilon, False)
    for used in (rho - 2 * round_cost, rho - round_cost / 3):
        budget = plan_round(rho, used, sigma2, epsilon)
        assert budget.last
        assert used + gaussian_rho(budget.sigma2) + exponential_rho(budget.epsilon) == rho


def test_mst_uses_exactly_rho_and_selects_a_spanning_tree() -> None:
    oracle = titanic_oracle()
    rho = Fraction(30557, 10**6)
    noise = RecordingNoise(3)
    result = run_mst(oracle, rho, noise, iters=100)
    assert result.cost.rho == rho
    assert result.cost.epsilon == 0 and result.cost.delta == 0
    assert rho_from_calls(noise) == rho
    names = oracle.domain.names
    tree = [tuple(edge) for edge in result.details["tree"]]
    assert len(tree) == len(names) - 1 and len(set(tree)) == len(tree)
    reached, frontier = {names[0]}, [names[0]]
    while frontier:
        node = frontier.pop()
        for a, b in tree:
            for x, y in ((a, b), (b, a)):
                if x == node and y not in reached:
                    reached.add(y)
                    frontier.append(y)
    assert reached == set(names)
    measured = [m.attributes for m in result.payload.measurements]
    assert measured == [(n,) for n in names] + tree


def test_aim_uses_exactly_rho_with_annealing() -> None:
    oracle = titanic_oracle()
    rho = Fraction(2)
    noise = RecordingNoise(5)
    result = run_aim(oracle, all_kway(oracle.domain, 2), rho, noise, rounds=48, round_iters=40, iters=100)
    assert result.details["annealed"] >= 1  # the noise changed during the run
    assert result.cost.rho == rho
    assert rho_from_calls(noise) == rho
    sigmas = {Fraction(p) for kind, p, _ in noise.calls if kind == "gaussian"}
    assert len(sigmas) >= 3  # initial level, at least one annealed level, the last round's remainder


# determinism across processes ------------------------------------------------------------------
_DETERMINISM_SCRIPT = """
import hashlib, sys
from fractions import Fraction
import numpy as np
sys.path.insert(0, {repo!r})
from tests.service.mechanisms.test_mst_aim import RecordingNoise
from tests.support.tables import titanic_oracle
from service.mechanisms.aim import run_aim
from service.mechanisms.mst import run_mst
from workloads.marginals import all_kway
oracle = titanic_oracle()
digest = hashlib.sha256()
for result in (
    run_aim(oracle, all_kway(oracle.domain, 2), Fraction(1), RecordingNoise(11), rounds=8, round_iters=20, iters=40),
    run_mst(oracle, Fraction(1), RecordingNoise(11), iters=40),
):
    for m in result.payload.measurements:
        digest.update(repr(m.attributes).encode()); digest.update(np.asarray(m.values).tobytes())
    for clique in result.payload.model.potentials.cliques:
        digest.update(repr(clique).encode())
        digest.update(np.asarray(result.payload.model.potentials[clique].values).tobytes())
print(digest.hexdigest())
"""


def test_same_seed_same_release_across_processes() -> None:
    script = _DETERMINISM_SCRIPT.format(repo=str(REPO))
    digests = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "MARGINALIA_SHARED_DATA": str(DATA)}
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO,
                             timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        digests.append(run.stdout.strip().splitlines()[-1])
    assert digests[0] == digests[1]


# accuracy ----------------------------------------------------------------------------------------
def test_aim_beats_every_one_way_model_at_large_rho() -> None:
    """At rho = 50 AIM's noise is small (sigma of a 2-way marginal around 2-3 counts), so its
    error must come out below that of the best possible 1-way-only estimate: the independence model
    built from the EXACT 1-way marginals, whose error is pure bias (no noise would lower it)."""
    oracle = titanic_oracle()
    result = run_aim(oracle, all_kway(oracle.domain, 2), Fraction(50), RecordingNoise(2), rounds=16, round_iters=50,
                     iters=300)
    exact_oneway = [Measurement((n,), oracle.counts((n,)).astype(float), 1.0) for n in oracle.domain.names]
    independent = mbi_adapter.fit_to_mbi(mirror_descent.fit(oracle.domain, exact_oneway, iters=10))
    assert workload_error(result.payload.model, oracle) < workload_error(independent, oracle)


# model size ----------------------------------------------------------------------------------------
def test_too_large_initial_model_fails_before_any_noise() -> None:
    oracle = titanic_oracle()
    noise = RecordingNoise(0)
    with pytest.raises(MechanismError, match="max_model_size"):
        run_aim(oracle, all_kway(oracle.domain, 2), Fraction(1), noise, max_model_size=1e-4)
    assert noise.calls == []


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"rounds": 0}, "rounds"),
        ({"rounds": 3}, "rounds"),  # 6 one-way measurements would take all the budget
        ({"initial_cliques": [("Nope",)]}, "initial_cliques"),
        ({"initial_cliques": []}, "initial_cliques"),
        ({"max_model_size": -1.0}, "max_model_size"),
        ({"structural_zeros": {("Sex",): np.array([True])}}, "structural_zeros"),
        ({"round_iters": 0}, "round_iters"),
    ],
)
def test_bad_aim_settings_fail_before_any_noise(options: dict[str, object], match: str) -> None:
    oracle = titanic_oracle()
    noise = RecordingNoise(0)
    with pytest.raises(MechanismError, match=match):
        run_aim(oracle, all_kway(oracle.domain, 2), Fraction(1), noise, **options)
    assert noise.calls == []


def test_bad_rho_and_workload_fail_before_any_noise() -> None:
    oracle = titanic_oracle()
    noise = RecordingNoise(0)
    with pytest.raises(MechanismError, match="rho"):
        run_mst(oracle, Fraction(0), noise)
    with pytest.raises(MechanismError, match="rho"):
        run_aim(oracle, all_kway(oracle.domain, 1), 0.5, noise)  # a float is not an exact rational
    with pytest.raises(MechanismError, match="Nope"):
        run_aim(oracle, [Query(("Sex", "Nope"))], Fraction(1), noise)
    assert noise.calls == []


def test_aim_respects_max_model_size() -> None:
    oracle = titanic_oracle(("Survived", "Pclass", "Sex", "Age", "SibSp", "Parch"))
    workload = all_kway(oracle.domain, 2)

    def run(limit: float) -> tuple[float, list[tuple[str, ...]]]:
        result = run_aim(oracle, workload, Fraction(5), RecordingNoise(4), max_model_size=limit, rounds=60,
                         round_iters=20, iters=20)
        return result.details["model_size_mb"], [m.attributes for m in result.payload.measurements]

    limit = 0.005  # MB
    free_size, _ = run(80.0)
    assert free_size > limit  # without the cap this run builds a larger model, so the cap has to act
    size, cliques = run(limit)
    assert size <= limit
    assert junction_tree.model_size_mb(oracle.domain, cliques) <= limit


# options ---------------------------------------------------------------------------------------
def test_workload_weights_and_closure() -> None:
    domain = titanic_oracle().domain
    closure = dict(downward_closure(domain, [Query(("Survived", "Pclass"), 2.0), Query(("Pclass", "Sex"), 1.0)]))
    assert closure == {
        ("Survived",): 2.0, ("Pclass",): 3.0, ("Sex",): 1.0,
        ("Survived", "Pclass"): 5.0, ("Pclass", "Sex"): 4.0,  # w_r = sum_s c_s |r ∩ s|
    }


def test_structural_zeros_get_probability_zero() -> None:
    oracle = titanic_oracle()
    mask = np.zeros((3, 3), dtype=bool)  # Survived x Pclass
    mask[2, :] = True  # no "unknown survival" rows in any class
    zeros = {("Survived", "Pclass"): mask}
    result = run_aim(oracle, all_kway(oracle.domain, 2), Fraction(1), RecordingNoise(8), rounds=8, round_iters=20,
                     iters=50, structural_zeros=zeros)
    fitted = result.payload.model
    for model in (fitted, mbi_adapter.model_from_bytes(mbi_adapter.model_to_bytes(fitted), oracle.domain)):
        table = mbi_adapter.marginal(model, ("Survived", "Pclass"))
        assert np.all(table[mask] == 0.0)
        assert table.sum() == pytest.approx(float(model.total))
        rows = mbi_adapter.synthetic_rows(model, 5000, seed=1)
        assert not np.any(mask[rows["Survived"], rows["Pclass"]])


def test_initial_cliques_and_progress_per_round() -> None:
    oracle = titanic_oracle()
    calls: list[tuple[int, int, str]] = []
    result = run_aim(oracle, [Query(("Survived", "Sex")), Query(("Pclass", "Sex"))], Fraction(1), RecordingNoise(9),
                     initial_cliques=[("Sex", "Survived")], rounds=6, round_iters=20, iters=20,
                     progress=lambda done, total, message: calls.append((done, total, message)))
    assert result.payload.measurements[0].attributes == ("Survived", "Sex")
    assert result.details["initial_cliques"] == [["Survived", "Sex"]]
    rounds = result.details["rounds"]
    steps = [c for c in calls if c[2] != FIT_PHASE]
    # counted, one call per round, the final fit starting and done
    assert [c[0] for c in steps] == [0, *range(1, rounds + 1), rounds, rounds + 1]
    assert steps[-1][0] == steps[-1][1]
    fits = [c for c in calls if c[2] == FIT_PHASE]  # every estimation reports its iterations
    assert (0, 20, FIT_PHASE) in fits and (20, 20, FIT_PHASE) in fits and len(fits) == (rounds + 2) * 21


# the estimator ---------------------------------------------------------------------------------
def test_project_to_simplex() -> None:
    projected = project_to_simplex(np.array([5.0, -2.0, 1.0, 0.5]), 4.0)
    assert projected.sum() == pytest.approx(4.0)
    assert np.all(projected >= 0)
    # KKT: x = max(v - theta, 0) with one theta; here theta = 1
    assert np.allclose(projected, [4.0, 0.0, 0.0, 0.0])
    assert np.allclose(project_to_simplex(np.array([1.0, 2.0, 3.0]), 6.0), [1.0, 2.0, 3.0])


def test_mst_is_reproducible_and_seed_sensitive() -> None:
    oracle = titanic_oracle()

    def digest(seed: int) -> str:
        result = run_mst(oracle, Fraction(1, 10), NoiseSource(seed), iters=20)
        measured = result.payload.measurements
        return hashlib.sha256(b"".join(np.asarray(m.values).tobytes() for m in measured)).hexdigest()

    assert digest(1) == digest(1)
    assert digest(1) != digest(2)



class BatchOracle(ArrayOracle):
    """An oracle that can answer many cliques at once, recording how it was asked."""

    def __init__(self, base: ArrayOracle) -> None:
        super().__init__(base.domain, base.columns)
        self.single: list[tuple[str, ...]] = []
        self.batches: list[list[tuple[str, ...]]] = []

    def counts(self, attributes: tuple[str, ...]) -> np.ndarray:
        self.single.append(tuple(attributes))
        return super().counts(attributes)

    def counts_many(self, requests: list[tuple[str, ...]]) -> dict[tuple[str, ...], np.ndarray]:
        self.batches.append(list(requests))
        return {r: super(BatchOracle, self).counts(r) for r in requests}


def test_batched_counts_are_fetched_once_before_any_noise() -> None:
    oracle = titanic_oracle()
    for run in (
        lambda o, n: run_mst(o, Fraction(1), n, iters=20),
        lambda o, n: run_aim(o, all_kway(o.domain, 2), Fraction(1), n, rounds=12, round_iters=20, iters=20),
    ):
        batch = BatchOracle(oracle)
        plain = run(oracle, RecordingNoise(6))
        batched = run(batch, RecordingNoise(6))
        assert len(batch.batches) == 1 and batch.single == []
        assert all(np.array_equal(a.values, b.values)
                   for a, b in zip(plain.payload.measurements, batched.payload.measurements, strict=True))
