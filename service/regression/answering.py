"""How each regression method answers from a stored release: post-processing, no rows read, no privacy spent.

One function per method, each ``answer(engine, release, design, seed) -> (model, details)``, registered with its
method in :mod:`service.regression.methods` (Ferrando & Sheldon 2024, "Private Regression via Data-Dependent
Sufficient Statistic Perturbation", and Wang & Xu 2019 for DP-IHT):

* :func:`dd_ssp`: ``Z^T Z`` from a marginal release (Prop. 3.2), then Alg. 1 (linear) or Prop. 3.4 (logistic);
* :func:`aim_synth`: the non-private fit on synthetic rows drawn from the release's model (Sec. 3.4 / 4);
* :func:`adassp`: Alg. 2 (App. B) from a principal submatrix of a Gram release;
* :func:`objpert` and :func:`dp_iht`: a model release's model itself (objective perturbation, App. C Alg. 3, with
  error bars from the curvature it released; DP-IHT, Alg. 3).
"""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import Engine

from estimators.base import BinaryClassifier, LinearRegressor, LinearScoreModel
from estimators.central.linear import AdaSSPLinearRegression, DDSSPLinearRegression
from estimators.central.logistic import DDSSPLogisticRegression
from estimators.central.reference import fit_on_rows
from estimators.central.sufficient_stats import GramStatistics, gram_from_marginals
from estimators.graphical import mbi_adapter
from estimators.graphical.mbi_adapter import Model
from estimators.residual.regression_queries import DEFAULT_RIDGE_FACTOR, gram_noise_scale
from service.mechanisms import gram, registry
from service.mechanisms.payloads import ModelPayload
from service.regression import uncertainty
from service.releases import answers
from service.releases.answers import StoredRelease
from service.releases.measured import MeasuredRelease
from workloads.domain import Domain
from workloads.encodings import DesignEncoding
from workloads.marginals import canonical

Answer = tuple[LinearScoreModel, dict[str, object]]


class _ReleasedModel(LinearScoreModel):
    """A linear score read back from a model release's payload, in the order of the request's design."""

    def __init__(self, payload: ModelPayload, design: DesignEncoding) -> None:
        weights = dict(zip(payload.feature_names, payload.coef, strict=True))
        theta = [weights[name] for name in design.feature_names]
        if design.intercept:
            theta = [float(payload.intercept or 0.0), *theta]
        self._store(np.asarray(theta, dtype=float), design.feature_names, design.intercept)


class ReleasedLogisticModel(_ReleasedModel, BinaryClassifier):
    """A logistic model read back from a model release (objective perturbation, DP-IHT)."""


class ReleasedLinearModel(_ReleasedModel, LinearRegressor):
    """A linear model read back from a model release (DP-IHT)."""


def released_model(payload: ModelPayload, design: DesignEncoding) -> LinearScoreModel:
    """The fitted model a model release's payload holds, of the design's task."""
    return (ReleasedLogisticModel if design.task == "logistic" else ReleasedLinearModel)(payload, design)


def _marginal_reader(domain: Domain, model: Model):  # noqa: ANN202
    def read(attributes: tuple[str, ...]) -> np.ndarray:
        ordered = canonical(domain, attributes)
        values = mbi_adapter.marginal(model, ordered)
        return np.moveaxis(values, [ordered.index(a) for a in attributes], range(len(attributes)))

    return read


def dd_ssp(engine: Engine, release: StoredRelease, design: DesignEncoding, seed: int | None) -> Answer:
    """DD-SSP (Prop. 3.2; Alg. 1 or Prop. 3.4) from a marginal release. A release stored as noisy residuals that
    measured every marginal the design reads gives ``Z^T Z`` from their *unbiased* reconstruction, solved with the
    ridge ``DEFAULT_RIDGE_FACTOR * sqrt(p v)`` (the scale of the noise's spectral norm, a public function of the
    release's noise scales: :func:`estimators.residual.regression_queries.gram_noise_scale`); any other release
    reads the marginals of its graphical model, without a ridge. The statistics of a (release, design) are
    post-processing of an immutable release, computed once per process (:func:`dd_ssp_statistics`). The
    coefficients' error bars (:func:`service.regression.error_bars.dd_ssp_errors`; ``seed`` seeds a bootstrap this
    call computes, in-process only) ride in the details under ``uncertainty.ERRORS_DETAIL``. A logistic fit's
    scores are then calibrated on rows of the release's model (:mod:`service.regression.calibration`: labels and
    probabilities on the logistic scale, the order of the scores unchanged), said under ``calibration``."""
    from service.regression import calibration, error_bars

    estimator_class = DDSSPLinearRegression if design.task == "linear" else DDSSPLogisticRegression
    stats, ridge, details = dd_ssp_statistics(engine, release, design)
    estimator = estimator_class() if ridge is None else estimator_class(ridge=ridge)
    model = estimator.fit(stats)
    errors = error_bars.dd_ssp_errors(engine, release, design, stats, ridge, model, seed)
    if design.task == "logistic":
        model, found = calibration.calibrate(engine, release, design, model)
        details = {**details, "calibration": found.to_json()}
        if found.applied:
            errors = errors.scaled(found.slope, "times the calibration's slope (held fixed)")
    return model, {**details, uncertainty.ERRORS_DETAIL: errors}


