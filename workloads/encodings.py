"""Numerical encodings of discrete attributes and the design they make (Ferrando & Sheldon, Sec. 3.1).

Every attribute ``j`` with ``k_j`` levels is encoded as ``A_j psi_j(chi_j)``, where ``psi_j`` is the one-hot
vector of the code and ``A_j`` a fixed ``d_j x k_j`` matrix (Ferrando & Sheldon 2024, "Private Regression via
Data-Dependent Sufficient Statistic Perturbation", Sec. 3.1). Column ``s`` of ``A_j`` is the encoding of level ``s``.
The matrices here:

* :func:`one_hot` -- ``I_k``;
* :func:`reduced_one_hot` -- ``I_k`` without row 0 (level 0 is the baseline and encodes to the zero vector);
* :func:`scalar` -- the row ``v`` with ``v(s) = 2 s / (k - 1) - 1`` (codes spread evenly over ``[-1, 1]``;
  a single-level attribute encodes to 0);
* :func:`binary_pm1` -- the row mapping a binary target to ``{-1, +1}`` (Sec. 3.3).

:class:`DesignEncoding` fixes the encoding of every feature and of the target, names the encoded columns, encodes
integer-coded rows, and gives the row-norm bound of Prop. 3.1 that the baselines' sensitivities use.

The default rule is the one of the paper's experiments: categorical
features -> reduced one-hot, ordinal features -> scalar in ``[-1, 1]``, a linear target -> scalar, a logistic target
-> ``{-1, +1}``. The paper fits without an intercept; ``intercept=True`` (our default) adds a constant column 1 as
the first column of the design's Gram matrix. Its Gram entries are the total count and the 1-way sums
``A_j mu_j``, so any release that answers the 1-way marginals answers them too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from workloads.domain import Domain

TASKS = ("linear", "logistic")
#: Largest denominator an entry of a custom encoding may have to be read as an exact rational (exact_matrix).
MAX_EXACT_DENOMINATOR = 2**20
ENCODINGS = ("one_hot", "reduced_one_hot", "scalar", "binary_pm1")
INTERCEPT_NAME = "(intercept)"


class EncodingError(ValueError):
    """An encoding or design that cannot be built; the message names the offending parameter."""


# --------------------------------------------------------------------------------------------------
# the A_j matrices
# --------------------------------------------------------------------------------------------------
def _check_levels(k: object, parameter: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise EncodingError(f"{parameter} (number of levels) must be a positive integer, got {k!r}")
    return int(k)


def one_hot(k: int) -> np.ndarray:
    """``A = I_k`` (shape ``k x k``): the one-hot encoding itself (Sec. 3.1, ``Phi_j = I_j``)."""
    return np.eye(_check_levels(k))


def reduced_one_hot(k: int) -> np.ndarray:
    """``I_k`` with row 0 dropped (shape ``(k-1) x k``): level 0 is the baseline (Sec. 3.1, ``tilde I_j``)."""
    return np.eye(_check_levels(k))[1:]


def scalar(k: int) -> np.ndarray:
    """The ``1 x k`` row ``v(s) = 2 s / (k - 1) - 1``: codes spread evenly over ``[-1, 1]``; ``k = 1`` gives ``[0]``.

    This is the scalar encoding ``A_j = v_j^T`` of Sec. 3.1 with the values of the paper's experiments.
    """
    k = _check_levels(k)
    if k == 1:
        return np.zeros((1, 1))
    return (2.0 * np.arange(k) / (k - 1) - 1.0)[None, :]


def binary_pm1(k: int, positive: int | None = None) -> np.ndarray:
    """The ``1 x k`` row encoding a logistic target in ``{-1, +1}`` (Sec. 3.3).

    With ``k = 2`` and no ``positive`` level: level 0 -> -1, level 1 -> +1. With ``positive`` given, that level -> +1
    and every other level -> -1. Any other ``k`` without ``positive`` is an error: which level is the positive class
    is a modelling decision, never a guess.
    """
    k = _check_levels(k)
    if positive is None:
        if k != 2:
            raise EncodingError(
                f"binary_pm1 needs exactly 2 levels, got k={k}; name the positive class "
                f"(positive_level= of DesignEncoding, positive= of binary_pm1)"
            )
        positive = 1
    if isinstance(positive, bool) or not isinstance(positive, int | np.integer) or not 0 <= positive < k:
        raise EncodingError(f"positive must be a level in 0..{k - 1}, got {positive!r}")
    row = -np.ones((1, k))
    row[0, int(positive)] = 1.0
    return row


def row_norm_bound(scalar_bounds: Sequence[float], n_one_hot: int) -> float:
    """Prop. 3.1 (Ferrando & Sheldon): ``||x|| <= sqrt(||U||^2 + c)``.

    ``scalar_bounds`` are the bounds ``x_k^+ >= sup |x_k|`` of the scalar-encoded entries (``||U||^2`` is the sum of
    their squares; an intercept column is a scalar entry with bound 1) and ``n_one_hot`` is the number ``c`` of
    attributes encoded one-hot (reduced or not), each contributing at most one entry equal to 1.
    """
    bounds = np.asarray(list(scalar_bounds), dtype=float)
    if bounds.size and (not np.all(np.isfinite(bounds)) or np.any(bounds < 0)):
        raise EncodingError(f"scalar_bounds must be finite and non-negative, got {bounds.tolist()}")
    if isinstance(n_one_hot, bool) or not isinstance(n_one_hot, int | np.integer) or n_one_hot < 0:
        raise EncodingError(f"n_one_hot must be a non-negative integer, got {n_one_hot!r}")
    return math.sqrt(float(np.sum(bounds**2)) + int(n_one_hot))


# --------------------------------------------------------------------------------------------------
# one attribute's encoding
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class AttributeEncoding:
    """The encoding ``A_j`` of one attribute, with the names of the columns it produces.

    ``kind`` is one of :data:`ENCODINGS` or ``"custom"`` (any ``d x k`` matrix the caller supplies).
    """

    attribute: str
    kind: str
    matrix: np.ndarray
    column_names: tuple[str, ...]

    @classmethod
    def build(cls, attribute: str, levels: int, kind: str, positive: int | None = None) -> AttributeEncoding:
        try:
            return cls._build(attribute, levels, kind, positive)
        except EncodingError as exc:
            raise EncodingError(f"attribute {attribute!r}: {exc}") from None

    @classmethod
    def _build(cls, attribute: str, levels: int, kind: str, positive: int | None) -> AttributeEncoding:
        if kind == "one_hot":
            matrix, names = one_hot(levels), tuple(f"{attribute}={s}" for s in range(levels))
        elif kind == "reduced_one_hot":
            matrix, names = reduced_one_hot(levels), tuple(f"{attribute}={s}" for s in range(1, levels))
        elif kind == "scalar":
            matrix, names = scalar(levels), (attribute,)
        elif kind == "binary_pm1":
            matrix, names = binary_pm1(levels, positive), (attribute,)
        else:
            raise EncodingError(f"encoding of {attribute!r} must be one of {ENCODINGS} or a matrix, got {kind!r}")
        return cls(attribute, kind, matrix, names)

    @classmethod
    def custom(cls, attribute: str, levels: int, matrix: object) -> AttributeEncoding:
        array = np.array(matrix, dtype=float)
        if array.ndim == 1:
            array = array[None, :]
        if array.ndim != 2 or array.shape[1] != levels or not np.all(np.isfinite(array)):
            raise EncodingError(
                f"custom encoding of {attribute!r} must be a finite d x {levels} matrix, got shape {array.shape}"
            )
        names = (attribute,) if array.shape[0] == 1 else tuple(f"{attribute}[{i}]" for i in range(array.shape[0]))
        return cls(attribute, "custom", array, names)

    @property
    def width(self) -> int:
        return self.matrix.shape[0]

    @property
    def levels(self) -> int:
        return self.matrix.shape[1]

    @property
    def is_one_hot(self) -> bool:
        """One-hot style: every level encodes to a vector with at most one entry, equal to 1 (Prop. 3.1's ``w``)."""
        return self.kind in ("one_hot", "reduced_one_hot")

    @property
    def squared_norm_bound(self) -> float:
        """``max_s ||A e_s||^2``: the largest squared norm this attribute's block can have (tight)."""
        if self.width == 0:
            return 0.0
        return float(np.max(np.sum(self.matrix**2, axis=0)))

    def encode(self, codes: np.ndarray) -> np.ndarray:
        """Rows ``(A e_{code})^T`` for integer codes: shape ``(n, width)``."""
        return self.matrix[:, codes].T

    def exact_matrix(self) -> list[list[Fraction]]:
        """``A`` as exact rationals (``width`` rows of ``levels`` entries): what the float matrix stands for.

        The scalar encoding is ``2 s / (k - 1) - 1`` exactly (its floats, e.g. ``-0.33333333333333337``, are within
        an ulp of it); one-hot and ``{-1, +1}`` entries are exact floats already; a custom matrix is read at the
        exact binary value of each float, which must have a denominator of at most ``MAX_EXACT_DENOMINATOR``
        (integers, halves, quarters...), otherwise :class:`EncodingError`."""
        if self.kind == "scalar":
            k = self.levels
            return [[Fraction(0)] if k == 1 else [Fraction(2 * s, k - 1) - 1 for s in range(k)]]
        exact = [[Fraction(float(x)) for x in row] for row in self.matrix]
        too_fine = [float(x) for row in exact for x in row if x.denominator > MAX_EXACT_DENOMINATOR]
        if too_fine:
            raise EncodingError(
                f"the encoding of {self.attribute!r} has entries such as {too_fine[0]!r} that are not rationals with a "
                f"denominator of at most 2^20; releases with exact integer noise need such entries"
            )
        return exact


# --------------------------------------------------------------------------------------------------
# the design
# --------------------------------------------------------------------------------------------------
class DesignEncoding:
    """Which attributes are features and target, how each is encoded, and what the encoded columns are called.

    Parameters
    ----------
    domain: the table's domain.
    features: feature attributes in design order; ``None`` means every attribute of the domain except the target.
    target: the target attribute.
    task: ``"linear"`` (target scalar in ``[-1, 1]``) or ``"logistic"`` (target in ``{-1, +1}``).
    intercept: prepend a constant column 1 to ``X`` in the Gram matrix ``Z^T Z`` (and count it in the norm
        bound). ``False`` reproduces the paper's protocol.
    overrides: ``{attribute: encoding}`` where encoding is a name from :data:`ENCODINGS`, a ``d x k`` matrix, or an
        :class:`AttributeEncoding`. Overrides win over the default rule.
    positive_level: for a logistic target with more than 2 levels, the level that is the positive class.

    Layout. :meth:`encode` returns ``X`` *without* the intercept column (scikit-learn convention: ``predict(X) =
    X coef_ + intercept_``). The Gram matrix ``Z^T Z`` of :mod:`estimators.central.sufficient_stats` has the columns
    :attr:`gram_names`: the intercept (if any), then :attr:`feature_names`, then the target.
    """

    def __init__(
        self,
        domain: Domain,
        features: Sequence[str] | None,
        target: str,
        task: str = "linear",
        intercept: bool = True,
        overrides: Mapping[str, object] | None = None,
        positive_level: int | None = None,
    ) -> None:
        if not isinstance(domain, Domain):
            raise EncodingError(f"domain must be a workloads.domain.Domain, got {type(domain).__name__}")
        if task not in TASKS:
            raise EncodingError(f"task must be one of {TASKS}, got {task!r}")
        if not isinstance(intercept, bool):
            raise EncodingError(f"intercept must be True or False, got {intercept!r}")
        if not isinstance(target, str) or target not in domain:
            raise EncodingError(f"target {target!r} is not a column of the domain {list(domain.names)}")
        if features is None:
            features = [name for name in domain.names if name != target]
        if isinstance(features, str):
            raise EncodingError(f"features must be a list of column names, got the string {features!r}")
        features = list(features)
        if not features:
            raise EncodingError("features must name at least one column")
        unknown = [f for f in features if not isinstance(f, str) or f not in domain]
        if unknown:
            raise EncodingError(f"features {unknown} are not columns of the domain {list(domain.names)}")
        if target in features:
            raise EncodingError(f"target {target!r} must not be among the features")
        repeated = sorted({f for f in features if features.count(f) > 1})
        if repeated:
            raise EncodingError(f"features {repeated} are listed more than once")
        overrides = dict(overrides or {})
        bad = [name for name in overrides if name not in features and name != target]
        if bad:
            raise EncodingError(f"overrides name {bad}, which are neither features nor the target")
        if positive_level is not None and task != "logistic":
            raise EncodingError("positive_level only applies to task='logistic'")

        self.domain = domain
        self.task = task
        self.intercept = intercept
        self.target = target
        self.features: tuple[str, ...] = tuple(features)
        self.feature_encodings: tuple[AttributeEncoding, ...] = tuple(
            self._encoding_for(name, overrides.get(name), is_target=False, positive=None) for name in features
        )
        self.target_encoding = self._encoding_for(
            target, overrides.get(target), is_target=True, positive=positive_level
        )
        if self.target_encoding.width != 1:
            raise EncodingError(
                f"the target {target!r} must encode to one column, its encoding gives {self.target_encoding.width}"
            )
        if task == "logistic" and not np.all(np.abs(self.target_encoding.matrix) == 1.0):
            raise EncodingError(
                f"a logistic target must encode every level to -1 or +1 (Prop. 3.4 uses y^2 = 1); "
                f"overrides[{target!r}] gives {self.target_encoding.matrix.ravel().tolist()}"
            )

    # construction helpers ----------------------------------------------------------------------
    def _encoding_for(self, name: str, spec: object, *, is_target: bool, positive: int | None) -> AttributeEncoding:
        attribute = self.domain[name]
        if spec is None:
            if is_target:
                kind = "binary_pm1" if self.task == "logistic" else "scalar"
            else:
                kind = "reduced_one_hot" if attribute.kind == "categorical" else "scalar"
            return AttributeEncoding.build(name, attribute.size, kind, positive if kind == "binary_pm1" else None)
        if isinstance(spec, AttributeEncoding):
            if spec.attribute != name or spec.levels != attribute.size:
                raise EncodingError(
                    f"overrides[{name!r}] encodes {spec.attribute!r} with {spec.levels} levels; "
                    f"{name!r} has {attribute.size}"
                )
            return spec
        if isinstance(spec, str):
            if spec == "binary_pm1":
                return AttributeEncoding.build(name, attribute.size, spec, positive if is_target else None)
            return AttributeEncoding.build(name, attribute.size, spec)
        return AttributeEncoding.custom(name, attribute.size, spec)

    # serialisation -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        """JSON-ready description (stored with a release so its statistics can be read back)."""

        def spec(enc: AttributeEncoding) -> object:
            return enc.matrix.tolist() if enc.kind == "custom" else enc.kind

        encodings = {enc.attribute: spec(enc) for enc in self.attribute_encodings}
        positive = None
        if self.target_encoding.kind == "binary_pm1":
            positive = int(np.argmax(self.target_encoding.matrix[0]))
        return {
            "features": list(self.features),
            "target": self.target,
            "task": self.task,
            "intercept": self.intercept,
            "encodings": {name: kind for name, kind in encodings.items() if name != self.target or positive is None},
            "positive_level": positive,
        }

    @classmethod
    def from_dict(cls, domain: Domain, data: Mapping[str, object]) -> DesignEncoding:
        """Inverse of :meth:`to_dict`."""
        missing = [key for key in ("features", "target", "task", "intercept") if key not in data]
        if missing:
            raise EncodingError(f"design description lacks {missing}")
        return cls(
            domain,
            data["features"],
            data["target"],
            data["task"],
            data["intercept"],
            overrides=data.get("encodings") or {},
            positive_level=data.get("positive_level"),
        )

    # names and layout --------------------------------------------------------------------------
    @property
    def feature_names(self) -> tuple[str, ...]:
        """Names of the columns of ``X`` (no intercept), e.g. ``("age", "workclass=1", ...)``."""
        return tuple(n for enc in self.feature_encodings for n in enc.column_names)

    @property
    def gram_names(self) -> tuple[str, ...]:
        """Names of the rows/columns of ``Z^T Z``: intercept (if any), features, target."""
        head = (INTERCEPT_NAME,) if self.intercept else ()
        return head + self.feature_names + (self.target,)

    @property
    def n_features(self) -> int:
        """Number of columns of ``X`` (without the intercept)."""
        return sum(enc.width for enc in self.feature_encodings)

    @property
    def attribute_encodings(self) -> tuple[AttributeEncoding, ...]:
        """Feature encodings then the target encoding, in Gram order."""
        return self.feature_encodings + (self.target_encoding,)

    def gram_blocks(self) -> tuple[tuple[AttributeEncoding, slice], ...]:
        """Each attribute's encoding with the slice of ``Z^T Z`` rows/columns it occupies."""
        start = 1 if self.intercept else 0
        blocks = []
        for enc in self.attribute_encodings:
            blocks.append((enc, slice(start, start + enc.width)))
            start += enc.width
        return tuple(blocks)

    def required_marginals(self) -> tuple[tuple[str, ...], ...]:
        """The marginals Prop. 3.2 needs: every 1-way marginal and every pair, axes in design order."""
        names = self.features + (self.target,)
        singles = tuple((n,) for n in names)
        pairs = tuple((names[a], names[b]) for a in range(len(names)) for b in range(a + 1, len(names)))
        return singles + pairs

    # norm bounds (Prop. 3.1) -------------------------------------------------------------------
    def row_norm_bound(self, include_target: bool = True) -> float:
        """Prop. 3.1 bound on the l2 norm of an encoded row ``[x, y]`` (``include_target=False``: of ``x`` alone).

        The intercept column is a scalar entry equal to 1 (adds 1 to ``||U||^2``). A one-hot block (reduced or not)
        adds 1 (``c`` in Prop. 3.1). A scalar or custom block adds ``max_s ||A e_s||^2`` (1 for the scalar encoding
        with ``k >= 2``, 0 for ``k = 1``); the ``{-1, +1}`` target adds 1. The bound is attained by some row, so it is
        the tightest bound that holds for every row of the domain.
        """
        encodings = self.attribute_encodings if include_target else self.feature_encodings
        scalar_bounds = [1.0] if self.intercept else []
        scalar_bounds += [math.sqrt(enc.squared_norm_bound) for enc in encodings if not enc.is_one_hot]
        n_one_hot = sum(1 for enc in encodings if enc.is_one_hot and enc.width > 0)
        return row_norm_bound(scalar_bounds, n_one_hot)

    def feature_norm_bound(self) -> float:
        """``||X||`` of the paper: the bound on ``||x||`` (intercept included when present)."""
        return self.row_norm_bound(include_target=False)

    def target_bound(self) -> float:
        """``||Y||`` of the paper: the bound on ``|y|``."""
        return math.sqrt(self.target_encoding.squared_norm_bound)

    # encoding rows -----------------------------------------------------------------------------
    def encode(self, rows: object) -> tuple[np.ndarray, np.ndarray]:
        """Encode integer-coded rows to ``(X, y)``; ``X`` has :attr:`feature_names` columns (no intercept).

        ``rows`` is a pandas DataFrame (columns by name; extra columns ignored), a mapping ``{column: codes}``,
        or a 2-d integer array whose columns follow ``domain.names``.
        """
        columns = self._columns(rows)
        X = np.concatenate([enc.encode(columns[enc.attribute]) for enc in self.feature_encodings], axis=1)
        y = self.target_encoding.encode(columns[self.target])[:, 0]
        return X, y

    def encode_features(self, rows: object) -> np.ndarray:
        """Encode only the features (the target column may be absent): ``X`` for :meth:`predict`."""
        columns = self._columns(rows, need_target=False)
        return np.concatenate([enc.encode(columns[enc.attribute]) for enc in self.feature_encodings], axis=1)

    def _columns(self, rows: object, need_target: bool = True) -> dict[str, np.ndarray]:
        needed = self.features + ((self.target,) if need_target else ())
        if isinstance(rows, np.ndarray):
            if rows.ndim != 2 or rows.shape[1] != len(self.domain):
                raise EncodingError(
                    f"rows as an array must be 2-d with {len(self.domain)} columns (domain order), got {rows.shape}"
                )
            raw = {name: rows[:, i] for i, name in enumerate(self.domain.names)}
        elif hasattr(rows, "columns") or isinstance(rows, Mapping):
            keys = list(rows.columns) if hasattr(rows, "columns") else list(rows)
            missing = [n for n in needed if n not in keys]
            if missing:
                raise EncodingError(f"rows lack the column(s) {missing}")
            raw = {n: np.asarray(rows[n]) for n in needed}
        else:
            raise EncodingError(f"rows must be a DataFrame, a mapping or a 2-d array, got {type(rows).__name__}")
        out: dict[str, np.ndarray] = {}
        for name in needed:
            out[name] = _as_codes(name, raw[name], self.domain[name].size)
        return out


def _as_codes(name: str, values: np.ndarray, size: int) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim != 1:
        raise EncodingError(f"column {name!r} must be 1-d, got shape {values.shape}")
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
            raise EncodingError(f"column {name!r} must hold integer codes")
    elif values.dtype.kind not in "iub":
        raise EncodingError(f"column {name!r} must hold integer codes, got dtype {values.dtype}")
    codes = values.astype(np.int64)
    if codes.size and (codes.min() < 0 or codes.max() >= size):
        raise EncodingError(f"column {name!r} has codes outside 0..{size - 1}")
    return codes
