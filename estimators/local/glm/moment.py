"""Public-moment GLMs from ``glm`` reports (issue 20): one unbiased mean of ``R(s(y) z(x))``, one convex problem
over the public rows per link, standard errors by the delta method.

Each participant sent ``R(u)``, ``u = s(y) z(x)`` (:mod:`workloads.local.protocols.glm`: ``z`` a unit vector of public
constants, ``s`` an affine score ``s(y) = c_1 y + c_0`` of her label: ``y - 1/2`` binary, ``y / B`` bounded). With
``E[R(u)] = u`` the mean report ``T_hat`` is unbiased for ``T = E[s(y) z(x)]``. Under the model
``E[y | x] = g(<x~, w>)`` (``x~ = (1, x)``, so ``w_0`` is the intercept), ``E[s(y) | x] = c_1 g(eta) + c_0``, and
with the expectation over ``x`` taken over the public rows ``x_1 .. x_m`` (the same population, unlabeled)

    ``(1/m) sum_j z_j g(eta_j) = b``,   ``b = (T - c_0 zbar) / c_1``,   ``zbar = (1/m) sum_j z_j``.

Binary labels: ``c_1 = 1``, ``c_0 = -1/2``, so ``b = T + zbar / 2`` for every link (logistic, probit, linear,
poisson); bounded labels: ``c_1 = 1 / B``, ``c_0 = 0``, ``b = B T`` (exact when no label exceeds ``B``; a clipped
label biases ``T`` towards 0).

**The equation is the gradient of a convex function.** ``z_j = A x~_j / r_j`` with ``A = [[1, 0], [-W mu, W]]``
(invertible) and ``r_j = ||A x~_j||``, so ``(1/m) sum_j z_j g(eta_j) = A grad F_0(w)`` for
``F_0(w) = (1/m) sum_j G(<x~_j, w>) / r_j`` with ``G' = g`` (``log(1 + e^t)`` logistic, ``t Phi(t) + phi(t)`` probit,
``t^2 / 2`` linear, ``e^t`` poisson), and the equation is ``grad F(w) = 0`` for

    ``F(w) = F_0(w) - <w, A^{-1} b>``,  ``hess F(w) = (1/m) sum_j g'(eta_j) x~_j x~_j^T / r_j``  (PSD: ``g' > 0``).

Its minimiser is the estimate; it exists (and is unique when the public ``x~_j`` span) exactly when ``A^{-1} b`` is a
value the gradient of ``F_0`` attains, i.e. ``b`` lies in the interior of the set of moments the link can produce over
the public rows (for a binary link, a zonotope): for a ``b`` outside it :func:`solve_moment_equation` says there is no
solution rather than returning a point on the way to infinity. A noisy ``b_hat`` often lies outside (on real tables
the noiseless moment itself sits on the boundary when a subgroup's label is certain, e.g. children in ACSemployment),
so :class:`PublicMomentGLM` first projects it onto the attainable set with its means kept ``tau = 1e-3`` inside their
range (:func:`attainable_moment`; a projection onto a closed convex set holding the truth never moves an estimate
farther from it) and reports how far it moved (``projection_``). The minimiser is found by scipy's trust-region
method with the exact gradient and Hessian (``trust-exact``), L-BFGS-B from where it stopped as the fallback, and the
residual of the moment equation is checked either way.

**Standard errors (delta method).** ``w_hat - w = J^{-1} (b_hat - b) + o_p`` with ``J = (1/m) sum_j z_j g'(eta_j)
x~_j^T`` the Jacobian of the public moment map, so ``Cov(w_hat) = J^{-1} (Cov(T_hat) / c_1^2 + Cov_pub / m) J^{-T}``:
``Cov(T_hat) = Cov(R(u)) / n`` from the randomizer's known covariance
(:data:`workloads.local.protocols.glm.GLM_RANDOMIZERS`: exact for the l2-ball randomizer, ``(B^2 / d) I - T T^T``;
for the Gaussian ``E[u u^T]`` is ``zz^T / 4`` averaged over the public rows for binary labels, exact, and for bounded
ones ``E[s^2]`` (from the reports' mean squared norm less the noise's) times that average, an approximation), and
``Cov_pub`` the public rows' sample covariance of ``z_j g(eta_j)`` (the public table is a sample too).

**Whether the labels depend on the features at all** (``dependence_``) is tested on the estimated moment itself,
before any projection or linearisation (:mod:`estimators.local.glm.dependence`): where the link saturates, the delta
method's standard errors explode and say nothing of the fit's predictions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.special import expit

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.dependence import dependence_test
from estimators.local.planning import ErrorModel
from workloads import links
from workloads.links import IDENTITY, Link, normal_density
from workloads.local.protocols.glm import GlmSpec, directions, get_randomizer, label_scores, public_feature_map

#: the largest relative residual ``||m(w) - b|| / max(||b||, ||zbar||)`` an answer may leave
RESIDUAL_TOLERANCE = 1e-6
#: how far inside its range a link's means stay when an unattainable moment is projected (:func:`attainable_moment`)
PROJECTION_MARGIN = 1e-3


@dataclass(frozen=True)
class MomentLink(Link):
    """A link for the moment equation: the project's :class:`workloads.links.Link` of its name (its mean ``g``, the
    closed range ``[low, high]`` of ``g``, ``binary``), extended by its cumulant ``G`` (``G' = g``) and slope ``g'``
    (all increasing ``g``)."""

    cumulant: Callable[[np.ndarray], np.ndarray]
    slope: Callable[[np.ndarray], np.ndarray]

    @classmethod
    def extending(cls, base: Link, cumulant: Callable[[np.ndarray], np.ndarray],
                  slope: Callable[[np.ndarray], np.ndarray]) -> MomentLink:
        return cls(**base.base_fields(), cumulant=cumulant, slope=slope)


_PROBIT, _POISSON = links.LINKS.get("probit"), links.LINKS.get("poisson")

MOMENT_LINKS: dict[str, MomentLink] = {
    link.name: link for link in (
        MomentLink.extending(links.LINKS.get("logistic"), lambda t: np.logaddexp(0.0, t),
                             lambda t: expit(t) * expit(-t)),
        MomentLink.extending(_PROBIT, lambda t: t * _PROBIT.mean(t) + normal_density(t), normal_density),
        MomentLink.extending(IDENTITY, lambda t: 0.5 * np.square(t), lambda t: np.ones_like(t, dtype=float)),
        # G = G' = G'' = e^t, its score clipped inside exp (workloads.links.poisson_mean) so that no value
        # overflows while the solver searches
        MomentLink.extending(_POISSON, _POISSON.mean, _POISSON.mean),
    )
}


def get_moment_link(link: str) -> MomentLink:
    if link not in MOMENT_LINKS:
        raise EstimatorError(f"unknown link {link!r} for the public-moment GLM (known: {list(MOMENT_LINKS)})")
    return MOMENT_LINKS[link]


def label_affine(labels: str, label_bound: float = 1.0) -> tuple[float, float]:
    """``(c_1, c_0)`` with ``s(y) = c_1 y + c_0``: ``(1, -1/2)`` binary, ``(1 / B, 0)`` bounded."""
    if labels == "binary":
        return 1.0, -0.5
    if labels == "bounded":
        return 1.0 / label_bound, 0.0
    raise EstimatorError(f"labels must be 'binary' or 'bounded', got {labels!r}")


@dataclass(frozen=True)
class PublicDesign:
    """The public rows as the moment equation sees them: ``x~_j = (1, x_j)``, ``z_j`` and ``r_j``, and ``A``."""

    tilde: np.ndarray  # (m, d)
    z: np.ndarray  # (m, d)
    norms: np.ndarray  # (m,)
    transform: np.ndarray  # A, (d, d)

    @classmethod
    def build(cls, public_rows: object, center: object, matrix: object) -> PublicDesign:
        rows = np.asarray(public_rows, dtype=float)
        mu, w = np.asarray(center, dtype=float), np.asarray(matrix, dtype=float)
        if rows.ndim != 2 or rows.shape[1] != mu.size or rows.shape[0] < 2 or not np.all(np.isfinite(rows)):
            raise EstimatorError(f"public rows must be a finite matrix of at least 2 rows of {mu.size} features, got "
                                 f"shape {rows.shape}")
        tilde = np.column_stack([np.ones(rows.shape[0]), rows])
        transform = np.zeros((mu.size + 1, mu.size + 1))
        transform[0, 0] = 1.0
        transform[1:, 0] = -w @ mu
        transform[1:, 1:] = w
        a = tilde @ transform.T
        norms = np.linalg.norm(a, axis=1)
        z = directions(rows, mu, w)
        return cls(tilde, z, norms, transform)

    @classmethod
    def for_spec(cls, spec: GlmSpec, public_rows: object) -> PublicDesign:
        return cls.build(public_rows, spec.center, spec.matrix)

    @property
    def mean_direction(self) -> np.ndarray:
        return self.z.mean(axis=0)

    @property
    def direction_covariance(self) -> np.ndarray:
        """The public rows' sample covariance of ``z`` (the public mean ``zbar``'s own noise, times m)."""
        return np.atleast_2d(np.cov(self.z, rowvar=False, bias=True))

    def moments(self, link: MomentLink, w: np.ndarray) -> np.ndarray:
        """``(1/m) sum_j z_j g(eta_j)``."""
        return self.z.T @ link.mean(self.tilde @ w) / self.z.shape[0]

    def jacobian(self, link: MomentLink, w: np.ndarray) -> np.ndarray:
        """``J = (1/m) sum_j z_j g'(eta_j) x~_j^T``."""
        return (self.z * link.slope(self.tilde @ w)[:, np.newaxis]).T @ self.tilde / self.z.shape[0]

    def moment_covariance(self, link: MomentLink, w: np.ndarray) -> np.ndarray:
        """The sample covariance of ``z_j g(eta_j)`` over the public rows (the public mean's own noise, times m)."""
        values = self.z * link.mean(self.tilde @ w)[:, np.newaxis]
        return np.atleast_2d(np.cov(values, rowvar=False, bias=True))


