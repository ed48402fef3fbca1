"""Tests of service.privacy.noise: determinism, exactness of the integer samplers, the exponential mechanism.

Statistical tests use fixed seeds. Tolerances come from the sampling distribution of the statistic:
z = 4 standard errors for moment checks (a correct sampler fails with probability ~6e-5 per check) and a
p-value floor of 1e-4 for chi-square / binomial tests. With fixed seeds each test is deterministic.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import service.privacy.noise as noise_module
from service.privacy.noise import NoiseSource
from tests.support.paths import REPO
from workloads.parameters import PrivacyParameterError

P_FLOOR = 1e-4
Z = 4.0


# ---------------------------------------------------------------- exact reference distributions
def gaussian_pmf(sigma2: float) -> tuple[np.ndarray, np.ndarray]:
    """Support and pmf of the discrete Gaussian, P(x) proportional to exp(-x^2/(2 sigma2)), summed exactly
    over |x| <= 40 sigma + 10 (the rest has relative mass below exp(-800))."""
    half = int(40 * math.sqrt(sigma2)) + 10
    xs = np.arange(-half, half + 1)
    weights = np.exp(-(xs.astype(float) ** 2) / (2 * sigma2))
    return xs, weights / weights.sum()


def laplace_pmf(scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Support and pmf of the discrete Laplace, P(x) = (1 - e^{-1/b}) / (1 + e^{-1/b}) e^{-|x|/b}."""
    half = int(60 * scale) + 60
    xs = np.arange(-half, half + 1)
    q = math.exp(-1 / scale)
    return xs, (1 - q) / (1 + q) * q ** np.abs(xs)


def chi_square_pvalue(samples: np.ndarray, xs: np.ndarray, pmf: np.ndarray) -> float:
    """Chi-square goodness of fit over integer cells, each tail pooled into one cell so that every expected count
    is >= 5 (the pooled tail cells test the far tails)."""
    n = samples.size
    keep = np.flatnonzero(n * pmf >= 5)
    lo, hi = xs[keep[0]], xs[keep[-1]]
    # grow the tail cells inwards until they too have expected counts >= 5
    while n * pmf[xs < lo].sum() < 5 and lo < hi:
        lo += 1
    while n * pmf[xs > hi].sum() < 5 and hi > lo:
        hi -= 1
    expected = [n * pmf[xs < lo].sum()] + [n * pmf[xs == v].sum() for v in range(lo, hi + 1)] + [n * pmf[xs > hi].sum()]
    observed = [np.sum(samples < lo)] + [np.sum(samples == v) for v in range(lo, hi + 1)] + [np.sum(samples > hi)]
    expected_arr, observed_arr = np.array(expected), np.array(observed, dtype=float)
    assert observed_arr.sum() == n
    assert expected_arr.min() >= 5
    return float(stats.chisquare(observed_arr, expected_arr * n / expected_arr.sum()).pvalue)


def check_second_moment(samples: np.ndarray, xs: np.ndarray, pmf: np.ndarray) -> None:
    """mean(x^2) against the exact variance sum x^2 p(x) (the mean is 0 by symmetry); the standard error of
    mean(x^2) is sqrt((E x^4 - (E x^2)^2) / n), from the exact fourth moment."""
    var = float(np.sum(xs.astype(float) ** 2 * pmf))
    fourth = float(np.sum(xs.astype(float) ** 4 * pmf))
    se = math.sqrt((fourth - var**2) / samples.size)
    assert abs(np.mean(samples.astype(float) ** 2) - var) <= Z * se
    assert abs(np.mean(samples)) <= Z * math.sqrt(var / samples.size)


def check_symmetry(samples: np.ndarray) -> None:
    positive, negative = int(np.sum(samples > 0)), int(np.sum(samples < 0))
    assert stats.binomtest(positive, positive + negative, 0.5).pvalue > P_FLOOR


# ---------------------------------------------------------------- determinism
def draw_everything(source: NoiseSource) -> list[object]:
    return [
        source.discrete_gaussian(Fraction(9, 2), 20).tolist(),
        source.discrete_laplace(Fraction(3, 2), 20).tolist(),
        source.gaussian(2.0, 5).tolist(),
        source.exponential_mechanism(np.arange(6.0), 1.0, 1.0),
        source.numpy_generator().integers(0, 1000, 5).tolist(),
        source.uniform_int(10**30),
        source.bernoulli_exp(Fraction(1, 3)),
    ]


def test_same_seed_same_output() -> None:
    assert draw_everything(NoiseSource(12345)) == draw_everything(NoiseSource(12345))
    assert NoiseSource(7).seeded and not NoiseSource().seeded


def test_different_seeds_differ() -> None:
    a, b = draw_everything(NoiseSource(1)), draw_everything(NoiseSource(2))
    for x, y in list(zip(a, b, strict=True))[:3]:
        assert x != y


