"""The frequency oracles (docs/privacy.md 8.10): each output's law against the exact one, the privacy ratio of that
law, OLH's exact universality, unbiased estimates with the stated variance, the exact coins' independence of the
input beyond the law, and the server's refusals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.linalg
from scipy import stats

from workloads.local.randomizers.frequency_oracles import (
    ORACLES,
    GeneralizedRandomizedResponse,
    HadamardResponse,
    OptimizedLocalHashing,
    OptimizedUnaryEncoding,
    OracleReports,
    best_oracle,
    make_oracle,
    olh_buckets,
    walsh_hadamard,
)
from workloads.parameters import ParameterError

#: the p-value below which a chi-square test fails (a fixed seed: the test is deterministic)
ALPHA = 1e-3


def exact_law(oracle, x: int) -> np.ndarray:  # noqa: ANN001
    """P(output | x) over the oracle's whole output set, from the definition (docs/privacy.md 8.10 (a)); OLH's outputs
    are (seed, bucket) pairs, flattened seed-major."""
    e = math.exp(float(oracle.exact_epsilon))
    if isinstance(oracle, GeneralizedRandomizedResponse):
        weights = np.ones(oracle.cells)
        weights[x] = e
    elif isinstance(oracle, HadamardResponse):
        ys = np.arange(oracle.order)
        favoured = np.array([bin((x + 1) & int(y)).count("1") % 2 == 0 for y in ys])
        weights = np.where(favoured, e, 1.0)
    elif isinstance(oracle, OptimizedLocalHashing):
        seeds = np.arange(oracle.seed_limit)
        hashes = oracle.hash(seeds, np.full(seeds.size, x))
        weights = np.ones((seeds.size, oracle.buckets))
        weights[seeds, hashes] = e
        weights = weights.ravel()
    else:
        raise TypeError(oracle)
    return weights / weights.sum()


def observed(oracle, reports: OracleReports) -> np.ndarray:  # noqa: ANN001
    if isinstance(oracle, OptimizedLocalHashing):
        flat = reports.seed.astype(int) * oracle.buckets + reports.value.astype(int)
        return np.bincount(flat, minlength=oracle.seed_limit * oracle.buckets)
    return np.bincount(reports.value.astype(int), minlength=oracle.value_limit)


@pytest.mark.parametrize("oracle", [GeneralizedRandomizedResponse(5, 1.0), GeneralizedRandomizedResponse(3, 3.0),
                                    HadamardResponse(6, 1.5), HadamardResponse(3, 0.5),
                                    OptimizedLocalHashing(4, 1.0), OptimizedLocalHashing(7, 0.3)],
                         ids=lambda o: f"{o.name}-k{o.cells}-eps{o.epsilon}")
def test_outputs_follow_the_exact_law(oracle) -> None:  # noqa: ANN001
    rng = np.random.default_rng(11)
    for x in (0, oracle.cells - 1):
        law = exact_law(oracle, x)
        reports = oracle.randomize(np.full(60_000, x), rng)
        counts = observed(oracle, reports)
        assert stats.chisquare(counts, law * counts.sum()).pvalue > ALPHA


@pytest.mark.parametrize("oracle", [GeneralizedRandomizedResponse(4, 1.2), HadamardResponse(5, 0.7),
                                    OptimizedLocalHashing(5, 2.0)], ids=lambda o: o.name)
def test_the_laws_ratio_is_e_to_the_epsilon(oracle) -> None:  # noqa: ANN001
    """Over every pair of inputs and every output, the largest ratio of the exact law is e^eps' (<= e^eps)."""
    laws = np.array([exact_law(oracle, x) for x in range(oracle.cells)])
    ratio = max(float(np.max(laws[a] / laws[b])) for a, b in itertools.permutations(range(oracle.cells), 2))
    assert ratio == pytest.approx(math.exp(float(oracle.exact_epsilon)), rel=1e-12)
    assert ratio <= math.exp(oracle.epsilon) * (1 + 1e-12)


def test_oue_bits_follow_their_law_and_ratio() -> None:
    oracle = OptimizedUnaryEncoding(6, 1.0)
    reports = oracle.randomize(np.full(40_000, 2), np.random.default_rng(3))
    rates = reports.bits.mean(axis=0)
    expected = np.full(6, oracle.q)
    expected[2] = 0.5
    # each bit is an independent Bernoulli: a z-test per bit (Bonferroni over the six)
    z = (rates - expected) / np.sqrt(expected * (1 - expected) / 40_000)
    assert np.all(np.abs(z) < stats.norm.ppf(1 - ALPHA / 12))
    # independence of two bits: their joint law is the product
    both = np.mean(reports.bits[:, 0] * reports.bits[:, 1])
    assert abs(both - oracle.q**2) < 5 * math.sqrt(oracle.q**2 / 40_000)
    assert (oracle.p * (1 - oracle.q)) / ((1 - oracle.p) * oracle.q) == pytest.approx(
        math.exp(float(oracle.exact_epsilon)))


def test_the_olh_family_is_exactly_universal() -> None:
    """For every pair of distinct values, exactly 1/g of the seeds hash them together (docs/privacy.md 8.10 (a))."""
    oracle = OptimizedLocalHashing(10, 1.0)
    seeds = np.arange(oracle.seed_limit)
    hashes = np.array([oracle.hash(seeds, np.full(seeds.size, v)) for v in range(oracle.cells)])
    for u, v in itertools.combinations(range(oracle.cells), 2):
        assert np.sum(hashes[u] == hashes[v]) * oracle.buckets == seeds.size