def moment_target(design: PublicDesign, target: object, labels: str, label_bound: float = 1.0) -> np.ndarray:
    """``b = (T - c_0 zbar) / c_1`` (module docstring)."""
    c1, c0 = label_affine(labels, label_bound)
    return (np.asarray(target, dtype=float) - c0 * design.mean_direction) / c1


def solve_moment_equation(design: PublicDesign, link: str, target: object) -> np.ndarray:
    """The ``w`` (intercept first) with ``(1/m) sum_j z_j g(<x~_j, w>) = target``: the minimiser of the convex ``F``
    of the module docstring, or :class:`EstimatorError` when the equation has no solution."""
    chosen = get_moment_link(link)
    b = np.asarray(target, dtype=float)
    if b.shape != (design.tilde.shape[1],) or not np.all(np.isfinite(b)):
        raise EstimatorError(f"the moment target must be {design.tilde.shape[1]} finite numbers, got {b.shape}")
    linear = np.linalg.solve(design.transform, b)
    weights = 1.0 / (design.norms * design.tilde.shape[0])

    def objective(w: np.ndarray) -> float:
        return float(weights @ chosen.cumulant(design.tilde @ w) - linear @ w)

    def gradient(w: np.ndarray) -> np.ndarray:
        return design.tilde.T @ (weights * chosen.mean(design.tilde @ w)) - linear

    def hessian(w: np.ndarray) -> np.ndarray:
        return (design.tilde * (weights * chosen.slope(design.tilde @ w))[:, np.newaxis]).T @ design.tilde

    scale = max(float(np.linalg.norm(b)), float(np.linalg.norm(design.mean_direction)), 1e-12)
    start = np.zeros(design.tilde.shape[1])
    w = _minimise(objective, start, jac=gradient, hess=hessian, method="trust-exact",
                  options={"gtol": 1e-12 * scale, "maxiter": 200})
    if not _solved(design, chosen, w, b, scale):
        w = _minimise(objective, w if w is not None and np.all(np.isfinite(w)) else start, jac=gradient,
                      method="L-BFGS-B", options={"gtol": 1e-13 * scale, "maxiter": 2000})
    if not _solved(design, chosen, w, b, scale):
        raise EstimatorError(
            f"the {link} moment equation has no solution: the estimated moment lies outside (or on the edge of) the "
            f"set of moments the {link} link can produce over the public rows (the reports' noise dominates: more "
            "participants, a larger epsilon, or another link)")
    return w


