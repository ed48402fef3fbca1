"""Iterative hard thresholding for sparse linear regression under local DP: LDP-IHT and Label-LDP-IHT.

Source: Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019). Both solve

    min_theta (1 / 2n) sum_i (<x_i, theta> - y_i)^2   s.t.  ||theta||_2 <= R,  ||theta||_0 <= s       (eq. 5)

by projected gradient steps (Blumensath & Davies 2009): a gradient step, ``Trunc`` (keep the ``s`` entries largest
in magnitude, zero the rest) and the projection onto the l2 ball of radius ``R`` (:func:`iht_step`; the paper's
``R = 1``).

* **LDP-IHT (Alg. 1)**, sequentially interactive: the participants are split into ``T`` disjoint groups
  (:func:`round_groups`, Alg. 1 step 1); round ``t`` publishes ``theta_{t-1}``, each member of group ``t`` returns
  her gradient through the l2-ball randomizer (:func:`workloads.local.randomizers.iht_gradient.ldp_iht_report`), and
  the server averages the reports and takes one step. :func:`run_ldp_iht` drives the rounds through a callable that
  collects one round's mean report, so the service can run the rounds and a simulator can play them
  (:class:`SimulatedIHTParticipants`). Each participant reports once: eps-LDP for each (Thm. 4).
* **Label-LDP-IHT (Alg. 2)**: the features are public, each label arrives once through the Gaussian label
  randomizer (:mod:`workloads.local.randomizers.gaussian_label`), and the server runs ``T`` full-gradient IHT steps
  on the noisy labels (:func:`label_iht`): post-processing of the reports.

Departures from the printed algorithms. Alg. 2, step 5 prints ``theta_t - eta (1/n) sum_i (tilde y_i - <x_i,
theta_t>) x_i``, a step *up* the gradient of eq. 5; we step down, ``theta_t - eta (1/n) X^T (X theta_t - tilde
y)``, as Alg. 1 and the analysis do. Alg. 1 and 2 start from ``theta_0 = 0`` and take ``s = 8 s*``; Sec. 7 uses
``s = s*`` and a random initial point. Both are settings here (``sparsity``, ``theta0``; default ``theta0 = 0``).
Ties in ``Trunc`` go to the lower index, so a run is deterministic given its reports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from estimators.base import (
    EstimatorError,
    LinearRegressor,
    as_matrix,
    check_count,
    check_generator,
    check_positive,
    check_sparsity,
    check_vector,
    feature_names_for,
)
from workloads.local.randomizers.iht_gradient import ldp_iht_report

#: ``collect_round(t, theta_prev)`` returns the mean of round ``t``'s reports, a vector of the model's dimension.
RoundCollector = Callable[[int, np.ndarray], np.ndarray]


def hard_threshold(vector: np.ndarray, sparsity: int) -> np.ndarray:
    """``Trunc(v, s)``: keep the ``s`` entries of largest magnitude (ties to the lower index), zero the others."""
    values = np.asarray(vector, dtype=float)
    keep = np.argsort(-np.abs(values), kind="stable")[:sparsity]
    out = np.zeros_like(values)
    out[keep] = values[keep]
    return out


def project_to_ball(vector: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection onto ``{theta : ||theta||_2 <= radius}``."""
    norm = float(np.linalg.norm(vector))
    return vector if norm <= radius else vector * (radius / norm)


def iht_step(theta_prev: object, mean_gradient_report: object, eta: float, s: int, radius: float = 1.0) -> np.ndarray:
    """One step of Alg. 1 (steps 5-7): ``Proj_{B_R}(Trunc(theta_prev - eta g, s))``."""
    theta = np.asarray(theta_prev, dtype=float)
    if theta.ndim != 1 or not np.all(np.isfinite(theta)):
        raise EstimatorError(f"theta_prev must be a finite vector, got shape {theta.shape}")
    gradient = check_vector("mean_gradient_report", mean_gradient_report, theta.size)
    step = check_positive("eta", eta)
    sparsity = check_sparsity(s, theta.size)
    return project_to_ball(hard_threshold(theta - step * gradient, sparsity), check_positive("radius", radius))