def test_unseeded_sources_differ() -> None:
    assert NoiseSource().discrete_gaussian(100, 50).tolist() != NoiseSource().discrete_gaussian(100, 50).tolist()
    assert NoiseSource().gaussian(1.0, 5).tolist() != NoiseSource().gaussian(1.0, 5).tolist()


def test_same_seed_same_output_across_processes_and_hash_seeds() -> None:
    script = (
        "import hashlib, json; from fractions import Fraction; from service.privacy.noise import NoiseSource\n"
        "s = NoiseSource(2024)\n"
        "out = [s.discrete_gaussian(Fraction(9, 2), 50).tolist(), s.discrete_laplace(3, 50).tolist(),\n"
        "       s.gaussian(1.0, 5).tolist(), s.exponential_mechanism([0.0, 1.0, 2.0], 1.0, 1.0)]\n"
        "print(hashlib.sha256(json.dumps(out).encode()).hexdigest())\n"
    )
    digests = set()
    for hash_seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                                check=True, timeout=120)
        digests.add(result.stdout.strip())
    local = NoiseSource(2024)
    out = [local.discrete_gaussian(Fraction(9, 2), 50).tolist(), local.discrete_laplace(3, 50).tolist(),
           local.gaussian(1.0, 5).tolist(), local.exponential_mechanism([0.0, 1.0, 2.0], 1.0, 1.0)]
    digests.add(hashlib.sha256(json.dumps(out).encode()).hexdigest())
    assert len(digests) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_does_not_reuse_the_parents_os_bits() -> None:
    source = NoiseSource()
    source.uniform_int(2)  # fills the buffer
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report 128 bits and exit at once
        os.close(read_fd)
        os.write(write_fd, str(source.uniform_int(2**128)).encode())
        os._exit(0)
    os.close(write_fd)
    child_value = int(os.read(read_fd, 100).decode())
    os.close(read_fd)
    os.waitpid(pid, 0)
    assert child_value != source.uniform_int(2**128)


# ---------------------------------------------------------------- exact samplers
@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(7, 2), Fraction(10, 3)])
def test_bernoulli_exp_frequency(gamma: Fraction) -> None:
    source = NoiseSource(99)
    n = 20000
    hits = sum(source.bernoulli_exp(gamma) for _ in range(n))
    p = math.exp(-float(gamma))
    if p == 1.0:
        assert hits == n
    else:
        assert stats.binomtest(hits, n, p).pvalue > P_FLOOR


@pytest.mark.parametrize("sigma2", [Fraction(1, 2), Fraction(2), Fraction(9), Fraction(1, 10), 0.3])
def test_discrete_gaussian_goodness_of_fit_variance_symmetry(sigma2: Fraction | float) -> None:
    source = NoiseSource(2020)
    samples = source.discrete_gaussian(sigma2, 20000)
    assert samples.dtype == np.int64 and samples.shape == (20000,)
    xs, pmf = gaussian_pmf(float(sigma2))
    assert chi_square_pvalue(samples, xs, pmf) > P_FLOOR
    check_second_moment(samples, xs, pmf)
    check_symmetry(samples)


def test_discrete_gaussian_variance_differs_from_sigma2_for_small_sigma() -> None:
    # the exact variance of N_Z(0, 1/10) is about 0.013, far below 1/10 (and that of N_Z(0, 1/2) is 0.499):
    # the test reference is the pmf, not sigma2
    xs, pmf = gaussian_pmf(0.1)
    assert float(np.sum(xs**2 * pmf)) < 0.02
    samples = NoiseSource(5).discrete_gaussian(Fraction(1, 10), 20000)
    check_second_moment(samples, xs, pmf)


def test_discrete_gaussian_large_sigma_variance() -> None:
    samples = NoiseSource(17).discrete_gaussian(Fraction(10000), 20000)
    xs, pmf = gaussian_pmf(10000.0)
    check_second_moment(samples, xs, pmf)
    check_symmetry(samples)


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(1), Fraction(3), Fraction(7, 3)])
def test_discrete_laplace_goodness_of_fit_variance_symmetry(scale: Fraction) -> None:
    samples = NoiseSource(31).discrete_laplace(scale, 20000)
    xs, pmf = laplace_pmf(float(scale))
    assert chi_square_pvalue(samples, xs, pmf) > P_FLOOR
    check_second_moment(samples, xs, pmf)
    check_symmetry(samples)