def attainable_moment(design: PublicDesign, link: str, target: object) -> tuple[np.ndarray, float]:
    """``(b', ||b' - b||)``: ``b`` itself when it lies in ``C = {(1/m) sum_j z_j mu_j : mu_j in [low + tau,
    high - tau]}`` (the moments the link produces over the public rows, its means kept :data:`PROJECTION_MARGIN` inside
    their range), else its Euclidean projection onto ``C`` (bounded least squares, scipy's BVLS). ``C`` is closed and
    convex and holds the noiseless moment (up to the margin and the public sample), so the projection never moves the
    estimate farther from it (Bauschke & Combettes 2017, Prop. 4.16); every point of ``C`` has a solution."""
    chosen = get_moment_link(link)
    b = np.asarray(target, dtype=float)
    if chosen.low is None and chosen.high is None:
        return b, 0.0
    low = -np.inf if chosen.low is None else chosen.low + PROJECTION_MARGIN
    high = np.inf if chosen.high is None else chosen.high - PROJECTION_MARGIN
    matrix = design.z.T / design.z.shape[0]
    means = optimize.lsq_linear(matrix, b, bounds=(low, high), method="bvls").x
    projected = matrix @ means
    moved = float(np.linalg.norm(projected - b))
    scale = max(float(np.linalg.norm(b)), float(np.linalg.norm(design.mean_direction)), 1e-12)
    return (b, 0.0) if moved <= RESIDUAL_TOLERANCE * scale / 10 else (projected, moved)


