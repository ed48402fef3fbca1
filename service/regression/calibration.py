"""Logistic DD-SSP's labels and probabilities on the logistic scale: Platt scaling of its scores on rows drawn from the
release's own model (issue 30, point 4).

Why. DD-SSP's logistic surrogate (Ferrando & Sheldon 2024, Prop. 3.4) is maximised at ``theta = -b1 / (2 b2)
(X^T X)^{-1} X^T y``: a scaled least-squares fit of the ``{-1, +1}`` labels, a linear probability model. Its
direction ranks rows well (DD-SSP's AUC), but where the positive class is rare the least-squares fit seldom crosses
0, so the predicted labels are the majority's almost everywhere, even where the non-private logistic model beats the
majority rate (measured in docs/regression-results.md, "Labels": ACSemployment's DIS, 0.928-0.937 accuracy from
the surrogate, 0.940-0.946 calibrated, 0.947 non-private).

What. ``P(y = +1 | x) = 1 / (1 + e^{-(a x.theta + c)})``: the two numbers ``a > 0`` and ``c`` (``c = 0`` without an
intercept) fitted by maximum likelihood (:func:`estimators.central.logistic.platt_scaling`; Platt 1999) to
:data:`CALIBRATION_ROWS` rows drawn from the release's graphical model -- the same model that answers the release's
marginals and synthetic rows -- scored with DD-SSP's ``theta``. The answer's coefficients are ``a theta`` and its
intercept ``a theta_0 + c``; since ``a > 0`` the rows' order, hence the AUC, is DD-SSP's own.

Privacy: nothing is spent. The model is already released (an analyst can draw the same rows), ``theta`` is
post-processing of the release, and so is any function of the two (docs/privacy.md, section 6.8). The rows are drawn
from a public stream fixed by the release's id (:data:`CALIBRATION_STREAM`): a seed of post-processing, not of noise,
so every caller gets the same answer from the same release and nothing about the noise is learnt from it.

Error bars: the coefficients' standard errors of DD-SSP times ``a``, holding the calibration fixed (its own
variability, from a fit on 20,000 model rows, is not added; the basis says so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from estimators.base import EstimatorError
from estimators.central.logistic import DDSSPLogisticRegression, platt_scaling
from estimators.graphical import mbi_adapter
from service.releases import answers
from service.releases.answers import StoredRelease
from workloads.encodings import DesignEncoding

#: Rows drawn from the release's model to fit the two calibration numbers.
CALIBRATION_ROWS = 20_000
#: The public stream of those draws, with the release's id (module docstring).
CALIBRATION_STREAM = 0x9C0A_11B8
METHOD = f"Platt scaling of DD-SSP's scores on {CALIBRATION_ROWS:,} rows drawn from the release's model"


@dataclass(frozen=True)
class Calibration:
    """The slope and shift of a calibration, or why none was applied (``reason``)."""

    slope: float | None
    shift: float | None
    reason: str | None = None

    @property
    def applied(self) -> bool:
        return self.reason is None

    def to_json(self) -> dict[str, object]:
        if not self.applied:
            return {"applied": False, "reason": self.reason}
        return {"applied": True, "method": METHOD, "slope": self.slope, "shift": self.shift}


def calibrate(engine: Engine, release: StoredRelease, design: DesignEncoding,
              model: DDSSPLogisticRegression) -> tuple[DDSSPLogisticRegression, Calibration]:
    """``model`` calibrated on the release's model rows (module docstring), and the calibration; ``model`` itself
    when no positive slope fits (the reason says why). Computed once per (release, design) and process."""
    key = ("dd-ssp-calibration", json.dumps(design.to_dict(), sort_keys=True))
    found = answers.derived_statistics(engine, release.id, key, lambda: _fit(engine, release, design, model))
    if not found.applied:
        return model, found
    return model.calibrated(found.slope, found.shift), found


def _fit(engine: Engine, release: StoredRelease, design: DesignEncoding,
         model: DDSSPLogisticRegression) -> Calibration:
    _, graphical = answers.release_model(engine, release.id)
    rng = np.random.default_rng([CALIBRATION_STREAM, int(release.id)])
    rows = pd.DataFrame(mbi_adapter.numpy_view(graphical).sample(CALIBRATION_ROWS, rng))
    X, y = design.encode(rows[[*design.features, design.target]])
    try:
        slope, shift = platt_scaling(model.decision_function(X), y, design.intercept)
    except EstimatorError:  # one class only among the model's rows
        return Calibration(None, None, "the release's model puts (almost) no mass on one of the labels")
    if not slope > 0:
        return Calibration(None, None, f"the calibration's slope was {slope:.3g}, not positive: the scores are kept "
                                       "as DD-SSP gave them (a negative slope would reverse their order)")
    return Calibration(slope, shift)
