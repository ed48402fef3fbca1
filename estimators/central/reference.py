"""Non-private references fitted on rows, for benchmarks and tests only (never inside a release).

* :class:`OLSReference` -- least squares by ``numpy.linalg.lstsq`` (minimum-norm for rank-deficient designs).
* :class:`LogisticReference` -- scikit-learn's ``LogisticRegression`` (lbfgs), unpenalised by default (``C=inf``).
* :func:`fit_on_rows` -- the AIM-Synth baseline of Ferrando & Sheldon 2024, "Private Regression via Data-Dependent
  Sufficient Statistic Perturbation" (Sec. 3.4): the reference model of the design's task fitted on (synthetic)
  integer-coded rows.
* :func:`counting_marginal` -- exact marginal counts of a table, as the callable that
  :func:`estimators.central.sufficient_stats.gram_from_marginals` reads (the service counts in SQL instead).
"""

from __future__ import annotations

import numpy as np

from estimators.base import BinaryClassifier, EstimatorError, LinearRegressor, as_matrix
from estimators.central.sufficient_stats import Marginal
from workloads.domain import Domain
from workloads.encodings import DesignEncoding


def _feature_names(names: tuple[str, ...] | None, p: int) -> tuple[str, ...]:
    names = tuple(names) if names is not None else tuple(f"x{i}" for i in range(p))
    if len(names) != p:
        raise EstimatorError(f"feature_names must name {p} columns, got {len(names)}")
    return names


class OLSReference(LinearRegressor):
    """Ordinary least squares on rows (minimum-norm solution)."""

    def __init__(self, fit_intercept: bool = True) -> None:
        self.fit_intercept = fit_intercept

    def fit(self, X: object, y: object, feature_names: tuple[str, ...] | None = None) -> OLSReference:
        X = as_matrix("X", X)
        y = np.asarray(y, dtype=float)
        if y.shape != (X.shape[0],):
            raise EstimatorError(f"y must have {X.shape[0]} entries, got shape {y.shape}")
        design = np.column_stack([np.ones(X.shape[0]), X]) if self.fit_intercept else X
        theta = np.linalg.lstsq(design, y, rcond=None)[0]
        self._store(theta, _feature_names(feature_names, X.shape[1]), self.fit_intercept)
        return self


class LogisticReference(BinaryClassifier):
    """Logistic regression on rows with labels in ``{-1, +1}`` (scikit-learn lbfgs; ``C=inf`` is unpenalised)."""

    def __init__(self, fit_intercept: bool = True, C: float = np.inf, max_iter: int = 5000) -> None:
        self.fit_intercept = fit_intercept
        self.C = C
        self.max_iter = max_iter

    def fit(self, X: object, y: object, feature_names: tuple[str, ...] | None = None) -> LogisticReference:
        from sklearn.linear_model import LogisticRegression

        X = as_matrix("X", X)
        y = np.asarray(y, dtype=float)
        if y.shape != (X.shape[0],) or not np.all(np.isin(y, (-1.0, 1.0))):
            raise EstimatorError(f"y must be a vector of {X.shape[0]} labels in {{-1, +1}}")
        if np.unique(y).size < 2:
            raise EstimatorError("y must contain both classes")
        model = LogisticRegression(C=self.C, fit_intercept=self.fit_intercept, max_iter=self.max_iter, tol=1e-8)
        model.fit(X, y)
        intercept = float(model.intercept_[0]) if self.fit_intercept else 0.0
        theta = np.concatenate([[intercept], model.coef_[0]]) if self.fit_intercept else model.coef_[0]
        self._store(theta, _feature_names(feature_names, X.shape[1]), self.fit_intercept)
        return self


def fit_on_rows(rows: object, design: DesignEncoding) -> OLSReference | LogisticReference:
    """AIM-Synth (Ferrando & Sheldon, Sec. 3.4): encode ``rows`` (e.g. synthetic) with ``design`` and fit its task's
    reference.

    ``rows`` is a DataFrame of integer codes (or anything :meth:`DesignEncoding.encode` accepts). The intercept
    follows ``design.intercept``.
    """
    if not isinstance(design, DesignEncoding):
        raise EstimatorError(f"design must be a DesignEncoding, got {type(design).__name__}")
    X, y = design.encode(rows)
    model = OLSReference(design.intercept) if design.task == "linear" else LogisticReference(design.intercept)
    return model.fit(X, y, design.feature_names)


def counting_marginal(rows: object, domain: Domain) -> Marginal:
    """Exact marginal counts of integer-coded ``rows`` (DataFrame or mapping of columns) over ``domain``."""
    if not hasattr(rows, "columns") and not isinstance(rows, dict):
        raise EstimatorError(f"rows must be a DataFrame or a mapping of columns, got {type(rows).__name__}")
    columns = {name: np.asarray(rows[name], dtype=np.int64) for name in domain.names if name in rows}

    def marginal(attrs: tuple[str, ...]) -> np.ndarray:
        missing = [a for a in attrs if a not in columns]
        if missing:
            raise EstimatorError(f"attrs {missing} are not columns of the rows")
        shape = domain.shape(attrs)
        flat = np.ravel_multi_index(tuple(columns[a] for a in attrs), shape)
        return np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape).astype(float)

    return marginal
