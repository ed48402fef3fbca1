"""Helpers shared by the tests of the central estimators (designs on the Adult table)."""

from __future__ import annotations

import numpy as np

from workloads.domain import Domain
from workloads.encodings import DesignEncoding

# Ten well-populated adult attributes for the logistic checks (the paper uses all; rare native-country and
# occupation levels make the unpenalised reference MLE diverge on a 5,000-row subsample, see below).
LOGISTIC_FEATURES = [
    "age", "education-num", "hours-per-week", "sex", "relationship", "race", "workclass", "capital-gain",
    "capital-loss", "marital-status",
]  # fmt: skip


def linear_design(domain: Domain, intercept: bool) -> DesignEncoding:
    features = [c for c in domain.names if c not in ("education", "education-num")]
    return DesignEncoding(domain, features, "education-num", "linear", intercept=intercept)


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
