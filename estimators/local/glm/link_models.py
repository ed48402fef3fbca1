"""Fitted single-index models ``E[y | x] = mean(<x, coef_>)``, on the project's linear-model base types.

A Stein-lemma fit (:mod:`estimators.local.glm.stein`) ends in ``coef_ = c w_ols`` and a link; these classes give it the
scikit-learn surface of :mod:`estimators.base`: :class:`LinkClassifier` (binary links: labels ``{0, 1}`` as in the
paper's GLMs, ``predict_proba`` from the link's mean, e.g. ``Phi_N`` for probit) and :class:`LinkRegressor`
(``predict`` is the link's mean: ``exp`` for Poisson, ``x^3 / 3`` for the cubic link...). Algs. 1-4 have no
intercept (Stein's lemma is stated for zero-mean features: ``intercept_`` is 0); the public-gram variant estimates one
(:func:`estimators.local.glm.scale.solve_scale_and_offset`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from estimators.base import BinaryClassifier, LinearRegressor, LinearScoreModel
from estimators.local.glm.links import Link, get_link


class LinkModel(LinearScoreModel):
    """Shared state: ``coef_``, ``intercept_`` (0 for Algs. 1-4), ``link_`` and ``scale_`` (the constant ``c``)."""

    link_: Link
    scale_: float

    def _store_link(self, coef: np.ndarray, link: Link, scale: float, feature_names: Sequence[str],
                    intercept: float = 0.0) -> None:
        self._store(np.concatenate([[float(intercept)], np.asarray(coef, dtype=float)]), tuple(feature_names),
                    intercept=True)
        self.link_ = link
        self.scale_ = float(scale)

    def predict_mean(self, X: object) -> np.ndarray:
        """``E[y | x]`` under the fitted model."""
        score = self.decision_function(X)  # NotFittedError before fit
        return self.link_.mean(score)


class LinkRegressor(LinkModel, LinearRegressor):
    def predict(self, X: object) -> np.ndarray:
        return self.predict_mean(X)


class LinkClassifier(LinkModel, BinaryClassifier):
    """Labels ``{0, 1}``; ``predict_proba`` columns ``P(y = 0), P(y = 1)``."""

    classes_ = np.array([0, 1])

    def predict_proba(self, X: object) -> np.ndarray:
        positive = np.clip(self.predict_mean(X), 0.0, 1.0)
        return np.column_stack([1.0 - positive, positive])

    def predict(self, X: object) -> np.ndarray:
        return np.where(self.predict_mean(X) > 0.5, 1, 0)


def link_model(link: str | Link, coef: object, scale: float, feature_names: Sequence[str],
               intercept: float = 0.0) -> LinkModel:
    """The fitted model of the right class for ``link`` (``score = <x, coef> + intercept``)."""
    link = get_link(link)
    model = LinkClassifier() if link.binary else LinkRegressor()
    model._store_link(np.asarray(coef, dtype=float), link, scale, feature_names, intercept)
    return model
