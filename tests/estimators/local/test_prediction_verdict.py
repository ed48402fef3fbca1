"""The prediction verdict (issue 29, section 6): on ACSemployment (half the training rows a public table with the
label, half participants through the glm protocol's device randomizer, seeded in-process), the fits at epsilon 2 and 1
are not noise-dominated, and a campaign whose labels are independent of the features is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.moment import PublicMomentGLM
from estimators.local.quality import assess_predictions, check_predictions
from workloads.local.protocols import RoundState
from workloads.local.protocols.glm import GlmSpec, public_feature_map


def _verdict(public: np.ndarray, labels_public: np.ndarray, x: np.ndarray, y: np.ndarray, epsilon: float):  # noqa: ANN202
    center, matrix = public_feature_map(public, True)
    spec = GlmSpec(public.shape[1], epsilon, 0.0, tuple(center), tuple(map(tuple, matrix)), randomizer="privunit")
    aggregate = ReportAggregate.for_round(spec, 0, RoundState(0))
    aggregate.add(spec.randomize(0, RoundState(0), {"x": x, "y": y}, np.random.default_rng(1)))
    glm = PublicMomentGLM("logistic").fit(aggregate, spec, public)
    names = [f"x{j}" for j in range(public.shape[1])]
    check = check_predictions(public, glm.coef_, glm.covariance_[1:, 1:], labels_public)
    return assess_predictions(dict(zip(names, glm.coef_, strict=True)),
                              dict(zip(names, glm.standard_errors_[1:], strict=True)), check)


@pytest.fixture(scope="module")
def halves(data_dir: Path):  # noqa: ANN201
    frame = pd.read_csv(data_dir / "acs" / "ACSemployment_train.csv").sample(frac=1.0, random_state=0)
    features = [c for c in frame.columns if c != "ESR"]
    half = len(frame) // 2
    public, people = frame.iloc[:half], frame.iloc[half:]
    return (public[features].to_numpy(float), public["ESR"].to_numpy(float), people[features].to_numpy(float),
            people["ESR"].to_numpy(float))


@pytest.mark.parametrize("epsilon", [2.0, 1.0])
def test_acs_employment_fits_are_not_noise_dominated(halves, epsilon: float) -> None:  # noqa: ANN001
    public, labels, x, y = halves
    quality = _verdict(public, labels, x, y, epsilon)
    assert quality.verdict in ("ok", "weak"), quality.reasons
    assert quality.predictions.auc["low"] > 0.6
    assert quality.undetermined  # the rare binary features are named, not hidden
    assert any("not determined" in reason for reason in quality.reasons)


def test_labels_independent_of_the_features_are_noise_dominated(halves) -> None:  # noqa: ANN001
    public, labels, x, y = halves
    quality = _verdict(public, labels, x, np.random.default_rng(5).permutation(y), 2.0)
    assert quality.verdict == "noise-dominated", quality.reasons
    assert quality.predictions.auc["low"] <= 0.5 <= quality.predictions.auc["high"]
