"""How far an estimate lies from the truth in the synthetic experiments of both local families.

The sparse experiments (Wang & Xu, "On sparse linear regression in the local differential privacy model", ICML 2019,
Sec. 7.1) report ``||theta - theta*||_2 / ||theta*||_2``; the Stein GLM experiments (Wang, Hu, Zhang, Gaboardi & Xu,
"Generalized linear models in non-interactive local differential privacy with public data", ALT 2021, Sec. 6) report
its square, in the l2 norm for Gaussian designs and the l-infinity norm for Bernoulli ones.
"""

from __future__ import annotations

import numpy as np

from estimators.base import EstimatorError

#: The norms an error is measured in.
NORMS = {"l2": 2, "linf": np.inf}


def relative_error(estimate: object, truth: object, norm: str = "l2") -> float:
    """``||estimate - truth|| / ||truth||`` in the l2 (``norm="l2"``) or l-infinity (``"linf"``) norm."""
    if norm not in NORMS:
        raise EstimatorError(f"norm must be 'l2' or 'linf', got {norm!r}")
    w = np.asarray(estimate, dtype=float)
    w_star = np.asarray(truth, dtype=float)
    if w.shape != w_star.shape:
        raise EstimatorError(f"the estimate has shape {w.shape}, the truth has shape {w_star.shape}")
    scale = float(np.linalg.norm(w_star, NORMS[norm]))
    if scale == 0.0:
        raise EstimatorError("the true coefficients are zero; the relative error is undefined")
    return float(np.linalg.norm(w - w_star, NORMS[norm])) / scale


def squared_relative_error(estimate: object, truth: object, norm: str = "l2") -> float:
    """``||w - w*||^2 / ||w*||^2``: the square of :func:`relative_error`."""
    return relative_error(estimate, truth, norm) ** 2


def loglog_slope(sizes: object, errors: object) -> float | None:
    """The least-squares slope of ``log(error)`` against ``log(n)`` over the points with a positive finite error
    (``None`` where an error is missing); ``None`` with fewer than two such points at distinct ``n``. An error
    falling like ``1 / n`` has slope -1: the rate of Wang, Hu, Zhang, Gaboardi & Xu, ALT 2021, Theorems 8 and 14
    (the error falls like ``1 / sqrt(n)``, its square like ``1 / n``)."""
    points = [(float(n), float(e)) for n, e in zip(sizes, errors, strict=True)  # type: ignore[call-overload]
              if e is not None and np.isfinite(e) and e > 0 and n > 0]
    if len({n for n, _ in points}) < 2:
        return None
    x, y = np.log(np.array(points)).T
    return float(np.polyfit(x, y, 1)[0])