def test_acceptance_exponent_is_the_papers(monkeypatch: pytest.MonkeyPatch) -> None:
    # Alg. 3 accepts Y with probability exp(-(|Y| - sigma2/t)^2 / (2 sigma2)); the module computes the exponent
    # as the integer ratio (|Y| d t - n)^2 / (2 n d t^2). Record what it passes and compare with the paper's form.
    sigma2 = Fraction(37, 5)
    t = math.isqrt(37 // 5) + 1
    assert t == math.floor(math.sqrt(37 / 5)) + 1
    seen: list[tuple[int, int]] = []
    original = noise_module._bernoulli_exp

    def recording(num: int, den: int, below: object) -> bool:
        seen.append((num, den))
        return original(num, den, below)  # type: ignore[arg-type]

    monkeypatch.setattr(noise_module, "_bernoulli_exp", recording)
    NoiseSource(3).discrete_gaussian(sigma2, 300)
    assert len(seen) >= 300
    for num, den in seen:
        square = Fraction(num, den) * 2 * sigma2  # must equal (k - sigma2/t)^2 for the integer k = |Y|
        assert any((k - sigma2 / t) ** 2 == square for k in range(0, 400)), (num, den)


def test_exact_conversion_of_parameters() -> None:
    source = NoiseSource(8)
    a = source.discrete_gaussian(Decimal("0.5"), 5)
    b = NoiseSource(8).discrete_gaussian(Fraction(1, 2), 5)
    c = NoiseSource(8).discrete_gaussian("0.5", 5)
    assert a.tolist() == b.tolist() == c.tolist()
    assert NoiseSource(8).discrete_laplace(2, (2, 3)).shape == (2, 3)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "x", None])
def test_sampler_parameters_are_validated(bad: object) -> None:
    source = NoiseSource(1)
    with pytest.raises(PrivacyParameterError, match="sigma2"):
        source.discrete_gaussian(bad, 3)
    with pytest.raises(PrivacyParameterError, match="scale"):
        source.discrete_laplace(bad, 3)
    with pytest.raises(PrivacyParameterError, match="sigma"):
        source.gaussian(bad, 3)


@pytest.mark.parametrize("bad_size", [-1, 2.5, True, "3", (2, -1)])
def test_sizes_are_validated(bad_size: object) -> None:
    with pytest.raises(ValueError, match="size"):
        NoiseSource(1).discrete_gaussian(1, bad_size)  # type: ignore[arg-type]


def test_seed_and_uniform_int_validation() -> None:
    with pytest.raises(ValueError, match="seed"):
        NoiseSource("1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed"):
        NoiseSource(True)
    with pytest.raises(ValueError, match="n must be"):
        NoiseSource(1).uniform_int(0)
    source = NoiseSource(6)
    draws = np.bincount([source.uniform_int(7) for _ in range(14000)], minlength=7)
    assert stats.chisquare(draws).pvalue > P_FLOOR


# ---------------------------------------------------------------- continuous Gaussian
def test_gaussian_moments() -> None:
    samples = NoiseSource(11).gaussian(3.0, (100, 100))
    assert samples.shape == (100, 100) and samples.dtype == np.float64
    n = samples.size
    assert abs(samples.mean()) <= Z * 3.0 / math.sqrt(n)
    # var(mean of x^2) = 2 sigma^4 / n for a normal
    assert abs(np.mean(samples**2) - 9.0) <= Z * math.sqrt(2 * 81 / n)