def round_groups(n: int, rounds: int) -> list[range]:
    """Alg. 1 step 1: ``S_t = {(t-1) floor(n/T), ..., t floor(n/T) - 1}``, the last group also takes the remainder."""
    count = check_count("n", n)
    t_max = check_count("rounds", rounds)
    if t_max > count:
        raise EstimatorError(f"rounds must be at most the number of participants n={count}, got {rounds!r}")
    size = count // t_max
    return [range((t - 1) * size, count if t == t_max else t * size) for t in range(1, t_max + 1)]


@dataclass(frozen=True)
class IHTRun:
    """The final iterate and every iterate ``theta_0, ..., theta_T`` of a run."""

    theta: np.ndarray
    history: tuple[np.ndarray, ...]


def _check_iht_settings(
    n_features: object, sparsity: object, steps: object, eta: object, radius: object, theta0: object
) -> tuple[int, int, int, float, float, np.ndarray]:
    p = check_count("n_features", n_features)
    s = check_sparsity(sparsity, p)
    t_max = check_count("rounds", steps)
    step = check_positive("eta", eta)
    r = check_positive("radius", radius)
    start = np.zeros(p) if theta0 is None else check_vector("theta0", theta0, p)
    return p, s, t_max, step, r, start


def run_ldp_iht(
    collect_round: RoundCollector,
    n_features: int,
    sparsity: int,
    rounds: int,
    eta: float,
    radius: float = 1.0,
    theta0: object = None,
) -> IHTRun:
    """Alg. 1: for ``t = 1..T`` publish ``theta_{t-1}``, collect round ``t``'s mean report, take :func:`iht_step`.

    Every setting is checked before the first round is collected. A mean report of the wrong shape or with a
    non-finite entry stops the run with an error naming the round.
    """
    p, s, t_max, step, r, theta = _check_iht_settings(n_features, sparsity, rounds, eta, radius, theta0)
    if not callable(collect_round):
        raise EstimatorError("collect_round must be callable as collect_round(t, theta_prev)")
    history = [theta.copy()]
    for t in range(1, t_max + 1):
        report = np.asarray(collect_round(t, theta.copy()), dtype=float)
        if report.shape != (p,) or not np.all(np.isfinite(report)):
            raise EstimatorError(f"round {t}: the mean report must be a finite vector of {p} entries")
        theta = project_to_ball(hard_threshold(theta - step * report, s), r)
        history.append(theta.copy())
    return IHTRun(theta=theta, history=tuple(history))


class SimulatedIHTParticipants:
    """Plays the participants of LDP-IHT in-process (simulations and benchmarks, never the service).

    Row ``i`` of ``(X, y)`` is participant ``i``; group ``t`` is :func:`round_groups` ``(n, rounds)[t - 1]``. Called
    as ``collect_round(t, theta_prev)``, it runs every member's randomizer once with ``rng`` and returns the mean of
    the reports. ``residual_bound`` and ``feature_norm_bound`` are the round's public clipping parameters
    (:mod:`workloads.local.randomizers.iht_gradient`).
    """

    def __init__(
        self,
        X: object,
        y: object,
        rounds: int,
        epsilon: float,
        residual_bound: float,
        feature_norm_bound: float,
        rng: np.random.Generator,
    ) -> None:
        self.X = as_matrix("X", X)
        self.y = check_vector("y", y, self.X.shape[0])
        self.groups = round_groups(self.X.shape[0], rounds)
        self.epsilon = check_positive("epsilon", epsilon)
        self.residual_bound = check_positive("residual_bound", residual_bound)
        self.feature_norm_bound = check_positive("feature_norm_bound", feature_norm_bound)
        self.rng = check_generator(rng)
        self.collected: list[int] = []

    def __call__(self, t: int, theta_prev: np.ndarray) -> np.ndarray:
        if not 1 <= t <= len(self.groups) or t in self.collected:
            raise EstimatorError(f"round {t} is not a round left to collect (rounds 1..{len(self.groups)}, each once)")
        self.collected.append(t)
        members = self.groups[t - 1]
        reports = ldp_iht_report(
            theta_prev,
            self.X[members.start : members.stop],
            self.y[members.start : members.stop],
            self.residual_bound,
            self.feature_norm_bound,
            self.epsilon,
            self.rng,
        )
        return np.atleast_2d(reports).mean(axis=0)


