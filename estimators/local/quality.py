"""A fit's signal-to-noise verdict (issue 20, section 3): does the noise dominate the estimate?

From the coefficients and their standard errors (:mod:`estimators.local.uncertainty`) alone, so free. Coefficients
are the features' (the intercept a public transform implies is left out); a coefficient with standard error 0 and
value 0 was not selected (a sparse fit, conditional on its support) and is left out too.

* ``z_j = |w_j| / se_j``: coefficient ``j`` is *determined* when ``z_j >= 2`` (its ~95 % interval ``w_j +- 2 se_j``
  excludes 0, so its sign is known). A sparse fit chose its support among all ``p`` features, picking the largest
  (noise included): its kept coefficients are compared with the Bonferroni threshold ``Phi^-1(1 - 0.025 / p)``
  instead (at least 2; 2.50 at ``p = 4``, 3.48 at ``p = 100``), so pure noise is called noise-dominated with
  probability about 95 % whatever ``p`` (Dunn 1961, "Multiple comparisons among means").
* the signal-to-noise ratio ``||w|| / sqrt(sum_j se_j^2)`` (``sqrt(trace Cov)``: the expected norm of the noise).

Verdicts: ``noise-dominated`` when no coefficient is determined (none distinguishable from 0 at 2 standard errors, no
sign known) or the ratio is below 1 (the noise's expected norm exceeds the estimate's); ``weak`` when the ratio is
below 2; ``ok`` otherwise. A mean (``ldp-avg``) has no sign to determine: its verdict compares the width of its ~95 %
interval, ``4 se``, with the width of its feasible range ``[lower, upper]`` (:func:`assess_mean`):
``noise-dominated`` at 1 or more, ``weak`` at 1/4 or more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

#: |w| / se at which a coefficient counts as distinguishable from 0 (two standard errors)
DETERMINED_Z = 2.0
#: ||w|| / sqrt(trace Cov) below which the fit is noise-dominated, and below which it is weak
NOISE_RATIO, WEAK_RATIO = 1.0, 2.0
#: a mean's 4 se / (upper - lower) at or above which it is noise-dominated, and weak
NOISE_WIDTH, WEAK_WIDTH = 1.0, 0.25
INTERCEPT = "(intercept)"


@dataclass(frozen=True)
class Quality:
    """``verdict`` (``ok``, ``weak``, ``noise-dominated`` or ``unknown``), ``reasons`` (sentences) and the numbers
    they rest on: ``signal_to_noise`` and ``determined`` (the coefficients whose sign is known)."""

    verdict: str
    reasons: tuple[str, ...]
    signal_to_noise: float | None = None
    determined: tuple[str, ...] = ()

    @property
    def warns(self) -> bool:
        return self.verdict in ("weak", "noise-dominated")

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reasons": list(self.reasons), "signal_to_noise": self.signal_to_noise,
                "determined": list(self.determined)}


UNKNOWN = Quality("unknown", ("this fit reports no standard errors",))


def threshold(candidates: int, selected: bool) -> float:
    """The ``|w| / se`` a coefficient must reach: 2, or Bonferroni's over ``candidates`` for a selected support."""
    if not selected:
        return DETERMINED_Z
    return max(DETERMINED_Z, NormalDist().inv_cdf(1.0 - 0.025 / max(candidates, 1)))


def assess(coefficients: Mapping[str, float], standard_errors: Mapping[str, float] | None,
           selected: bool = False) -> Quality:
    """The verdict of a regression or classification fit; ``selected``: a sparse fit's support was chosen from the
    data (module docstring)."""
    if standard_errors is None:
        return UNKNOWN
    z = threshold(sum(1 for k in coefficients if k != INTERCEPT), selected)
    names = [k for k in coefficients if k != INTERCEPT and k in standard_errors
             and not (standard_errors[k] == 0.0 and coefficients[k] == 0.0)]
    if not names:
        return Quality("noise-dominated", ("no coefficient was selected: the fit is all zeros",), 0.0)
    noise = math.sqrt(sum(standard_errors[k] ** 2 for k in names))
    signal = math.sqrt(sum(coefficients[k] ** 2 for k in names))
    ratio = math.inf if noise == 0.0 else signal / noise
    determined = tuple(k for k in names
                       if abs(coefficients[k]) >= z * standard_errors[k] and coefficients[k] != 0.0)
    reasons = []
    if not determined:
        reasons.append(f"no coefficient is distinguishable from 0 at {z:.3g} standard errors (no coefficient's sign "
                       "is determined)")
    if ratio < NOISE_RATIO:
        reasons.append(f"||w|| / sqrt(trace Cov) = {ratio:.3g} < {NOISE_RATIO:g}: the noise's expected norm exceeds "
                       "the estimate's")
    if reasons:
        return Quality("noise-dominated", tuple(reasons), _finite(ratio), determined)
    if ratio < WEAK_RATIO:
        return Quality("weak", (f"||w|| / sqrt(trace Cov) = {ratio:.3g} < {WEAK_RATIO:g}; {len(determined)} of "
                                f"{len(names)} coefficients have a determined sign",), _finite(ratio), determined)
    return Quality("ok", (f"||w|| / sqrt(trace Cov) = {_text(ratio)}; {len(determined)} of {len(names)} coefficients "
                          f"have a determined sign",), _finite(ratio), determined)


def assess_mean(name: str, standard_error: float, lower: float, upper: float) -> Quality:
    """The verdict of a mean over ``[lower, upper]`` (module docstring)."""
    width = 4.0 * standard_error / (upper - lower)
    text = f"the ~95 % interval (4 se = {4.0 * standard_error:.3g}) spans {width:.3g} of [lower, upper]"
    verdict = "noise-dominated" if width >= NOISE_WIDTH else "weak" if width >= WEAK_WIDTH else "ok"
    ratio = (upper - lower) / (4.0 * standard_error) if standard_error > 0 else None
    return Quality(verdict, (text,), ratio, (name,) if verdict != "noise-dominated" else ())


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _text(value: float) -> str:
    return "inf (no noise)" if math.isinf(value) else f"{value:.3g}"