def test_olh_takes_the_prime_next_to_e_to_the_epsilon_plus_one() -> None:
    assert [olh_buckets(eps) for eps in (0.1, 1.0, 2.0, 4.0)] == [2, 3, 7, 53]


@pytest.mark.parametrize("name", ORACLES)
def test_estimates_are_unbiased_with_the_stated_variance(name: str) -> None:
    rng = np.random.default_rng(5)
    oracle = make_oracle(name, 6, 1.0)
    truth = np.array([0.35, 0.25, 0.15, 0.1, 0.1, 0.05])
    estimates = []
    for _ in range(300):
        values = rng.choice(6, size=3_000, p=truth)
        reports = oracle.randomize(values, rng)
        estimates.append(oracle.estimate(oracle.tally(reports), reports.count))
    estimates = np.array(estimates)
    variance = oracle.cell_variance(truth, 3_000)
    z = (estimates.mean(axis=0) - truth) / np.sqrt(variance / 300)
    assert np.all(np.abs(z) < 4.0), z
    ratio = estimates.var(axis=0, ddof=1) / variance  # chi-square with 299 degrees of freedom, scaled
    assert np.all((ratio > 0.7) & (ratio < 1.35)), ratio


def test_the_walsh_hadamard_transform_is_the_matrix_product() -> None:
    vector = np.random.default_rng(0).standard_normal(16)
    assert np.allclose(walsh_hadamard(vector), scipy.linalg.hadamard(16) @ vector)
    with pytest.raises(ParameterError, match="power-of-two"):
        walsh_hadamard(np.ones(6))


def test_the_default_takes_the_least_variance() -> None:
    assert best_oracle(4, 2.0).name == "grr"  # few cells, large epsilon
    assert best_oracle(400, 1.0).name == "olh"
    for cells, epsilon in ((4, 2.0), (400, 1.0), (30, 0.5), (30, 4.0)):
        chosen = best_oracle(cells, epsilon)
        others = [make_oracle(name, cells, epsilon) for name in ("grr", "olh", "hadamard")]
        assert chosen.mean_variance(1) == min(o.mean_variance(1) for o in others)


@pytest.mark.parametrize("name", ORACLES)
def test_one_seed_gives_one_batch_of_reports(name: str) -> None:
    """Seeded draws are reproducible (tests and simulations), and every honest report is accepted. That a report
    depends on the input only through the oracle's law is the chi-square tests above."""
    oracle = make_oracle(name, 5, 1.0)
    first = oracle.randomize(np.array([0, 1, 2, 3, 4, 2]), np.random.default_rng(9))
    again = oracle.randomize(np.array([0, 1, 2, 3, 4, 2]), np.random.default_rng(9))
    for a, b in ((first.value, again.value), (first.seed, again.seed)):
        assert np.array_equal(a, b)
    assert oracle.first_refused(first) is None


def test_the_server_refuses_what_no_device_sends() -> None:
    olh = OptimizedLocalHashing(10, 1.0)
    good = olh.randomize(np.arange(10), np.random.default_rng(1))
    assert olh.first_refused(good) is None
    for field, value in (("value", olh.buckets), ("value", 0.5), ("seed", olh.seed_limit), ("seed", -1.0)):
        bad = OracleReports(good.value.copy(), good.seed.copy())
        getattr(bad, field)[3] = value
        index, named, why = olh.first_refused(bad)
        assert index == 3 and named == field and field in why
    grr = GeneralizedRandomizedResponse(4, 1.0)
    assert grr.first_refused(OracleReports(np.array([0.0, 4.0]), np.zeros(2)))[0] == 1
    assert grr.first_refused(OracleReports(np.array([0.0, 1.0]), np.array([0.0, 1.0])))[0] == 1  # GRR's seed is 0
    oue = OptimizedUnaryEncoding(3, 1.0)
    bits = np.array([[0.0, 1.0, 0.0], [0.0, 0.5, 1.0]])
    assert oue.first_refused(OracleReports(np.zeros(2), np.zeros(2), bits))[:2] == (1, "bits")


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ParameterError, match="values must be whole numbers in"):
        GeneralizedRandomizedResponse(3, 1.0).randomize([0, 3])
    with pytest.raises(ParameterError, match="cells"):
        GeneralizedRandomizedResponse(1, 1.0)
    with pytest.raises(ParameterError, match="epsilon"):
        HadamardResponse(4, 0.0)
    with pytest.raises(ParameterError, match="oracle must be"):
        make_oracle("rappor", 4, 1.0)


def test_a_marginals_olh_hashes_each_axis_and_stays_exactly_universal() -> None:
    oracle = OptimizedLocalHashing(12, 1.0, (3, 4))
    assert oracle.axis_digits == (1, 2) and oracle.seed_limit == 3**3
    seeds = np.arange(oracle.seed_limit)
    hashes = np.array([oracle.hash(seeds, np.full(seeds.size, v)) for v in range(12)])
    for u, v in itertools.combinations(range(12), 2):
        assert np.sum(hashes[u] == hashes[v]) * oracle.buckets == seeds.size


def test_the_factorised_tally_is_the_direct_count() -> None:
    """The two-axis tally by matrix products counts exactly what comparing every cell's hash counts."""
    oracle = OptimizedLocalHashing(35, 1.0, (5, 7))
    reports = oracle.randomize(np.random.default_rng(0).integers(0, 35, 3_000), np.random.default_rng(1))
    direct = np.array([np.sum(oracle.hash(reports.seed, np.full(reports.count, v)) == reports.value)
                       for v in range(35)], dtype=float)
    assert np.array_equal(oracle.tally(reports), direct)