def label_iht(
    X: object,
    noisy_labels: object,
    sparsity: int,
    iterations: int,
    eta: float,
    radius: float = 1.0,
    theta0: object = None,
) -> IHTRun:
    """Alg. 2, steps 4-8: ``T`` IHT steps with the full gradient ``(1/n) X^T (X theta - tilde y)`` (public ``X``)."""
    design = as_matrix("X", X)
    n, p = design.shape
    labels = check_vector("noisy_labels", noisy_labels, n)
    return label_iht_from_moments(design.T @ design / n, design.T @ labels / n, sparsity, iterations, eta, radius,
                                  theta0)


def label_iht_from_moments(
    gram: object,
    moment: object,
    sparsity: int,
    iterations: int,
    eta: float,
    radius: float = 1.0,
    theta0: object = None,
) -> IHTRun:
    """:func:`label_iht` from the moments ``G = X^T X / n`` and ``b = X^T tilde y / n``: the gradient is
    ``G theta - b``. The collections service calls it with ``G`` from the public table and ``b`` from the reports'
    running sum (the label reports are ``x_i tilde y_i``), so no report is re-read."""
    second = np.asarray(gram, dtype=float)
    if second.ndim != 2 or second.shape[0] != second.shape[1] or not np.all(np.isfinite(second)):
        raise EstimatorError(f"gram must be a finite square matrix, got shape {second.shape}")
    b = check_vector("moment", moment, second.shape[0])
    p, s, t_max, step, r, theta = _check_iht_settings(second.shape[0], sparsity, iterations, eta, radius, theta0)
    history = [theta.copy()]
    for _ in range(t_max):
        theta = project_to_ball(hard_threshold(theta - step * (second @ theta - b), s), r)
        history.append(theta.copy())
    return IHTRun(theta=theta, history=tuple(history))


class LDPIHTRegression(LinearRegressor):
    """LDP-IHT (Alg. 1) as an estimator: ``fit(collect_round, n_features)`` runs the rounds; no intercept.

    ``rounds`` is ``T`` (the paper: ``T = O(log n)``), ``eta`` the step, ``sparsity`` the ``s`` kept by ``Trunc``,
    ``radius`` the ball of eq. 5, ``theta0`` a public starting point (default 0). Fitted: ``coef_``,
    ``history_`` (``theta_0 .. theta_T``).
    """

    def __init__(self, sparsity: int, rounds: int, eta: float, radius: float = 1.0, theta0: object = None) -> None:
        self.sparsity = sparsity
        self.rounds = rounds
        self.eta = eta
        self.radius = radius
        self.theta0 = theta0

    def fit(self, collect_round: RoundCollector, n_features: int, feature_names: object = None) -> LDPIHTRegression:
        names = feature_names_for(feature_names, check_count("n_features", n_features))
        run = run_ldp_iht(collect_round, n_features, self.sparsity, self.rounds, self.eta, self.radius, self.theta0)
        self.history_ = run.history
        self._store(run.theta, names, intercept=False)
        return self


class LabelLDPIHTRegression(LinearRegressor):
    """Label-LDP-IHT (Alg. 2) as an estimator: ``fit(X, noisy_y)`` on the public features and the label reports."""

    def __init__(self, sparsity: int, iterations: int, eta: float, radius: float = 1.0, theta0: object = None) -> None:
        self.sparsity = sparsity
        self.iterations = iterations
        self.eta = eta
        self.radius = radius
        self.theta0 = theta0

    def fit(self, X: object, noisy_y: object, feature_names: object = None) -> LabelLDPIHTRegression:
        design = as_matrix("X", X)
        names = feature_names_for(feature_names, design.shape[1])
        run = label_iht(design, noisy_y, self.sparsity, self.iterations, self.eta, self.radius, self.theta0)
        self.history_ = run.history
        self._store(run.theta, names, intercept=False)
        return self
