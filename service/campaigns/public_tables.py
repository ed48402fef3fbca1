"""Public tables: unlabeled rows a steward declares public, stored in the database, readable as they are.

``marginalia public load NAME --csv FILE`` takes numeric columns as they are; with ``--domain`` (a private-pgm domain
JSON ``{column: size}``) the named columns are coded ``0..size-1`` and checked; with ``--bins`` (a public binning spec,
:mod:`service.binning`) the named columns are coded through it. A public table has no budget and spends nothing: its
rows may be returned to analysts and stewards (paged), and campaigns use them for public scaling, Alg. 1's norm
bound, Remark 11's ``X^T X`` and the link constants of the Stein-lemma GLMs (docs/campaigns.md).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from db.engine import transaction
from db.models import PublicTable, utcnow
from db.public_rows import create_public_rows, public_rows_table_name, read_public_rows
from service.campaigns.types import CampaignInfo
from service.errors import Conflict, InvalidInput, NotFound
from workloads.binning import BinningError, apply_spec, load_spec

MAX_NAME_LENGTH = 200
#: The most rows one page of ``GET /public-tables/{name}/rows`` returns.
MAX_PAGE_ROWS = 10_000


@dataclass(frozen=True)
class PublicColumn:
    """A column: ``numeric`` (as loaded) or ``coded`` (``size`` codes; ``labels`` of its values or bins)."""

    name: str
    kind: str
    size: int | None = None
    labels: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "kind": self.kind}
        if self.size is not None:
            out["size"] = self.size
        if self.labels is not None:
            out["labels"] = list(self.labels)
        return out

    @classmethod
    def from_json(cls, data: dict) -> PublicColumn:
        labels = data.get("labels")
        return cls(data["name"], data["kind"], data.get("size"), None if labels is None else tuple(labels))


@dataclass(frozen=True)
class PublicTableInfo:
    id: int
    name: str
    columns: tuple[PublicColumn, ...]
    rows: int
    source: str
    created_at: datetime
    row_table: str

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "rows": self.rows, "columns": [c.to_json() for c in self.columns],
                "source": self.source, "created_at": self.created_at.isoformat()}


def _info(row: PublicTable) -> PublicTableInfo:
    columns = tuple(PublicColumn.from_json(c) for c in json.loads(row.columns_json))
    return PublicTableInfo(row.id, row.name, columns, int(row.row_count), row.source, row.created_at, row.row_table)


def check_name(name: object, what: str = "public table name") -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH or name != name.strip():
        raise InvalidInput(f"{what} must be 1–{MAX_NAME_LENGTH} characters without surrounding spaces, got {name!r}",
                           code="invalid_name")
    return name


def read_public_csv(csv_path: Path, domain_path: Path | None = None,
                    bins_path: Path | None = None) -> tuple[list[PublicColumn], np.ndarray]:
    """The columns and the float matrix of a public CSV (see the module docstring); errors name column and line."""
    try:
        frame = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise InvalidInput(f"cannot read {csv_path}: {error}", code="invalid_csv") from None
    if frame.shape[1] == 0 or frame.shape[0] == 0:
        raise InvalidInput(f"{csv_path}: a public table needs a header and at least one row", code="invalid_csv")
    with Path(csv_path).open(newline="", encoding="utf-8", errors="replace") as handle:
        header = next(csv.reader(handle), [])
    duplicated = sorted({c for c in header if header.count(c) > 1})
    if duplicated:
        raise InvalidInput(f"{csv_path}: the header names column(s) {duplicated} more than once", code="invalid_csv")
    coded = _coded_columns(frame, csv_path, domain_path, bins_path)
    columns, values = [], np.empty(frame.shape, dtype=float)
    for j, name in enumerate(frame.columns):
        if name in coded:
            column, codes = coded[name]
            columns.append(column)
            values[:, j] = codes
            continue
        raw = frame[name].str.strip()
        numbers = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(numbers)
        if bad.any():
            line = int(np.argmax(bad)) + 2
            raise InvalidInput(f"{csv_path}, line {line}: column {name!r} holds {raw.iloc[line - 2]!r}, not a finite "
                               "number (code it with domain or bins, or leave it out)", code="invalid_value")
        columns.append(PublicColumn(name, "numeric"))
        values[:, j] = numbers
    return columns, values


def _coded_columns(frame: pd.DataFrame, csv_path: Path, domain_path: Path | None,
                   bins_path: Path | None) -> dict[str, tuple[PublicColumn, np.ndarray]]:
    out: dict[str, tuple[PublicColumn, np.ndarray]] = {}
    if domain_path is not None:
        try:
            sizes = json.loads(Path(domain_path).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise InvalidInput(f"cannot read {domain_path}: {error}", code="invalid_domain") from None
        if not isinstance(sizes, dict):
            raise InvalidInput(f"{domain_path}: a domain must be {{column: size}}", code="invalid_domain")
        for name, size in sizes.items():
            if name not in frame.columns:
                raise InvalidInput(f"{domain_path} names column {name!r}, which {csv_path} lacks "
                                   f"(columns: {list(frame.columns)})", code="column_mismatch")
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise InvalidInput(f"{domain_path}: column {name!r} needs a positive integer size",
                                   code="invalid_domain")
            codes = pd.to_numeric(frame[name].str.strip(), errors="coerce").to_numpy(dtype=float)
            bad = ~(np.isfinite(codes) & (codes == np.round(codes)) & (codes >= 0) & (codes < size))
            if bad.any():
                line = int(np.argmax(bad)) + 2
                raise InvalidInput(f"{csv_path}, line {line}: column {name!r} holds {frame[name].iloc[line - 2]!r}, "
                                   f"not a code 0..{size - 1}", code="invalid_value")
            out[name] = (PublicColumn(name, "coded", size), codes)
    if bins_path is not None:
        try:
            spec = load_spec(Path(bins_path))
            codes = apply_spec(spec, frame)
        except BinningError as error:
            raise InvalidInput(f"{bins_path}: {error}", code="invalid_spec") from None
        for j, column in enumerate(spec.columns):
            if column.name in out:
                raise InvalidInput(f"column {column.name!r} is coded by both domain and bins", code="invalid_spec")
            out[column.name] = (PublicColumn(column.name, "coded", column.size, tuple(column.labels)), codes[:, j])
    return out


def check_magnitudes(table: str, names: Sequence[str], values: np.ndarray) -> None:
    """Refuse, naming the column, public values too large for the statistics campaigns compute from them.

    A campaign takes from its public table the columns' means and standard deviations (the public scaling), the
    rows' norms (Alg. 1's norm bound), ``X^T X`` (Remark 11) and the range of a value (LDP-AVG's bounds), all in
    float64. Each is finite when ``sum (2 x)^2`` over every value is: a row's squared norm and a mean's square are at
    most the total, a product ``|x_i x_j|`` (Gram entries, by Cauchy-Schwarz their sums too) at most the larger
    square, and a squared deviation ``(x - mean)^2`` or range at most ``(2 max |x|)^2``. A table holding ``1e308``
    is finite but its statistics are not (the standard deviation was ``inf``, stored as the scale ``null``, and
    every report was then refused with a raw ``TypeError``), so such a table is refused when it is registered and
    when a campaign is created from it."""
    with np.errstate(over="ignore", invalid="ignore"):
        doubled = 2.0 * np.asarray(values, dtype=float)
        squares = np.sum(np.square(doubled), axis=0)
        total = np.sum(squares)
    if np.isfinite(total):
        return
    bad = [j for j in range(len(names)) if not np.isfinite(squares[j])]
    j = bad[0] if bad else int(np.argmax(squares))
    column = np.asarray(values, dtype=float)[:, j]
    finite = np.isfinite(column)
    if not finite.all():
        row = int(np.argmin(finite))
        raise InvalidInput(f"public table {table!r}: column {names[j]!r} holds {column[row]:g} (data row "
                           f"{row + 1}), not a finite number", code="invalid_value")
    row = int(np.argmax(np.abs(column)))
    raise InvalidInput(f"public table {table!r}: column {names[j]!r} holds {column[row]:g} (data row {row + 1}), "
                       "too large for the statistics a campaign computes from it (its mean, standard deviation, "
                       "norms and X^T X overflow float64); rescale the column or leave it out", code="invalid_value")


def load_public_csv(engine: Engine, name: str, csv_path: Path, domain_path: Path | None = None,
                    bins_path: Path | None = None, principal: str = "cli") -> PublicTableInfo:
    """Register a public table: its metadata row and its rows' table, in one transaction."""
    columns, values = read_public_csv(Path(csv_path), domain_path, bins_path)
    return store_public_table(engine, name, columns, values, str(csv_path), principal)


def store_public_table(engine: Engine, name: str, columns: Sequence[PublicColumn], values: np.ndarray, source: str,
                       principal: str = "cli") -> PublicTableInfo:
    """Store already-read public columns (``values``: one float column per entry of ``columns``) under ``name``, in
    one transaction (what :func:`load_public_csv` does after reading; the Stein GLM benchmark's generated rows)."""
    check_name(name)
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[1] != len(columns) or values.shape[0] == 0:
        raise InvalidInput(f"public table {name!r}: expected a non-empty matrix of {len(columns)} columns, got "
                           f"shape {values.shape}", code="invalid_value")
    check_magnitudes(name, [c.name for c in columns], values)
    try:
        with transaction(engine) as session:
            if session.execute(select(PublicTable.id).where(PublicTable.name == name)).first() is not None:
                raise Conflict(f"a public table named {name!r} exists already", code="public_table_exists")
            row = PublicTable(name=name, columns_json=json.dumps([c.to_json() for c in columns]), row_table="pending",
                              row_count=int(values.shape[0]), source=source, principal=principal,
                              created_at=utcnow())
            session.add(row)
            session.flush()
            row.row_table = public_rows_table_name(row.id)
            create_public_rows(session.connection(), row.row_table, values)
            session.flush()
            return _info(row)
    except IntegrityError:
        raise Conflict(f"a public table named {name!r} exists already", code="public_table_exists") from None


def list_public_tables(engine: Engine) -> list[PublicTableInfo]:
    with transaction(engine) as session:
        return [_info(r) for r in session.execute(select(PublicTable).order_by(PublicTable.name)).scalars()]


def get_public_table(engine: Engine, name: str) -> PublicTableInfo:
    with transaction(engine) as session:
        row = session.execute(select(PublicTable).where(PublicTable.name == name)).scalar_one_or_none()
        if row is None:
            raise NotFound(f"no public table named {name!r}", code="public_table_not_found")
        return _info(row)


def public_rows(engine: Engine, name: str, offset: int = 0, limit: int = MAX_PAGE_ROWS) -> tuple[PublicTableInfo,
                                                                                                   np.ndarray]:
    """A page of rows (``limit`` at most :data:`MAX_PAGE_ROWS`), in load order."""
    for label, value in (("offset", offset), ("limit", limit)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInput(f"{label} must be a non-negative integer, got {value!r}", code="invalid_parameter")
    if limit > MAX_PAGE_ROWS:
        raise InvalidInput(f"limit must be at most {MAX_PAGE_ROWS}, got {limit}", code="invalid_parameter")
    info = get_public_table(engine, name)
    with engine.connect() as connection:
        return info, read_public_rows(connection, info.row_table, len(info.columns), offset, limit)


def public_matrix(engine: Engine, info: PublicTableInfo, columns: Sequence[str]) -> np.ndarray:
    """Every row of ``columns`` (in that order) of a public table, for estimation; refused, naming the column, when
    their statistics would not be finite (:func:`check_magnitudes`)."""
    unknown = [c for c in columns if c not in info.column_names]
    if unknown:
        raise InvalidInput(f"public table {info.name!r} has no column {unknown[0]!r} (columns: {info.column_names})",
                           code="unknown_column")
    with engine.connect() as connection:
        rows = read_public_rows(connection, info.row_table, len(info.columns))
    matrix = rows[:, [info.column_names.index(c) for c in columns]]
    check_magnitudes(info.name, list(columns), matrix)  # a table stored before the check existed
    return matrix


def rows_json(info: PublicTableInfo, rows: np.ndarray, offset: int) -> dict[str, object]:
    """A page as JSON: ``{"columns", "offset", "rows", "total"}`` (rows as lists, codes as integers)."""
    coded = [c.kind == "coded" for c in info.columns]
    out = [[int(v) if is_coded else float(v) for v, is_coded in zip(row, coded, strict=True)]
           for row in rows.tolist()]
    return {"name": info.name, "columns": info.column_names, "offset": offset, "total": info.rows,
            "rows": out, "complete": offset + len(out) >= info.rows}


def campaign_public_rows(engine: Engine, campaign: CampaignInfo) -> np.ndarray | None:
    """The campaign's public table's feature columns, transformed as the devices transform features (``None``: no
    public table)."""
    if campaign.public_table is None:
        return None
    table = get_public_table(engine, campaign.public_table)
    return campaign.transform.apply(public_matrix(engine, table, campaign.features))


def campaign_public_labels(engine: Engine, campaign: CampaignInfo) -> np.ndarray | None:
    """The campaign's target as its public table holds it (``None``: no public table, no target, or the table has no
    column of the target's name): public, so the verdict may judge the fit's predictions against it."""
    if campaign.public_table is None or campaign.target is None:
        return None
    table = get_public_table(engine, campaign.public_table)
    if campaign.target not in table.column_names:
        return None
    return public_matrix(engine, table, [campaign.target])[:, 0]
