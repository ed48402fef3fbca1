"""A linear model fitted on a design's encoding, read on the data's own scale: its columns' codes.

The estimators fit on the encoded design (:mod:`workloads.encodings`): an ordinal feature with ``k`` codes as
``2 s / (k - 1) - 1`` in ``[-1, 1]``, a categorical one as the indicators of its levels but the first, a linear target
with ``K`` codes as ``2 t / (K - 1) - 1``, a logistic target as -1 / +1. The encoding is public, so the same model
reads on the codes at no privacy cost (post-processing), exactly:

* an ordinal feature's coefficient becomes the change **per code** (an encoded ``b`` is ``2 b / (k - 1)`` per code;
  its constant ``-b`` moves into the intercept); a categorical level's stays the change from level 0 to that level;
* a linear target is read in its codes: every coefficient and the intercept are divided by the target's slope
  ``2 / (K - 1)``, after the intercept is shifted by its offset (``t = (K - 1) (y + 1) / 2``); a logistic model stays
  on the log-odds of the positive level;
* the intercept is the prediction (linear: in target codes; logistic: the log-odds) where every feature is at code 0.

In general, per encoded column (a row of an attribute's matrix ``A``): a row that is the indicator of one level
stays that level's indicator; a row affine in the code (``A[s] = alpha + beta s``: the scalar encoding, or any row
over two levels) becomes ``beta b`` per code and ``alpha b`` in the intercept. Any other row (a custom encoding)
has no reading per code (:class:`DataScaleError`).

From a target's codes to its own units (a bin's midpoint, a label's number): :mod:`workloads.code_values`.
numpy only: the client imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from workloads.encodings import AttributeEncoding, DesignEncoding


class DataScaleError(ValueError):
    """A design whose encoding has no reading on the codes (a custom encoding); the message names the attribute."""


@dataclass(frozen=True)
class CodeColumn:
    """What one coefficient multiplies on the codes: ``attribute``'s code itself (``level`` None), or the indicator
    that ``attribute`` is at ``level``."""

    attribute: str
    level: int | None = None

    def values(self, codes: np.ndarray) -> np.ndarray:
        codes = np.asarray(codes)
        return codes.astype(float) if self.level is None else (codes == self.level).astype(float)


@dataclass(frozen=True)
class _Row:
    """One encoded column read on the codes: ``column``, times ``slope``, plus ``offset``."""

    column: CodeColumn
    slope: float
    offset: float


def _read_row(attribute: str, row: np.ndarray) -> _Row:
    ones = np.flatnonzero(row == 1.0)
    if ones.size == 1 and np.count_nonzero(row) == 1 and row.size > 1:
        return _Row(CodeColumn(attribute, int(ones[0])), 1.0, 0.0)
    offset = float(row[0])
    slope = float(row[1] - row[0]) if row.size > 1 else 0.0
    if not np.allclose(row, offset + slope * np.arange(row.size), rtol=0.0, atol=1e-12 * max(1.0, np.abs(row).max())):
        raise DataScaleError(f"the encoding of {attribute!r} is neither affine in its code nor an indicator of a "
                             "level: its coefficients have no reading per code")
    return _Row(CodeColumn(attribute), slope, offset)


def _rows(encoding: AttributeEncoding) -> tuple[_Row, ...]:
    return tuple(_read_row(encoding.attribute, row) for row in encoding.matrix)


def code_columns(design: DesignEncoding) -> tuple[CodeColumn, ...]:
    """What each of :func:`per_code`'s coefficients multiplies, in the order of ``design.feature_names``."""
    return tuple(row.column for encoding in design.feature_encodings for row in _rows(encoding))


def code_matrix(design: DesignEncoding, codes: Mapping[str, np.ndarray]) -> np.ndarray:
    """The matrix :func:`per_code`'s coefficients multiply, from integer codes ``{feature: codes}``."""
    columns = code_columns(design)
    return np.column_stack([column.values(codes[column.attribute]) for column in columns])


def _target(design: DesignEncoding) -> _Row:
    (row,) = _rows(design.target_encoding)
    return row


def per_code(design: DesignEncoding, coef: np.ndarray, intercept: float) -> tuple[np.ndarray, float]:
    """``(coef, intercept)`` of the model on the codes (module docstring), from the encoded ``coef`` (one per
    ``design.feature_names``) and ``intercept``: ``code_matrix(rows) @ coef + intercept`` is the encoded model's
    score (logistic) or its prediction in the target's codes (linear), up to rounding."""
    coef = np.asarray(coef, dtype=float)
    rows = [row for encoding in design.feature_encodings for row in _rows(encoding)]
    if coef.shape != (len(rows),):
        raise DataScaleError(f"expected {len(rows)} coefficients (one per encoded column), got shape {coef.shape}")
    slopes = np.array([row.slope for row in rows])
    offsets = np.array([row.offset for row in rows])
    coded, constant = coef * slopes, float(intercept) + float(coef @ offsets)
    if design.task == "logistic":
        return coded, constant
    target = _target(design)
    if target.slope == 0.0:  # a target with one code: every prediction is that code
        return np.zeros_like(coded), 0.0
    return coded / target.slope, (constant - target.offset) / target.slope


def target_codes(design: DesignEncoding, encoded: np.ndarray) -> np.ndarray:
    """A linear model's predictions on the target's encoded scale, in the target's codes (``t = (y - alpha) /
    beta``; a target with one code: 0)."""
    if design.task != "linear":
        raise DataScaleError("only a linear target is read in its codes; a logistic model predicts levels")
    target = _target(design)
    encoded = np.asarray(encoded, dtype=float)
    if target.slope == 0.0:
        return np.zeros_like(encoded)
    return (encoded - target.offset) / target.slope