def _replayable_urandom(n: int, _state: list[int] = [0]) -> bytes:  # noqa: B006 - a counter on purpose
    """A stand-in for os.urandom: SHA-256 in counter mode, so the OS path is tested reproducibly."""
    out = b"".join(hashlib.sha256(f"{_state[0]}:{i}".encode()).digest() for i in range((n + 31) // 32))
    _state[0] += 1
    return out[:n]


def test_gaussian_passes_kolmogorov_smirnov_seeded_and_from_the_os(monkeypatch: pytest.MonkeyPatch) -> None:
    # KS against N(0, sigma^2), 50,000 draws each: p-value floor as everywhere in this file. The OS path reads
    # os.urandom, replaced here by a replayable stream so that the test is deterministic.
    monkeypatch.setattr(noise_module.os, "urandom", _replayable_urandom)
    for source in (NoiseSource(12), NoiseSource()):
        samples = source.gaussian(2.5, 50_000)
        assert stats.kstest(samples / 2.5, "norm").pvalue > P_FLOOR
        assert abs(np.mean(samples**2) - 6.25) <= Z * math.sqrt(2 * 2.5**4 / samples.size)
    # the uniforms behind it: on the open interval (0, 1), on the grid (2k + 1) / 2^53, and uniform (KS)
    u = NoiseSource(13).uniform(50_000)
    assert 0.0 < u.min() and u.max() < 1.0
    assert np.all(np.mod(u * 2.0**53, 2.0) == 1.0)
    assert stats.kstest(u, "uniform").pvalue > P_FLOOR


def test_float_noise_comes_from_the_sources_own_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 11, finding 7: Gaussian and Gumbel noise are built from the source's bits (os.urandom for an unseeded
    source), never from a second, non-cryptographic generator (numpy's PCG64)."""

    def no_pcg64(self: NoiseSource) -> None:
        raise AssertionError("a mechanism's noise must not come from numpy's PCG64")

    monkeypatch.setattr(NoiseSource, "numpy_generator", no_pcg64)
    requested: list[int] = []
    real_urandom = os.urandom

    def counting_urandom(n: int) -> bytes:
        requested.append(n)
        return real_urandom(n)

    monkeypatch.setattr(noise_module.os, "urandom", counting_urandom)
    source = NoiseSource()
    big = source.gaussian(1.0, 10_000)  # 80,000 bytes: read straight from os.urandom
    assert big.shape == (10_000,) and 80_000 in requested
    source.gaussian(1.0, 3)
    source.exponential_mechanism([0.0, 1.0, 2.0], 1.0, 1.0)
    # seeded: the same bits, hence the same values, in any process (Python's Mersenne Twister, randbytes)
    assert NoiseSource(5).gaussian(1.0, 4).tolist() == NoiseSource(5).gaussian(1.0, 4).tolist()
    zeros = NoiseSource(5)
    monkeypatch.setattr(zeros._rng, "randbytes", lambda n: b"\x00" * n)  # every k = 0: u = 2^-53
    assert zeros.uniform(2).tolist() == [2.0**-53] * 2


# ---------------------------------------------------------------- exponential mechanism
def softmax(scores: np.ndarray, epsilon: float, sensitivity: float) -> np.ndarray:
    logits = epsilon * scores / (2 * sensitivity)
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()


def selection_counts(source: NoiseSource, scores: np.ndarray, epsilon: float, sensitivity: float, n: int) -> np.ndarray:
    return np.bincount([source.exponential_mechanism(scores, epsilon, sensitivity) for _ in range(n)],
                       minlength=scores.size)


def test_exponential_mechanism_matches_softmax() -> None:
    scores = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 5.0])
    n = 12000
    counts = selection_counts(NoiseSource(21), scores, 1.0, 0.5, n)
    expected = n * softmax(scores, 1.0, 0.5)
    assert expected.min() >= 5
    assert stats.chisquare(counts, expected).pvalue > P_FLOOR


def test_exponential_mechanism_privacy_ratio() -> None:
    # Neighbouring score vectors (every score moves by at most the sensitivity 1): the selection probabilities
    # may differ by at most e^epsilon. Exactly for the softmax, and empirically for the sampler: the log of each
    # frequency ratio stays below epsilon + Z standard errors (delta method: se^2 = (1-p)/(n p) + (1-p')/(n p')).
    epsilon, n = 1.0, 12000
    u = np.array([0.0, 2.0, 4.0])
    v = np.array([1.0, 1.0, 3.0])
    p, q = softmax(u, epsilon, 1.0), softmax(v, epsilon, 1.0)
    assert np.all(np.abs(np.log(p / q)) <= epsilon + 1e-12)
    cu = selection_counts(NoiseSource(41), u, epsilon, 1.0, n) / n
    cv = selection_counts(NoiseSource(42), v, epsilon, 1.0, n) / n
    for i in range(3):
        se = math.sqrt((1 - p[i]) / (n * p[i]) + (1 - q[i]) / (n * q[i]))
        assert abs(math.log(cu[i] / cv[i])) <= epsilon + Z * se
        assert abs(math.log(cu[i] / cv[i]) - math.log(p[i] / q[i])) <= Z * se


def test_exponential_mechanism_is_stable_for_extreme_scores() -> None:
    source = NoiseSource(2)
    assert source.exponential_mechanism([1e300, -1e300], 1.0, 1.0) == 0
    assert source.exponential_mechanism([-1e308, 1e308, -1e308], 1.0, 1.0) == 1  # differences overflow to -inf
    assert source.exponential_mechanism([0.0, 1.0, 0.0], 1e3, 1e-3) == 1
    assert source.exponential_mechanism([7.0], 1.0, 1.0) == 0


@pytest.mark.parametrize(
    "scores, epsilon, sensitivity, match",
    [([], 1.0, 1.0, "scores"), ([[1.0, 2.0]], 1.0, 1.0, "scores"), ([1.0, float("nan")], 1.0, 1.0, "scores"),
     ([1.0, float("inf")], 1.0, 1.0, "scores"), ([1.0], 0.0, 1.0, "epsilon"), ([1.0], 1.0, 0.0, "sensitivity"),
     ([1.0], True, 1.0, "epsilon"), ([1.0], 1e308, 1e-308, "epsilon")],
)
def test_exponential_mechanism_validation(scores: object, epsilon: object, sensitivity: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        NoiseSource(1).exponential_mechanism(scores, epsilon, sensitivity)  # type: ignore[arg-type]
