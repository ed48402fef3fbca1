"""A raw table and its public binning spec, shared by the tests of tables attached where they live (Parquet, SQL):
what the spec codes, and numpy's counts of the same rows coded by ``workloads.binning.apply_spec``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Engine, text

from workloads.binning import apply_spec, parse_spec

SPEC = {"columns": {
    "age": {"kind": "ordinal", "edges": [0, 18, 40, 65, 120]},
    "work": {"values": ["Private", "State-gov", "?"]},
    "income": {"values": ["<=50K", ">50K"], "strip_suffix": "."},
}}


def raw_frame(rows: int, seed: int) -> pd.DataFrame:
    """Raw rows the spec codes: ages up to the closed last edge, categories with spaces and a suffix to strip, and a
    column the spec does not name."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(0, 121, rows).astype(float),
                         "work": rng.choice([" Private", "State-gov ", "?"], rows),
                         "income": rng.choice(["<=50K", ">50K.", ">50K"], rows),
                         "other": rng.integers(0, 3, rows)})


#: The SQL types of :func:`raw_frame`'s columns, for a table of another database (``dataset attach --sql``).
RAW_SQL_TYPES = {"age": "DOUBLE PRECISION", "work": "VARCHAR(40)", "income": "VARCHAR(40)", "other": "INTEGER"}


def sql_table(engine: Engine, frame: pd.DataFrame, table: str, types: dict[str, str] = RAW_SQL_TYPES) -> None:
    """Create ``table`` with the columns ``types`` (name: SQL type) in the database of ``engine`` and insert the
    rows of ``frame`` (which has those columns)."""
    with engine.begin() as connection:
        connection.execute(text(f"CREATE TABLE {table} ({', '.join(f'{c} {t}' for c, t in types.items())})"))
        connection.execute(text(f"INSERT INTO {table} VALUES ({', '.join(f':{c}' for c in types)})"),
                           frame[list(types)].to_dict("records"))


def write_spec(folder: Path, spec: dict[str, object] = SPEC) -> Path:
    path = folder / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def expected_counts(frame: pd.DataFrame, attributes: tuple[str, ...]) -> np.ndarray:
    spec = parse_spec(SPEC)
    codes = apply_spec(spec, frame.astype(str))
    names = [c.name for c in spec.columns]
    shape = tuple(spec.columns[names.index(a)].size for a in attributes)
    index = np.ravel_multi_index([codes[:, names.index(a)] for a in attributes], shape)
    return np.bincount(index, minlength=math.prod(shape)).reshape(shape)


def one_row_per_unit(codes: np.ndarray, names: list[str], units: np.ndarray) -> pd.DataFrame:
    """The codes (rows x ``names``) of the row each unit keeps under ``--privacy-unit`` (docs/privacy.md 1.1),
    computed without SQL: per value of ``units``, the lexicographically smallest code tuple."""
    frame = pd.DataFrame(codes, columns=names)
    frame["__unit"] = units
    return frame.sort_values(["__unit", *names]).drop_duplicates("__unit")[names].reset_index(drop=True)


def unit_frame(rows: int = 400, units: int = 90, seed: int = 5) -> pd.DataFrame:
    """Raw rows (:func:`raw_frame`) with a ``person`` column: about 4.4 rows per unit, some units with one."""
    frame = raw_frame(rows, seed)
    frame["person"] = np.random.default_rng(seed + 1).integers(0, units, rows) * 7 + 1000
    return frame


def coded_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The spec's columns of ``frame``, coded by ``apply_spec`` (without SQL)."""
    spec = parse_spec(SPEC)
    names = [c.name for c in spec.columns]
    return pd.DataFrame(apply_spec(spec, frame[names].astype(str)), columns=names)


def bincount(codes: pd.DataFrame, attributes: tuple[str, ...]) -> np.ndarray:
    """numpy's counts of the coded rows ``codes`` over ``attributes``."""
    sizes = {c.name: c.size for c in parse_spec(SPEC).columns}
    shape = tuple(sizes[a] for a in attributes)
    index = np.ravel_multi_index([codes[a].to_numpy() for a in attributes], shape)
    return np.bincount(index, minlength=math.prod(shape)).reshape(shape)