def _minimise(objective: Callable[[np.ndarray], float], start: np.ndarray, **how: object) -> np.ndarray | None:
    """scipy's minimiser from ``start``; ``None`` when it breaks down (a diverging objective: no minimiser)."""
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            return optimize.minimize(objective, start, **how).x  # type: ignore[call-overload]
        except (ValueError, np.linalg.LinAlgError):  # scipy refuses the non-finite values of a diverging run
            return None


def _solved(design: PublicDesign, link: MomentLink, w: np.ndarray | None, b: np.ndarray, scale: float) -> bool:
    if w is None or not np.all(np.isfinite(w)):
        return False
    residual = float(np.linalg.norm(design.moments(link, w) - b))
    return residual <= RESIDUAL_TOLERANCE * scale


def moment_covariance(design: PublicDesign, link: str, w: object, report_covariance: np.ndarray, n: int,
                      labels: str, label_bound: float = 1.0) -> np.ndarray:
    """``Cov(w_hat) = J^{-1} (Cov(R) / (n c_1^2) + Cov_pub / m) J^{-T}`` (module docstring)."""
    return _at(_covariance_terms(design, link, w, report_covariance, labels, label_bound), n)


#: ``(J^{-1}, Cov(R) / c_1^2, Cov_pub / m)``: what :func:`moment_covariance` combines for any ``n``
CovarianceTerms = tuple[np.ndarray, np.ndarray, np.ndarray]


