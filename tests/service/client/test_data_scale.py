"""Issue 29 section 4: fits predict on the data's own scale, answers carry the table's labels, scikit-learn's
conventions hold.

On main @02e4138 a linear fit of a target coded 0..15 predicted on the encoded [-1, 1] scale (0.02-0.47), a logistic
one answered -1 / +1 for labels no / yes (``classes_ = [-1, 1]``), and a coded table's domain could not label its codes.
One table here, coded, with a domain that labels two of its columns: ``y`` (0..15, linear), ``z`` (no / yes).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, r2_score

from service.accounting import accountant
from service.releases import engine as release_engine
from tests.support.backends import ON_SQLITE
from workloads import data_scale
from workloads.code_values import values_of_codes

COLOURS = ["red", "green", "blue"]
DOMAIN = {"a": 6, "b": {"size": 3, "kind": "categorical", "labels": COLOURS}, "y": 16,
          "z": {"size": 2, "kind": "categorical", "labels": ["no", "yes"]}}


def table(rows: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(29)
    a, b = rng.integers(0, 6, rows), rng.integers(0, 3, rows)
    y = np.clip(np.round(2 * a + 3 * (b == 2) + rng.normal(0, 1, rows)), 0, 15).astype(int)
    z = (a + rng.normal(0, 1, rows) > 2.5).astype(int)
    return pd.DataFrame({"a": a, "b": b, "y": y, "z": z})


@pytest.fixture
def fitted(engine, clients):  # noqa: ANN001, ANN201
    """The table loaded over HTTP, one laplace all-2way release of it, and the analyst's two fits from it."""
    frame = table()
    clients["steward"].load_dataset("coded", frame.to_csv(index=False), domain=DOMAIN)
    accountant.set_budget(engine, "coded", "100", "0")
    release = release_engine.release_marginals(engine, "coded", "laplace", "all-2way", epsilon=50).release_id
    analyst = clients["analyst"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        linear = analyst.fit_linear("coded", "y", ["a", "b"], release=release)
        logistic = analyst.fit_logistic("coded", "z", ["a", "b"], release=release)
    return frame, release, linear, logistic


@ON_SQLITE
def test_a_linear_fit_predicts_in_the_targets_codes(fitted) -> None:  # noqa: ANN001
    frame, _, linear, _ = fitted
    predicted = linear.predict(frame)
    assert predicted.min() >= 0 and predicted.max() <= 15  # main: 0.02-0.47, the encoded scale
    encoded = linear.encoded_model_.predict(linear.design_.encode_features(frame))
    np.testing.assert_allclose(predicted, (encoded + 1) * 15 / 2)  # the internal prediction, decoded
    # coef_ on the codes: per code of a, per level of b; the same model exactly
    columns = {"a": frame["a"].to_numpy(), "b": frame["b"].to_numpy()}
    np.testing.assert_allclose(data_scale.code_matrix(linear.design_, columns) @ linear.coef_ + linear.intercept_,
                               predicted, atol=1e-9)
    assert linear.coef_[0] == pytest.approx(2, abs=0.3) and linear.coef_[2] == pytest.approx(3, abs=0.5)
    assert linear.feature_names_ == ("a", "b=1", "b=2")
    assert linear.score(frame) == pytest.approx(r2_score(frame["y"], predicted))
    assert linear.score(frame) > 0.8


@ON_SQLITE
def test_sklearn_conventions_and_labels(fitted) -> None:  # noqa: ANN001
    frame, _, linear, logistic = fitted
    assert list(logistic.classes_) == ["no", "yes"]  # main: [-1, 1]
    assert list(logistic.feature_names_in_) == ["a", "b"] and logistic.n_features_in_ == 2
    labels = logistic.predict(frame)
    assert set(labels) <= {"no", "yes"}
    proba = logistic.predict_proba(frame)
    assert list(proba.columns) == ["no", "yes"] and proba.index.equals(frame.index)
    np.testing.assert_array_equal(labels, np.where(proba["yes"] > 0.5, "yes", "no"))
    assert isinstance(logistic.predict_proba(frame[["a", "b"]].to_numpy()), np.ndarray)  # array in: classes_ order
    truth = np.array(["no", "yes"], dtype=object)[frame["z"]]
    assert logistic.score(frame) == pytest.approx(accuracy_score(truth, labels))
    assert logistic.score(frame[["a", "b"]], truth) == logistic.score(frame)  # y as labels or as codes
    # rows holding the table's labels read as its codes; a missing feature is named
    named = frame.assign(b=pd.Categorical.from_codes(frame["b"], categories=COLOURS))
    np.testing.assert_array_equal(logistic.predict(named), labels)
    np.testing.assert_allclose(linear.predict(frame.assign(b=np.array(COLOURS)[frame["b"]])), linear.predict(frame))
    with pytest.raises(ValueError, match=r"lack the feature column\(s\) \['b'\]"):
        linear.predict(frame[["a"]])
    with pytest.raises(ValueError, match="'b' holds values that are neither"):
        linear.predict(frame.assign(b="purple"))


@ON_SQLITE
def test_answers_carry_the_domains_labels_and_their_cost(fitted, clients) -> None:  # noqa: ANN001
    frame, release, linear, _ = fitted
    analyst = clients["analyst"]
    marginal = analyst.marginal(release, ["b", "z"])
    assert list(marginal["b"].cat.categories) == COLOURS and set(marginal["z"]) == {"no", "yes"}
    assert marginal.attrs["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
    assert analyst.marginal(release, ["b"], labels=False)["b"].tolist() == [0, 1, 2]
    rows = analyst.synthetic(release, rows=50)
    assert list(rows["b"].cat.categories) == COLOURS and rows.attrs["cost"]["epsilon"] == 0.0
    assert linear.predict(rows).shape == (50,)  # a synthetic frame predicts as it comes
    assert analyst.synthetic(release, rows=5, labels=False)["b"].dtype.kind == "i"


@ON_SQLITE
def test_a_binned_target_predicts_in_its_own_units(engine, clients) -> None:  # noqa: ANN001
    """A raw table's target binned by its spec predicts in the spec's units (bin midpoints, between them
    linearly), not in codes."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, 2000)
    income = np.clip(10 * a + rng.normal(0, 3, 2000), 0, 59.9)
    raw = pd.DataFrame({"a": a, "income": income}).to_csv(index=False)
    bins = {"columns": {"a": {"kind": "ordinal", "edges": [0, 1, 2, 3, 4]},
                        "income": {"kind": "ordinal", "edges": [0, 10, 20, 40, 60]}}}
    clients["steward"].load_dataset("raw", raw, bins=bins)
    accountant.set_budget(engine, "raw", "100", "0")
    release = release_engine.release_marginals(engine, "raw", "laplace", "all-2way", epsilon=50).release_id
    fit = clients["analyst"].fit_linear("raw", "income", ["a"], release=release)
    np.testing.assert_array_equal(fit.target_values_, [5, 15, 30, 50])
    rows = pd.DataFrame({"a": [0, 1, 2, 3]})
    codes = data_scale.target_codes(fit.design_, fit.encoded_model_.predict(fit.design_.encode_features(rows)))
    np.testing.assert_allclose(fit.predict(rows), values_of_codes(fit.target_values_, codes))
    assert 0 <= fit.predict(rows).min() and fit.predict(rows).max() <= 60
    labelled = pd.DataFrame({"a": ["[0, 1)", "[1, 2)", "[2, 3)", "[3, 4]"]})  # the spec's labels read as codes
    np.testing.assert_allclose(fit.predict(labelled), fit.predict(rows))
