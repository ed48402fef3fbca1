"""What each code of a column stands for: its label, and the number that label names.

A column holds the codes ``0 .. size-1``. Its public labels (a binning spec's bins ``[25, 30)`` or categories, or the
labels a domain file gives) say what each code means; they are public, so reading a code as its label or its number
is free post-processing. This module is the one place that writes a bin's label (:func:`interval_label`, used by
:mod:`workloads.binning`) and reads it back (:func:`label_value`), so the two cannot drift apart.

The **value** of a code (:func:`code_values`) is the number the column's scale gives it: a bin's midpoint (an
open-ended bin such as ``[65, inf]``: its finite edge), a label that is a number (``"16"``), and for a column without
labels the code itself. A column whose labels are names (``Private``) has no values. A real number on the codes'
scale (a linear model's prediction, say code 7.4) becomes a value by :func:`values_of_codes`: linear between the
values of the two codes around it, and beyond the end codes along the end segments.

numpy only: the client imports it to predict on the data's scale.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

_INTERVAL = re.compile(r"^\[(\S+), (\S+)[)\]]$")


def number_text(value: float) -> str:
    """``value`` as a label writes it: short (``25``, ``0.5``, ``inf``) and exact (the shortest text that reads back
    as the same float, where ``%g``'s six digits would round it)."""
    if value == math.inf:
        return "inf"
    if value == -math.inf:
        return "-inf"
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def interval_label(low: float, high: float, closed: bool) -> str:
    """The label of the bin ``[low, high)`` (``[low, high]`` when ``closed``: a spec's last bin)."""
    return f"[{number_text(low)}, {number_text(high)}{']' if closed else ')'}"


def label_value(label: str) -> float | None:
    """The number a label names: a bin's midpoint, its finite edge when it is open on one side, a number's value;
    None for a name or a bin open on both sides."""
    match = _INTERVAL.match(label)
    if match is None:
        number = _number(label)
        return number if number is not None and math.isfinite(number) else None
    low, high = _number(match.group(1)), _number(match.group(2))
    if low is None or high is None:
        return None
    if math.isfinite(low) and math.isfinite(high):
        return (low + high) / 2
    if math.isfinite(low) or math.isfinite(high):
        return low if math.isfinite(low) else high
    return None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def code_values(labels: Sequence[str] | None, size: int) -> np.ndarray | None:
    """The value of each code of a column of ``size`` codes with these ``labels`` (module docstring): the codes
    themselves without labels; None when a label names no number."""
    if not labels:
        return np.arange(size, dtype=float)
    values = [label_value(str(label)) for label in labels]
    if len(values) != size or any(v is None for v in values):
        return None
    return np.asarray(values, dtype=float)


def values_of_codes(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Real numbers on the codes' scale read as values: linear between neighbouring codes' ``values``, and beyond
    the first and last code along the first and last segments (a single code: its value)."""
    codes = np.asarray(codes, dtype=float)
    if values.size == 1:
        return np.full(codes.shape, float(values[0]))
    inside = np.interp(codes, np.arange(values.size), values)
    below = values[0] + (codes - 0) * (values[1] - values[0])
    last = values.size - 1
    above = values[last] + (codes - last) * (values[last] - values[last - 1])
    return np.where(codes < 0, below, np.where(codes > last, above, inside))