def _covariance_terms(design: PublicDesign, link: str, w: object, report_covariance: np.ndarray, labels: str,
                      label_bound: float) -> CovarianceTerms:
    chosen = get_moment_link(link)
    coef = np.asarray(w, dtype=float)
    c1, _ = label_affine(labels, label_bound)
    try:
        inverse = np.linalg.inv(design.jacobian(chosen, coef))
    except np.linalg.LinAlgError:
        raise EstimatorError(f"the {chosen.name} moment equation's Jacobian is singular at this model over the public "
                             "rows (features constant or collinear there, or every linear predictor saturating the "
                             "link): no standard errors or plan can be derived") from None
    return inverse, report_covariance / c1**2, design.moment_covariance(chosen, coef) / design.tilde.shape[0]


def _at(terms: CovarianceTerms, n: int) -> np.ndarray:
    inverse, report, public = terms
    covariance = inverse @ (report / n + public) @ inverse.T
    return (covariance + covariance.T) / 2.0


def input_second_moment(design: PublicDesign, labels: str, score_square: float | None = None) -> np.ndarray:
    """``E[u u^T] = E[s^2 z z^T]``: ``(1/4) mean_j z_j z_j^T`` for binary labels (``s^2 = 1/4`` always); for bounded
    ones ``score_square`` (an estimate of ``E[s^2]``; ``None``: its bound 1) times ``mean_j z_j z_j^T``."""
    second = design.z.T @ design.z / design.z.shape[0]
    if labels == "binary":
        return 0.25 * second
    return (1.0 if score_square is None else float(np.clip(score_square, 0.0, 1.0))) * second


class PublicMomentGLM:
    """A ``glm`` campaign's fit for one link: ``coef_`` (``p``), ``intercept_``, ``covariance_`` (intercept first,
    ``(p + 1, p + 1)``) and ``standard_errors_`` (intercept first), in the campaign's transformed feature units;
    ``projection_``: how far the estimated moment was moved onto the attainable set (0: not at all);
    ``dependence_``: the test of labels independent of the features (:mod:`estimators.local.glm.dependence`)."""

    def __init__(self, link: str) -> None:
        self.link = get_moment_link(link).name

    def fit(self, aggregate: ReportAggregate, spec: GlmSpec, public_rows: object) -> PublicMomentGLM:
        if not isinstance(spec, GlmSpec):
            raise EstimatorError(f"spec must be a GlmSpec, got {type(spec).__name__}")
        if aggregate.count == 0:
            raise EstimatorError("the aggregate holds no reports yet")
        design = PublicDesign.for_spec(spec, public_rows)
        target = aggregate.mean("u")
        estimated = moment_target(design, target, spec.labels, spec.label_bound)
        moment, self.projection_ = attainable_moment(design, self.link, estimated)
        w = solve_moment_equation(design, self.link, moment)
        randomizer = spec.ball_randomizer()
        score_square = None
        if spec.labels == "bounded":  # E||R||^2 = E[s^2] + the trace of the randomizer's covariance at u = 0
            d = spec.report_dimension
            empty = randomizer.covariance(np.zeros((d, d)), np.zeros(d), spec.radius, spec.epsilon, spec.delta)
            score_square = float(aggregate.second_moment("u").sum() - np.trace(empty))
        report = randomizer.covariance(input_second_moment(design, spec.labels, score_square), target, spec.radius,
                                       spec.epsilon, spec.delta)
        self.target_ = target
        self.w_ = w
        self.coef_, self.intercept_ = w[1:], float(w[0])
        self.covariance_ = moment_covariance(design, self.link, w, report, aggregate.count, spec.labels,
                                             spec.label_bound)
        self.standard_errors_ = np.sqrt(np.clip(np.diag(self.covariance_), 0.0, None))
        self.dependence_ = dependence_test(estimated, design.mean_direction, design.direction_covariance,
                                           design.z.shape[0], report, aggregate.count,
                                           label_affine(spec.labels, spec.label_bound))
        return self


