"""Public binning specifications: how a raw table becomes integer codes 0..size-1.

The bins must be public (fixed in advance, never computed from the private data), otherwise the
domain itself leaks information. A spec is a YAML (or JSON) file::

    format:                    # how to read the raw file (all optional)
      header: false            # the file has no header line ...
      names: [age, workclass, ...]   # ... so these are its column names
      comment: "|"             # lines starting with this are skipped (adult.test's preamble)
      strip: true              # strip spaces around values
    columns:                   # the columns to keep, in this order
      age: {kind: ordinal, edges: [17, 25, 35, 45, 55, 65, 91]}
      workclass: {kind: categorical, values: [Private, Self-emp-not-inc, "?"]}
      income: {kind: categorical, values: ["<=50K", ">50K"], strip_suffix: "."}

Numeric columns use ``edges`` e_0 < e_1 < ... < e_k: code i means e_i <= x < e_{i+1}, except that
the last bin also holds x = e_k; values outside [e_0, e_k] are an error (write ``-.inf`` / ``.inf``
as outer edges to catch everything). Categorical columns list their ``values`` in code order;
``strip_suffix`` removes a trailing string first (``adult.test`` writes ``>50K.``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from workloads.code_values import interval_label
from workloads.domain import Attribute, Domain


class BinningError(ValueError):
    """A spec that cannot be used, or a raw value it cannot code; the message names the column."""


@dataclass(frozen=True)
class ColumnBins:
    name: str
    kind: str
    edges: tuple[float, ...] = ()
    values: tuple[str, ...] = ()
    strip_suffix: str = ""

    @property
    def size(self) -> int:
        return len(self.edges) - 1 if self.edges else len(self.values)

    @property
    def labels(self) -> tuple[str, ...]:
        """What each code stands for: the category's name, or the bin as an interval (``[25, 30)``;
        the last bin is closed, ``[80, 100]``), written by :func:`workloads.code_values.interval_label`, which
        :func:`~workloads.code_values.label_value` reads back."""
        if not self.edges:
            return self.values
        last = len(self.edges) - 2
        return tuple(interval_label(a, b, closed=i == last)
                     for i, (a, b) in enumerate(zip(self.edges, self.edges[1:], strict=False)))


@dataclass(frozen=True)
class BinningSpec:
    columns: tuple[ColumnBins, ...]
    header: bool = True
    names: tuple[str, ...] = ()
    comment: str | None = None
    strip: bool = True

    def domain(self) -> Domain:
        return Domain(tuple(Attribute(c.name, c.size, c.kind) for c in self.columns))


#: Public binning specs shipped with Marginalia: ``--bins NAME`` finds ``SHIPPED_SPECS / NAME.yml``.
SHIPPED_SPECS = Path(__file__).resolve().parents[1] / "specs"


def shipped_specs() -> list[str]:
    return sorted(p.stem for p in SHIPPED_SPECS.glob("*.yml"))


def resolve_spec(path: Path) -> Path:
    """``path`` if it is a file; otherwise the shipped spec of that name (``adult-uci``,
    ``adult-uci.yml`` or ``specs/adult-uci.yml`` from any directory), or a :class:`BinningError`."""
    if path.is_file():
        return path
    shipped = SHIPPED_SPECS / (path.name if path.suffix in (".yml", ".yaml", ".json") else f"{path.name}.yml")
    if shipped.is_file():
        return shipped
    raise BinningError(f"binning spec {path} is not a file, nor the name of a shipped spec "
                       f"({', '.join(shipped_specs()) or 'none'})")


def load_spec(path: Path) -> BinningSpec:
    """Read a spec file, or a shipped spec by name (:func:`resolve_spec`)."""
    path = resolve_spec(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise BinningError(f"cannot read binning spec {path}: {exc.strerror}") from None
    try:
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise BinningError(f"binning spec {path} is not valid {path.suffix.lstrip('.') or 'YAML'}: {exc}") from None
    return parse_spec(raw, source=str(path))


def parse_spec(raw: object, source: str = "spec") -> BinningSpec:
    if not isinstance(raw, dict) or not isinstance(raw.get("columns"), dict) or not raw["columns"]:
        raise BinningError(f"{source}: expected a mapping with a non-empty 'columns' mapping")
    fmt = raw.get("format") or {}
    if not isinstance(fmt, dict):
        raise BinningError(f"{source}: 'format' must be a mapping")
    columns = tuple(_parse_column(name, entry, source) for name, entry in raw["columns"].items())
    names = tuple(str(n) for n in fmt.get("names", ()))
    header = bool(fmt.get("header", True))
    if not header and not names:
        raise BinningError(f"{source}: format.header is false, so format.names must list the file's columns")
    return BinningSpec(columns, header=header, names=names, comment=fmt.get("comment"),
                       strip=bool(fmt.get("strip", True)))


def _parse_column(name: str, entry: object, source: str) -> ColumnBins:
    where = f"{source}, column {name!r}"
    if not isinstance(entry, dict):
        raise BinningError(f"{where}: expected a mapping with 'kind' and 'edges' or 'values'")
    kind = entry.get("kind", "categorical" if "values" in entry else "ordinal")
    if kind not in ("categorical", "ordinal"):
        raise BinningError(f"{where}: kind must be 'categorical' or 'ordinal', got {kind!r}")
    if "edges" in entry:
        edges = entry["edges"]
        if not isinstance(edges, list) or len(edges) < 2 or not all(_is_number(e) for e in edges):
            raise BinningError(f"{where}: edges must be a list of at least two numbers")
        edges = tuple(float(e) for e in edges)
        if any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
            raise BinningError(f"{where}: edges must be strictly increasing, got {list(edges)}")
        return ColumnBins(name, kind, edges=edges)
    values = entry.get("values")
    if not isinstance(values, list) or not values:
        raise BinningError(f"{where}: give either 'edges' (numeric bins) or a non-empty 'values' list")
    values = tuple(str(v) for v in values)
    if len(set(values)) != len(values):
        raise BinningError(f"{where}: values contain duplicates")
    return ColumnBins(name, kind, values=values, strip_suffix=str(entry.get("strip_suffix", "")))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def apply_spec(spec: BinningSpec, frame: pd.DataFrame, lines: Sequence[int] | None = None) -> np.ndarray:
    """Code a chunk of raw rows; returns an int64 array ``rows x len(spec.columns)``.

    ``lines`` are the file line numbers of the rows, for error messages (default: 2, 3, ...)."""
    lines = np.arange(2, 2 + len(frame)) if lines is None else np.asarray(lines)
    missing = [c.name for c in spec.columns if c.name not in frame.columns]
    if missing:
        raise BinningError(
            f"raw file lacks column(s) {missing} named in the binning spec; it has {list(frame.columns)}"
        )
    out = np.empty((len(frame), len(spec.columns)), dtype=np.int64)
    problems = []
    for j, column in enumerate(spec.columns):
        raw = frame[column.name].astype(str)
        if spec.strip:
            raw = raw.str.strip()
        codes, bad, expected = _code_column(column, raw)
        if bad.any():
            problems.append(f"column {column.name!r}: a value cannot be coded (expected {expected}), first on "
                            f"{offending_lines(bad, lines)}")
        else:
            out[:, j] = codes
    if problems:  # every column at fault, so that one round of fixes is enough
        raise BinningError("; ".join(problems))
    return out


def _code_column(column: ColumnBins, raw: pd.Series) -> tuple[np.ndarray, np.ndarray, str]:
    """``(codes, bad, expected)``: the codes of a column's raw strings, which rows cannot be coded, and what the
    spec expects there (for the message)."""
    if column.edges:
        numbers = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
        edges = np.asarray(column.edges)
        codes = np.searchsorted(edges, numbers, side="right") - 1
        codes = np.where(numbers == edges[-1], len(edges) - 2, codes)
        bad = np.isnan(numbers) | (codes < 0) | (codes >= len(edges) - 1)
        return codes, bad, f"a number in [{edges[0]:g}, {edges[-1]:g}]"
    values = raw
    if column.strip_suffix:
        values = values.str.removesuffix(column.strip_suffix)
    lookup = {v: i for i, v in enumerate(column.values)}
    mapped = values.map(lookup)
    bad = mapped.isna().to_numpy()
    return mapped.fillna(0).to_numpy(dtype=np.int64), bad, f"one of {list(column.values)}"


def offending_lines(bad: np.ndarray, lines: np.ndarray, shown: int = 5) -> str:
    """``line 12`` or ``lines 12, 40``: the file lines of the first ``shown`` rows flagged ``bad``. Never the values:
    an error may name a column and a line, not what a cell holds (docs/privacy.md 1.3)."""
    first = [str(int(lines[p])) for p in np.flatnonzero(bad)[:shown]]
    return f"line{'s' if len(first) > 1 else ''} {', '.join(first)}"


