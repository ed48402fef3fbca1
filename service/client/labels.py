"""A column's codes and its public labels, both ways, as the client shows and reads them.

Answers come back with the labels of the table's spec or domain (``[25, 30)``, ``Private``) as ordered categoricals
in code order (:func:`labelled`); a fitted model reads rows holding either codes or those labels (:func:`codes_of`),
so the synthetic rows a release draws can be predicted on as they come. The labels are public: reading them is free.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def labelled(codes: Sequence[int], labels: Sequence[str] | None) -> object:
    """``codes`` as they are, or as their labels (an ordered categorical, in code order)."""
    if not labels:
        return list(codes)
    return pd.Categorical.from_codes(list(codes), categories=list(labels), ordered=True)


def codes_of(name: str, values: object, labels: Sequence[str] | None, size: int) -> np.ndarray:
    """The codes ``0 .. size-1`` of column ``name``'s ``values``: integer codes as they are, labels (strings, or a
    categorical of them) through ``labels``. Anything else is a :class:`ValueError` naming the column and what it
    takes (never the values themselves)."""
    takes = f"codes 0..{size - 1}" + (f" or its labels ({', '.join(map(str, labels[:3]))}...)" if labels else "")
    series = pd.Series(values) if not isinstance(values, pd.Series) else values
    if isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype(object)
    array = series.to_numpy()
    if array.dtype == object and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in array):
        array = array.astype(np.int64)
    if array.dtype.kind in "iub" or (array.dtype.kind == "f" and np.all(np.isfinite(array))
                                     and np.all(array == np.round(array))):
        codes = array.astype(np.int64)
    elif labels:
        lookup = {str(label): code for code, label in enumerate(labels)}
        mapped = [lookup.get(value) if isinstance(value, str) else None for value in array]
        if any(code is None for code in mapped):
            raise ValueError(f"column {name!r} holds values that are neither {takes}")
        codes = np.asarray(mapped, dtype=np.int64)
    else:
        raise ValueError(f"column {name!r} must hold {takes}")
    if codes.size and (codes.min() < 0 or codes.max() >= size):
        raise ValueError(f"column {name!r} holds codes outside 0..{size - 1}")
    return codes
