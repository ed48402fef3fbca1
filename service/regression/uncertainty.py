"""The error bars of a fitted regression's coefficients, as every method's answer carries them (issue 29).

One shape for every method (DD-SSP, AIM-Synth, AdaSSP, ObjPert, DP-IHT), so that the API, the command line and the
client read them the same way: :class:`CoefficientErrors`, whose :meth:`~CoefficientErrors.to_json` gives a fit's
answer its fields

* ``standard_errors``: ``{coefficient: standard error}`` (the names of ``coefficients``, on the encoded scale), or
  null;
* ``confidence_intervals``: ``{coefficient: [low, high]}``, the normal interval ``coefficient +- z se`` at
  ``confidence_level`` (0.95), or null;
* ``error_basis``: how they were computed, in words (``none`` when there are none);
* ``error_components``: the parts of each variance, where the method separates them (``noise``: the privacy noise's,
  from the public noise scales; ``sampling``: the rows' own sampling variance, estimated from the released
  statistics), or null.

An answer function (:mod:`service.regression.answering`) hands them to the fit in its details under
:data:`ERRORS_DETAIL`; :func:`take_errors` takes them out again (the details stay what they were), and
``FitOutcome.to_json`` spreads :meth:`CoefficientErrors.to_json` into the answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

#: The confidence level of every interval a fit answers with.
CONFIDENCE_LEVEL = 0.95
#: The key of an answer function's details under which it hands over its :class:`CoefficientErrors`.
ERRORS_DETAIL = "coefficient_errors"


@dataclass(frozen=True)
class CoefficientErrors:
    """Standard errors by coefficient name (None: none), how they were computed, and their variance's parts."""

    standard_errors: Mapping[str, float] | None
    basis: str
    components: Mapping[str, Mapping[str, float]] | None = None

    @classmethod
    def none(cls, reason: str = "none") -> CoefficientErrors:
        return cls(None, reason)

    @classmethod
    def from_variances(cls, names: Sequence[str], parts: Mapping[str, np.ndarray], basis: str) -> CoefficientErrors:
        """From the per-coefficient variances of each part (``noise``, ``sampling``: summed, as independent)."""
        total = sum(np.asarray(v, dtype=float) for v in parts.values())
        root = {part: _named(names, np.sqrt(np.maximum(v, 0.0))) for part, v in parts.items()}
        return cls(_named(names, np.sqrt(np.maximum(total, 0.0))), basis, root)

    def scaled(self, factor: float, note: str) -> CoefficientErrors:
        """The errors of ``factor`` times the coefficients (``factor`` held fixed), the basis extended by ``note``."""
        if self.standard_errors is None:
            return self
        size = abs(float(factor))
        components = None if self.components is None else {
            part: {k: size * v for k, v in values.items()} for part, values in self.components.items()}
        return CoefficientErrors({k: size * v for k, v in self.standard_errors.items()}, f"{self.basis}, {note}",
                                 components)

    def intervals(self, coefficients: Mapping[str, float]) -> dict[str, list[float]] | None:
        """``coefficient +- z se`` at :data:`CONFIDENCE_LEVEL`, for every coefficient with a standard error."""
        if self.standard_errors is None:
            return None
        z = float(norm.ppf(0.5 + CONFIDENCE_LEVEL / 2))
        return {name: [coefficients[name] - z * se, coefficients[name] + z * se]
                for name, se in self.standard_errors.items() if name in coefficients}

    def to_json(self, coefficients: Mapping[str, float]) -> dict[str, object]:
        """The answer's fields (module docstring), for the coefficients the answer reports."""
        errors = None if self.standard_errors is None else {
            k: v for k, v in self.standard_errors.items() if k in coefficients}
        components = None if self.components is None else {
            part: {k: v for k, v in values.items() if k in coefficients} for part, values in self.components.items()}
        return {"standard_errors": errors, "confidence_intervals": self.intervals(coefficients),
                "confidence_level": CONFIDENCE_LEVEL, "error_basis": self.basis, "error_components": components}


def _named(names: Sequence[str], values: np.ndarray) -> dict[str, float]:
    return {name: float(v) for name, v in zip(names, np.ravel(values), strict=True)}


def take_errors(details: Mapping[str, object]) -> tuple[dict[str, object], CoefficientErrors]:
    """An answer's details without its errors, and the errors (:meth:`CoefficientErrors.none` when it gave none)."""
    rest = dict(details)
    errors = rest.pop(ERRORS_DETAIL, None)
    return rest, errors if isinstance(errors, CoefficientErrors) else CoefficientErrors.none()