def expected_covariance(public_rows: object, link: str, w: object, n: int, epsilon: float,
                        randomizer: str = "l2ball", *, delta: float = 0.0, labels: str = "binary",
                        label_bound: float = 1.0, whiten: bool = False) -> np.ndarray:
    """The asymptotic ``Cov(w_hat)`` (intercept first) of a ``glm`` campaign of ``n`` participants before any report:
    the model ``w`` (``(intercept, coef)`` in the units of ``public_rows``) gives ``T`` over the public rows, the
    randomizer its report covariance, and :func:`moment_covariance` the rest. For bounded labels ``E[s^2]`` is taken
    at its bound 1 (an upper bound on the noise of the report's input part)."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise EstimatorError(f"n must be a positive integer, got {n!r}")
    center, matrix = public_feature_map(public_rows, whiten)
    design = PublicDesign.build(public_rows, center, matrix)
    return _at(_expected_terms(design, link, w, epsilon, randomizer, delta, labels, label_bound), int(n))


def _expected_terms(design: PublicDesign, link: str, w: object, epsilon: float, randomizer: str, delta: float,
                    labels: str, label_bound: float) -> CovarianceTerms:
    """:func:`expected_covariance`'s terms, independent of ``n`` (a planner computes them once)."""
    chosen = get_moment_link(link)
    coef = np.asarray(w, dtype=float)
    if coef.shape != (design.tilde.shape[1],):
        raise EstimatorError(f"w must hold the intercept and {design.tilde.shape[1] - 1} coefficients, got "
                             f"{coef.shape}")
    c1, c0 = label_affine(labels, label_bound)
    target = c1 * design.moments(chosen, coef) + c0 * design.mean_direction
    radius = 0.5 if labels == "binary" else 1.0
    report = get_randomizer(randomizer).covariance(input_second_moment(design, labels), target, radius, epsilon,
                                                   delta)
    return _covariance_terms(design, link, coef, report, labels, label_bound)


def moment_error_model(spec: GlmSpec, public_rows: object, public_labels: object = None) -> ErrorModel:
    """The ``glm`` campaign's error model before any report (``campaign plan``): the slopes' covariance at ``n`` from
    :func:`expected_covariance`'s terms over the campaign's own public map (the randomizer's report covariance and
    the public table's own sampling noise, through the moment equation's Jacobian), for the campaign's first link
    (logistic for 0/1 labels, linear for bounded ones). The reference is the noiseless root of the moment equation
    with ``T`` from the public table's own labels when it holds the target (``None`` otherwise, when the Jacobian is
    taken at the null model: only the absolute error is predicted)."""
    rows = np.asarray(public_rows, dtype=float)
    link = "logistic" if spec.labels == "binary" else "linear"
    design = PublicDesign.for_spec(spec, rows)
    notes = [f"the {link} link; the participants' features are distributed like the public rows",
             "the error of the slopes, in the features' units after the campaign's public transform; the "
             "intercept is estimated too (its error is not counted here)"]
    if public_labels is None:
        w = np.zeros(design.tilde.shape[1])
        reference, source = None, "none: the public table does not hold the target"
        notes.append("without the target the Jacobian is taken at the null model (all coefficients 0)")
    else:
        y = np.asarray(public_labels, dtype=float)
        target = design.z.T @ label_scores(y, spec.labels, spec.label_bound) / rows.shape[0]
        w = solve_moment_equation(design, link, moment_target(design, target, spec.labels, spec.label_bound))
        reference, source = w[1:], "the moment equation's root on the public table's own labels (no noise)"
    # the campaign's own public map (design), and every term but n, once: the planner asks many n
    terms = _expected_terms(design, link, w, spec.epsilon, spec.randomizer, spec.delta, spec.labels, spec.label_bound)

    def covariance(n: int) -> np.ndarray:
        return _at(terms, int(n))[1:, 1:]

    metric = "the slopes of the moment-equation fit on the devices' (public-transformed) features"
    return ErrorModel(covariance, reference, source, metric, notes=tuple(notes))
