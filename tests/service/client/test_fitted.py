"""The client's fitted model and the server's estimators are one model: same score, labels and probabilities.

The client's :class:`FittedRegression` is built from an answer as the server sends it (coefficients keyed by feature
name, the design's encoding); the server's estimators are :mod:`estimators.base` types holding the same coefficients.
On the encoded scale (the client's ``encoded_model_``) predictions must be identical (not close): both call the same
functions. The edge cases are a score of exactly 0 (label -1, probability 1/2) and scores so large that
``exp(-score)`` would overflow (probabilities exactly 0 and 1, no warning, no NaN). The client's own predictions are
those, decoded to the data's scale (issue 29 section 4).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from estimators.central.reference import LogisticReference, OLSReference
from service.client import FittedRegression
from workloads.domain import Domain
from workloads.encodings import INTERCEPT_NAME, DesignEncoding

DOMAIN = Domain.from_sizes({"a": 3, "b": 2, "y": 2})


def answer_for(model: OLSReference | LogisticReference, design: DesignEncoding) -> dict[str, object]:
    """What the server answers for a fitted regression (the fields the client reads)."""
    return {"task": design.task, "method": "dd-ssp", "release_id": 1, "reused": True,
            "cost": {"epsilon": 0, "delta": 0, "rho": 0}, "feature_names": list(model.feature_names_),
            "coefficients": model.coefficients(), "design": design.to_dict()}


def server_model(kind: type, design: DesignEncoding, theta: np.ndarray) -> OLSReference | LogisticReference:
    model = kind()
    model._store(theta, design.feature_names, intercept=True)
    return model


def edge_rows(model: OLSReference | LogisticReference) -> np.ndarray:
    """Encoded rows whose scores are: exactly 0, about +-1e6 (exp(1e6) overflows a float), and ordinary values."""
    p = model.n_features_in_
    zero = np.zeros(p)
    zero[0] = -model.intercept_ / model.coef_[0]  # coef_[0] = intercept_ = 0.5 below: the score is exactly 0.0
    huge = np.zeros(p)
    huge[0] = 1e6 / model.coef_[0]  # score 1e6 + intercept
    ordinary = np.random.default_rng(0).uniform(-2, 2, size=(20, p))
    return np.vstack([zero, huge, -huge, ordinary])


def test_client_and_server_logistic_models_predict_identically() -> None:
    design = DesignEncoding(DOMAIN, ["a", "b"], "y", task="logistic")
    p = len(design.feature_names)
    theta = np.concatenate([[0.5, 0.5], np.linspace(-1.0, 1.0, p - 1)])  # intercept 0.5, coef_[0] 0.5
    server = server_model(LogisticReference, design, theta)
    client = FittedRegression(answer_for(server, design), DOMAIN.to_dict())
    rows = edge_rows(server)
    scores = server.decision_function(rows)
    assert scores[0] == 0.0 and scores[1] > 1e5 and scores[2] < -1e5
    encoded = client.encoded_model_
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow in exp would warn
        np.testing.assert_array_equal(encoded.decision_function(rows), scores)
        np.testing.assert_array_equal(encoded.predict(rows), server.predict(rows))
        np.testing.assert_array_equal(encoded.predict_proba(rows), server.predict_proba(rows))
        proba = encoded.predict_proba(rows)
    assert encoded.predict(rows)[0] == -1  # +1 only when the score is > 0
    np.testing.assert_array_equal(proba[:3], [[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_array_equal(encoded.classes_, server.classes_)
    assert encoded.coefficients() == server.coefficients()


def test_client_and_server_linear_models_predict_identically() -> None:
    design = DesignEncoding(DOMAIN, ["a", "b"], "y", task="linear")
    p = len(design.feature_names)
    server = server_model(OLSReference, design, np.concatenate([[0.5, 0.5], np.full(p - 1, -0.25)]))
    client = FittedRegression(answer_for(server, design), DOMAIN.to_dict())
    rows = edge_rows(server)
    np.testing.assert_array_equal(client.encoded_model_.predict(rows), server.predict(rows))
    with pytest.raises(AttributeError, match="logistic"):
        client.predict_proba(pd.DataFrame({"a": [0], "b": [1]}))


def test_rows_of_codes_predict_as_their_encoding() -> None:
    design = DesignEncoding(DOMAIN, ["a", "b"], "y", task="logistic")
    p = len(design.feature_names)
    server = server_model(LogisticReference, design, np.linspace(-1.0, 1.0, p + 1))
    client = FittedRegression(answer_for(server, design), DOMAIN.to_dict())
    codes = pd.DataFrame({"a": [0, 1, 2, 2], "b": [0, 1, 0, 1], "y": [0, 1, 1, 0]})
    encoded = design.encode_features(codes)
    np.testing.assert_array_equal(client.predict_proba(codes.to_numpy()[:, :2]), server.predict_proba(encoded))
    np.testing.assert_array_equal(client.predict(codes), np.where(server.predict(encoded) > 0, 1, 0))  # codes 0/1
    assert client.encoded_model_.coefficients()[INTERCEPT_NAME] == server.intercept_
    with pytest.raises(ValueError, match=r"\(n, 2\) array"):
        client.predict(np.zeros((2, p + 1)))