def dd_ssp_statistics(engine: Engine, release: StoredRelease, design: DesignEncoding,
                      ) -> tuple[GramStatistics, float | None, dict[str, object]]:
    """The ``Z^T Z`` that DD-SSP reads from a complete marginal release for ``design`` (Prop. 3.2), its ridge (None:
    none) and the details the answer reports; cached per (database, release, design)
    (:func:`service.releases.answers.derived_statistics`), its matrix read-only as it is shared."""
    key = ("dd-ssp", json.dumps(design.to_dict(), sort_keys=True))
    return answers.derived_statistics(engine, release.id, key, lambda: _dd_ssp_statistics(engine, release, design))


def _dd_ssp_statistics(engine: Engine, release: StoredRelease, design: DesignEncoding,
                       ) -> tuple[GramStatistics, float | None, dict[str, object]]:
    _, payload = answers.release_payload(engine, release.id)
    if isinstance(payload, MeasuredRelease) and all(payload.covers(m) for m in design.required_marginals()):
        ridge = DEFAULT_RIDGE_FACTOR * gram_noise_scale(payload.residuals, design)
        stats = gram_from_marginals(design, payload.unbiased, total=payload.total)
        details = {"total": payload.total, "ridge": ridge, "statistics": "unbiased, from the measurements"}
    else:
        _, model = answers.release_model(engine, release.id)
        total = float(model.total)
        stats, ridge = gram_from_marginals(design, _marginal_reader(release.dataset.domain, model), total=total), None
        details = {"total": total}
    stats.zz.setflags(write=False)
    return stats, ridge, details


def aim_synth(engine: Engine, release: StoredRelease, design: DesignEncoding, seed: int | None) -> Answer:
    """AIM-Synth (Sec. 3.4): the non-private fit on as many synthetic rows as the model's total (capped), with its
    coefficients' error bars (:func:`service.regression.error_bars.aim_synth_errors`) in the details under
    ``uncertainty.ERRORS_DETAIL``."""
    from service.regression import error_bars

    _, model = answers.release_model(engine, release.id)
    rows = min(max(1, round(float(model.total))), answers.MAX_SYNTHETIC_ROWS)
    # fit() decided whether this release may answer (a seeded one only for an in-process caller who allows it)
    frame = answers.synthetic_frame(engine, release.id, rows, seed, allow_seeded=True)
    fitted = fit_on_rows(frame, design)
    errors = error_bars.aim_synth_errors(engine, release, design, frame, fitted, rows, seed)
    return fitted, {"synthetic_rows": rows, uncertainty.ERRORS_DETAIL: errors}


def adassp(engine: Engine, release: StoredRelease, design: DesignEncoding, seed: int | None) -> Answer:  # noqa: ARG001
    """AdaSSP (App. B, Alg. 2) from the principal submatrix of a Gram release that the design reads, with its
    coefficients' error bars (:func:`service.regression.error_bars.adassp_errors`) under
    ``uncertainty.ERRORS_DETAIL``."""
    from service.regression import error_bars

    payload = release.decoded_payload()
    stats = gram.sub_statistics(payload, design)
    scales = gram.adassp_scales(release.details, stats.dimension, float(release.params["confidence_delta"]),
                                float(release.params["failure_prob"]))
    estimator = AdaSSPLinearRegression().fit(stats, payload.lambda_min_noisy, scales)
    errors = error_bars.adassp_errors(design, stats, estimator, scales)
    return estimator, {"ridge": estimator.ridge_, "lambda_min_tilde": estimator.lambda_min_tilde_,
                       uncertainty.ERRORS_DETAIL: errors}


def _released(release: StoredRelease, design: DesignEncoding, errors: object) -> Answer:
    """A model release's model itself, with the public numbers of its calibration (the ``public_details`` its
    mechanism's spec declares; none for a mechanism no longer registered) and ``errors``."""
    spec = registry.find(release.mechanism)
    public = spec.public_details if spec is not None else ()
    return released_model(release.decoded_payload(), design), {
        **{k: release.details[k] for k in public if k in release.details},
        uncertainty.ERRORS_DETAIL: errors,
    }


def objpert(engine: Engine, release: StoredRelease, design: DesignEncoding, seed: int | None) -> Answer:  # noqa: ARG001
    """An objective-perturbation release's model, with error bars from the curvature it released
    (:func:`service.regression.error_bars.objpert_errors`)."""
    from service.regression import error_bars

    return _released(release, design, error_bars.objpert_errors(design, release.decoded_payload(), release.details))


def dp_iht(engine: Engine, release: StoredRelease, design: DesignEncoding, seed: int | None) -> Answer:  # noqa: ARG001
    """A DP-IHT release's model, with error bars from the curvature it released over the kept coefficients
    (:func:`service.regression.error_bars.dp_iht_errors`)."""
    from service.regression import error_bars

    return _released(release, design, error_bars.dp_iht_errors(design, release.decoded_payload(), release.details))
