"""Encodings (A_j matrices, DesignEncoding, Prop. 3.1 bound) and the Chebyshev surrogate of Ferrando & Sheldon 2024,
"Private Regression via Data-Dependent Sufficient Statistic Perturbation"."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from numpy.polynomial import chebyshev as cheb
from scipy.integrate import quad

from tests.support.paths import DATA
from workloads.chebyshev import (
    ChebyshevError,
    chebyshev_basis_coefficients,
    chebyshev_monomial_coefficients,
    chebyshev_tail_bound,
    evaluate_monomial,
    log_sigmoid,
)
from workloads.domain import Domain
from workloads.encodings import (
    INTERCEPT_NAME,
    AttributeEncoding,
    DesignEncoding,
    EncodingError,
    binary_pm1,
    one_hot,
    reduced_one_hot,
    row_norm_bound,
    scalar,
)


@pytest.fixture(scope="module")
def adult_rows() -> pd.DataFrame:
    return pd.read_csv(DATA / "adult" / "adult_train.csv").sample(2000, random_state=1)


@pytest.fixture(scope="module")
def titanic_domain() -> Domain:
    return Domain.from_json(
        (DATA / "titanic" / "titanic-domain.json").read_text(), ["Survived", "Sex", "Embarked", "Cabin", "Pclass"]
    )


# --- the A_j matrices -----------------------------------------------------------------------------
def test_one_hot_and_reduced_one_hot():
    assert np.array_equal(one_hot(3), np.eye(3))
    assert np.array_equal(reduced_one_hot(3), np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    assert reduced_one_hot(1).shape == (0, 1)


def test_scalar_spreads_codes_over_minus_one_to_one():
    assert np.allclose(scalar(5), [[-1.0, -0.5, 0.0, 0.5, 1.0]])
    assert np.allclose(scalar(2), [[-1.0, 1.0]])
    assert np.array_equal(scalar(1), [[0.0]])


def test_binary_pm1():
    assert np.array_equal(binary_pm1(2), [[-1.0, 1.0]])
    assert np.array_equal(binary_pm1(3, positive=1), [[-1.0, 1.0, -1.0]])
    with pytest.raises(EncodingError, match="exactly 2 levels"):
        binary_pm1(3)
    with pytest.raises(EncodingError, match="positive"):
        binary_pm1(2, positive=2)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_levels_must_be_positive_integers(bad):
    with pytest.raises(EncodingError, match="k "):
        scalar(bad)


# --- DesignEncoding -------------------------------------------------------------------------------
def test_default_rule_and_names(adult_domain):
    design = DesignEncoding(adult_domain, ["age", "workclass", "sex"], "education-num")
    assert [e.kind for e in design.feature_encodings] == ["scalar", "reduced_one_hot", "reduced_one_hot"]
    assert design.target_encoding.kind == "scalar"
    assert design.feature_names == ("age",) + tuple(f"workclass={s}" for s in range(1, 9)) + ("sex=1",)
    assert design.gram_names == (INTERCEPT_NAME,) + design.feature_names + ("education-num",)
    assert design.n_features == 10
    logistic = DesignEncoding(adult_domain, ["age"], "income>50K", "logistic", intercept=False)
    assert logistic.target_encoding.kind == "binary_pm1"
    assert logistic.gram_names == ("age", "income>50K")


def test_encode_values_by_hand(adult_domain):
    design = DesignEncoding(
        adult_domain, ["age", "workclass", "race"], "income>50K", "logistic", overrides={"race": "one_hot"}
    )
    rows = pd.DataFrame({"age": [0, 31, 10], "workclass": [0, 3, 8], "race": [4, 0, 2], "income>50K": [0, 1, 1]})
    X, y = design.encode(rows)
    expected_age = [-1.0, 1.0, 2 * 10 / 31 - 1]
    assert np.allclose(X[:, 0], expected_age)
    workclass = X[:, 1:9]
    assert np.array_equal(workclass[0], np.zeros(8))  # level 0 is the baseline
    assert np.array_equal(workclass[1], np.eye(8)[2]) and np.array_equal(workclass[2], np.eye(8)[7])
    assert np.array_equal(X[:, 9:], np.eye(5)[[4, 0, 2]])
    assert np.array_equal(y, [-1.0, 1.0, 1.0])


def test_encode_array_dataframe_and_mapping_agree(adult_domain, adult_rows):
    design = DesignEncoding(adult_domain, ["hours-per-week", "occupation", "sex"], "education-num")
    from_frame = design.encode(adult_rows)
    from_array = design.encode(adult_rows[list(adult_domain.names)].to_numpy())
    from_mapping = design.encode({c: adult_rows[c].to_numpy() for c in adult_rows.columns})
    for other in (from_array, from_mapping):
        assert np.array_equal(from_frame[0], other[0]) and np.array_equal(from_frame[1], other[1])
    assert np.array_equal(design.encode_features(adult_rows.drop(columns=["education-num"])), from_frame[0])


def test_custom_matrix_override(titanic_domain):
    matrix = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 0.0]])
    design = DesignEncoding(titanic_domain, ["Pclass", "Sex"], "Fare", overrides={"Pclass": matrix})
    assert design.feature_names[:2] == ("Pclass[0]", "Pclass[1]")
    X, _ = design.encode(pd.DataFrame({"Pclass": [0, 2], "Sex": [1, 0], "Fare": [3, 4]}))
    assert np.array_equal(X[:, :2], [[0.0, 1.0], [2.0, 0.0]])


def test_description_round_trip(adult_domain, titanic_domain):
    designs = [
        DesignEncoding(adult_domain, ["age", "race", "sex"], "income>50K", "logistic", intercept=False,
                       overrides={"race": "one_hot", "sex": np.array([[2.0, 3.0]])}),
        DesignEncoding(adult_domain, ["age"], "sex", "logistic", positive_level=0),
        DesignEncoding(titanic_domain, ["Age", "Pclass"], "Survived", "logistic", positive_level=1),
        DesignEncoding(titanic_domain, None, "Fare"),
    ]  # fmt: skip
    for design in designs:
        again = DesignEncoding.from_dict(design.domain, json.loads(json.dumps(design.to_dict())))
        assert again.gram_names == design.gram_names and again.intercept == design.intercept
        for a, b in zip(again.attribute_encodings, design.attribute_encodings, strict=True):
            assert a.kind == b.kind and np.array_equal(a.matrix, b.matrix)
    with pytest.raises(EncodingError, match="lacks"):
        DesignEncoding.from_dict(adult_domain, {"features": ["age"]})


def test_required_marginals_cover_every_pair(adult_domain):
    design = DesignEncoding(adult_domain, ["age", "sex", "race"], "income>50K", "logistic")
    needed = design.required_marginals()
    assert needed[:4] == (("age",), ("sex",), ("race",), ("income>50K",))
    assert len(needed) == 4 + 6 and ("age", "income>50K") in needed


# --- Prop. 3.1 ------------------------------------------------------------------------------------
def test_row_norm_bound_function():
    assert row_norm_bound([1.0, 1.0, 0.5], 3) == pytest.approx(math.sqrt(1 + 1 + 0.25 + 3))
    assert row_norm_bound([], 0) == 0.0
    with pytest.raises(EncodingError, match="n_one_hot"):
        row_norm_bound([1.0], -1)
    with pytest.raises(EncodingError, match="scalar_bounds"):
        row_norm_bound([float("nan")], 1)


def test_row_norm_bound_of_adult_design(adult_domain, adult_rows):
    features = [c for c in adult_domain.names if c not in ("education", "education-num")]
    # By hand: 5 ordinal features (age, fnlwgt, capital-gain, capital-loss, hours-per-week) each |x_k| <= 1, and
    # c = 8 reduced one-hot attributes (income>50K is a feature here); the intercept is a scalar entry 1 and the
    # scalar target adds 1.
    with_intercept = DesignEncoding(adult_domain, features, "education-num")
    assert with_intercept.feature_norm_bound() == pytest.approx(math.sqrt(1 + 5 + 8))
    assert with_intercept.row_norm_bound() == pytest.approx(math.sqrt(1 + 5 + 8 + 1))
    assert with_intercept.target_bound() == 1.0
    paper = DesignEncoding(adult_domain, features, "education-num", intercept=False)
    assert paper.row_norm_bound() == pytest.approx(math.sqrt(5 + 8 + 1))
    # the bound holds for every real row [1, x, y]
    X, y = with_intercept.encode(adult_rows)
    norms = np.sqrt(1.0 + np.sum(X**2, axis=1) + y**2)
    assert norms.max() <= with_intercept.row_norm_bound() + 1e-12


def test_row_norm_bound_counts_one_hot_and_custom_blocks(titanic_domain):
    matrix = np.array([[0.0, 3.0, 0.0], [0.0, 0.0, 4.0]])  # column norms 0, 3, 4 -> bound 4
    overrides = {"Pclass": matrix, "Embarked": "one_hot"}
    design = DesignEncoding(titanic_domain, ["Pclass", "Embarked"], "Fare", intercept=False, overrides=overrides)
    assert design.feature_norm_bound() == pytest.approx(math.sqrt(16 + 1))


# --- bad input ------------------------------------------------------------------------------------
def test_bad_designs_raise_naming_the_parameter(adult_domain, titanic_domain):
    with pytest.raises(EncodingError, match="features .*'salary'"):
        DesignEncoding(adult_domain, ["age", "salary"], "income>50K", "logistic")
    with pytest.raises(EncodingError, match="target 'nope'"):
        DesignEncoding(adult_domain, ["age"], "nope")
    with pytest.raises(EncodingError, match="must not be among the features"):
        DesignEncoding(adult_domain, ["age", "income>50K"], "income>50K", "logistic")
    with pytest.raises(EncodingError, match="Survived.*exactly 2 levels"):
        DesignEncoding(titanic_domain, ["Age"], "Survived", "logistic")
    with pytest.raises(EncodingError, match="task"):
        DesignEncoding(adult_domain, ["age"], "income>50K", "poisson")
    with pytest.raises(EncodingError, match="overrides"):
        DesignEncoding(adult_domain, ["age"], "income>50K", overrides={"sex": "one_hot"})
    with pytest.raises(EncodingError, match="must be one of"):
        DesignEncoding(adult_domain, ["sex"], "income>50K", overrides={"sex": "two_hot"})
    with pytest.raises(EncodingError, match="more than once"):
        DesignEncoding(adult_domain, ["age", "age"], "income>50K")
    with pytest.raises(EncodingError, match="-1 or \\+1"):
        DesignEncoding(adult_domain, ["age"], "race", "logistic", overrides={"race": "scalar"})
    with pytest.raises(EncodingError, match="custom encoding"):
        DesignEncoding(adult_domain, ["sex"], "age", overrides={"sex": np.ones((2, 3))})
    with pytest.raises(EncodingError, match="positive_level"):
        DesignEncoding(adult_domain, ["age"], "sex", "linear", positive_level=1)
    survived = DesignEncoding(titanic_domain, ["Age"], "Survived", "logistic", positive_level=1)
    assert np.array_equal(survived.target_encoding.matrix, [[-1.0, 1.0, -1.0]])


def test_bad_rows_raise(adult_domain):
    design = DesignEncoding(adult_domain, ["age", "sex"], "income>50K", "logistic")
    with pytest.raises(EncodingError, match="lack the column"):
        design.encode(pd.DataFrame({"age": [1], "income>50K": [0]}))
    with pytest.raises(EncodingError, match="'sex' has codes outside 0..1"):
        design.encode(pd.DataFrame({"age": [1], "sex": [2], "income>50K": [0]}))
    with pytest.raises(EncodingError, match="integer codes"):
        design.encode(pd.DataFrame({"age": [1.5], "sex": [0], "income>50K": [0]}))
    with pytest.raises(EncodingError, match="columns"):
        design.encode(np.zeros((3, 4), dtype=int))


def test_attribute_encoding_of_wrong_size_rejected(adult_domain):
    wrong = AttributeEncoding.build("sex", 3, "one_hot")
    with pytest.raises(EncodingError, match="overrides\\['sex'\\]"):
        DesignEncoding(adult_domain, ["sex"], "age", overrides={"sex": wrong})


# --- Chebyshev (App. A) ---------------------------------------------------------------------------
GRID = np.linspace(-6.0, 6.0, 24001)


def _max_error(b: np.ndarray) -> float:
    return float(np.max(np.abs(evaluate_monomial(b, GRID) - log_sigmoid(GRID))))


def test_linear_coefficient_is_one_half():
    # phi(s) = s/2 - log(2 cosh(s/2)): the odd part is exactly s/2, so any odd-symmetric fit gives b1 = 1/2.
    # Reading the Chebyshev-basis coefficients as monomial ones would give c1 = R/2 = 3 instead.
    for method in ("projection", "interpolation"):
        b = chebyshev_monomial_coefficients(2, 6.0, method=method)
        assert b[1] == pytest.approx(0.5, abs=1e-12)


def test_monomial_coefficients_against_quadrature():
    # Independent computation of the Chebyshev series: c_m = (2/pi) int_0^pi f(6 cos u) cos(m u) du (c_0 halved),
    # then c0 T0 + c2 T2(t) = (c0 - c2) + 2 c2 t^2 with t = s / 6.
    f = lambda u, m: log_sigmoid(6.0 * math.cos(u)) * math.cos(m * u)  # noqa: E731
    c0 = quad(f, 0.0, math.pi, args=(0,), epsabs=1e-13)[0] / math.pi
    c2 = 2.0 * quad(f, 0.0, math.pi, args=(2,), epsabs=1e-13)[0] / math.pi
    b = chebyshev_monomial_coefficients()
    assert b == pytest.approx([c0 - c2, 0.5, 2.0 * c2 / 36.0], abs=1e-10)
    assert b[2] < 0  # concave surrogate


def test_interpolant_matches_phi_at_the_chebyshev_nodes():
    nodes = 6.0 * np.cos((np.arange(3) + 0.5) * np.pi / 3)
    b = chebyshev_monomial_coefficients(method="interpolation")
    assert np.allclose(evaluate_monomial(b, nodes), log_sigmoid(nodes), atol=1e-12)


def test_monomial_form_equals_the_chebyshev_series():
    for method in ("projection", "interpolation"):
        c = chebyshev_basis_coefficients(method=method)
        b = chebyshev_monomial_coefficients(method=method)
        assert np.allclose(evaluate_monomial(b, GRID), cheb.chebval(GRID / 6.0, c), atol=1e-12)


def test_max_error_within_the_chebyshev_tail_bound():
    # |phi - p_2| <= sum_{m>2} |c_m| for the truncated series (|T_m| <= 1), twice that for the interpolant.
    # For phi on [-6, 6] the tail is ~0.189, attained at s = 0 (every T_{2m}(0) = +-1 with alternating c_{2m}).
    for method in ("projection", "interpolation"):
        bound = chebyshev_tail_bound(2, 6.0, method=method)
        assert _max_error(chebyshev_monomial_coefficients(method=method)) <= bound + 1e-12
    projection_error = _max_error(chebyshev_monomial_coefficients())
    assert projection_error == pytest.approx(chebyshev_tail_bound(), rel=1e-6)  # the bound is tight here
    assert projection_error < 0.2


def test_reading_basis_coefficients_as_monomials_is_caught():
    # The known bug: the Chebyshev-basis coefficients used as (b0, b1, b2). Its error on [-6, 6] is far above the
    # tail bound, and its optimum scale -b1/(2 b2) is ~3x smaller (the "3x shrunk" logistic coefficients).
    wrong = chebyshev_basis_coefficients()
    right = chebyshev_monomial_coefficients()
    assert _max_error(wrong) > 10 * chebyshev_tail_bound()
    assert (-right[1] / (2 * right[2])) / (-wrong[1] / (2 * wrong[2])) == pytest.approx(3.0, rel=0.05)


def test_chebyshev_bad_parameters():
    with pytest.raises(ChebyshevError, match="radius"):
        chebyshev_monomial_coefficients(2, 0.0)
    with pytest.raises(ChebyshevError, match="degree"):
        chebyshev_monomial_coefficients(-1)
    with pytest.raises(ChebyshevError, match="method"):
        chebyshev_monomial_coefficients(method="taylor")
