"""The canary tables: one raw table with canaries in its private cells (:mod:`tests.support.canaries`), held in every
engine variant the service can count a table in, then changed where it lives so that its values break the engines'
casts (issue 27, finding 1).

:data:`VARIANTS` maps each engine of :data:`service.data.engines.registry.ENGINES` to the variants built for it; an
engine without an entry fails ``tests/system/test_canaries.py``. Each :class:`Variant` is built healthy
(:meth:`CanaryTables.build`), gets a budget and a small release while healthy (the release-reading routes answer from
it), and is then *tampered* (:meth:`CanaryTables.tamper`): a cell of a column the spec bins as a number now holds a
canary string, a file of a glob is rewritten with another type, a new file of another schema joins the glob. From
then on every scan of it meets a value that breaks a cast: the service must refuse without saying the value.

Besides the variants, :attr:`CanaryTables.healthy` is never tampered (the valid requests succeed on it), and the
folder and databases the sources of ``POST /datasets/attach`` point at hold clean tables and tables that break the
attach check (:data:`ATTACH_TABLES`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import Engine, create_engine, text

from db.engine import make_engine
from service.accounting import accountant
from service.campaigns import campaigns
from service.data import datasets
from service.data.attach.sources import add_source
from service.data.attach.tables import attach_parquet, attach_spark, attach_sql
from service.data.engines.base import DUCKDB, SPARK, SQL
from service.data.engines.store import data_folder
from service.releases import engine as release_engine
from tests.support.canaries import Canaries

#: The public binning spec of the canary table. ``notes``, ``visits`` and ``ssn`` (the privacy unit) are not in it.
SPEC = {"columns": {
    "age": {"kind": "ordinal", "edges": [0, 25, 45, 65, 100]},
    "hours": {"kind": "ordinal", "edges": [0, 20, 40, 60, 100]},
    "sex": {"values": ["F", "M"]},
    "smoker": {"values": ["no", "yes"]},
}}
ROWS = 240
#: The workload of the release each variant gets while healthy: it covers no fit of the suite, so every fit needs a
#: new release, which reads the (tampered) table.
HEALTHY_WORKLOAD = [["sex"], ["smoker"]]
BUDGET = (50.0, 1e-5)


@dataclass(frozen=True)
class Variant:
    """One way of holding the canary table: ``name`` is its dataset, ``engine`` its ``datasets.engine``, ``where``
    says how it is held and ``tamper`` how it is broken (both for the report)."""

    name: str
    engine: str
    where: str
    tamper: str


#: engine -> the variants this suite builds for it (tests/system/test_canaries.py fails on an engine missing here).
VARIANTS: dict[str, tuple[Variant, ...]] = {
    DUCKDB: (
        Variant("duckdb stored", DUCKDB, "dataset load --bins: a Parquet file in the data folder",
                "the stored file rewritten with a canary string in a code column"),
        Variant("duckdb file", DUCKDB, "dataset attach --parquet FILE --privacy-unit ssn",
                "the file rewritten: a canary string in age, an integer outside the spec in hours"),
        Variant("duckdb glob retyped", DUCKDB, "dataset attach --parquet GLOB (two files)",
                "one file rewritten with hours as strings, one a canary"),
        Variant("duckdb glob grown", DUCKDB, "dataset attach --parquet GLOB (two files)",
                "a third file of another schema joins the glob"),
    ),
    SQL: (
        Variant("sql stored", SQL, "dataset load --bins --engine sql: data_<id> in the service database",
                "a code cell holds a canary string (SQLite) or a code outside its domain (PostgreSQL)"),
        Variant("sqlite attached", SQL, "dataset attach --sql SQLITE --privacy-unit ssn",
                "a row updated: a canary string in age, an integer outside the spec in hours"),
        Variant("postgres attached", SQL, "dataset attach --sql POSTGRESQL (numbers kept as text)",
                "a row updated: a canary string in age"),
    ),
    SPARK: (
        Variant("spark", SPARK, "dataset attach --spark parquet.`FOLDER` (two files), Spark in local mode",
                "one file rewritten with hours as strings, one a canary"),
    ),
}
HEALTHY = Variant("duckdb healthy", DUCKDB, "dataset attach --parquet FILE (never tampered)", "none")
#: What the suite's new tables are read by, for the report: the sources of ``POST /datasets/attach`` (and the same
#: files and databases given to ``dataset attach``), and the engines uploads and ``dataset load`` store in.
NEW_TABLES = {"canary lake": DUCKDB, "canary sqlite": SQL, "canary postgres": SQL, "canary spark": SPARK,
              f"new table ({DUCKDB})": DUCKDB, f"new table ({SQL})": SQL}


def canary_frame(canaries: Canaries, rows: int = ROWS, seed: int = 0) -> pd.DataFrame:
    """The raw table: every spec column coded without trouble, canaries in private cells (module docstring)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "age": rng.integers(0, 100, rows).astype(float),
        "hours": rng.integers(0, 100, rows),
        "sex": rng.choice(["F", "M"], rows),
        "smoker": rng.choice(["no", "yes"], rows),
        "notes": rng.choice(["none", "follow-up"], rows).astype(object),
        "visits": rng.integers(0, 9, rows),
        "ssn": [f"0{u:02d}-55-{1000 + u}" for u in rng.integers(0, 80, rows)],
    })
    frame.loc[0, "age"] = canaries.in_bin.value
    frame.loc[1, "notes"] = canaries.note.value
    frame.loc[2, "notes"] = canaries.accented.value
    frame.loc[3, "visits"] = canaries.unspecified.value
    frame.loc[[4, 5], "ssn"] = canaries.ssn.value
    frame.loc[6, "ssn"] = canaries.unit_text.value
    return frame


def bad_cells(canaries: Canaries) -> dict[str, dict[str, object]]:
    """One bad cell of each kind a loader must refuse without showing it: {what: {column: value}}."""
    return {"a canary string in age": {"age": canaries.diagnosis.value},
            "an integer outside the spec in hours": {"hours": canaries.outside.value},
            "an unlisted category": {"sex": canaries.category.value}}


def with_cells(frame: pd.DataFrame, cells: dict[str, object], row: int = 9) -> pd.DataFrame:
    """``frame`` with the ``cells`` ({column: value}) written into row ``row``."""
    out = frame.copy()
    for column, value in cells.items():
        out[column] = out[column].astype(object)
        out.loc[row, column] = value
    return out


def retyped(frame: pd.DataFrame, canaries: Canaries) -> pd.DataFrame:
    """``frame`` with hours as strings, one of them a canary (another file of its glob keeps integers)."""
    out = frame.copy()
    out["hours"] = out["hours"].astype(str)
    out.iloc[0, out.columns.get_loc("hours")] = canaries.diagnosis.value
    return out


def restrung(frame: pd.DataFrame, canaries: Canaries) -> pd.DataFrame:
    """``frame`` with age as strings, one a canary, and one hours outside the spec's range."""
    out = frame.copy()
    out["age"] = out["age"].astype(str)
    out.iloc[0, out.columns.get_loc("age")] = canaries.surname.value
    out.iloc[1, out.columns.get_loc("hours")] = canaries.outside.value
    return out


def write_parquet(frame: pd.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return path


#: The tables the sources of ``POST /datasets/attach`` hold, relative to the lake folder (``parquet``) or as tables
#: of the SQL and Spark sources: a clean one, and ones the attach check must refuse without showing a value.
ATTACH_TABLES = {
    "clean": "attach/clean.parquet",
    "outside": "attach/outside.parquet",  # 123456789 in hours: outside the spec
    "restrung": "attach/restrung.parquet",  # a canary string in age
    "mixed": "attach/mixed/part-*.parquet",  # a glob whose second file has hours as strings (a canary)
}


@dataclass
class CanaryTables:
    """The canary datasets of one service database (``engine``), their sources and foreign databases.

    ``folder`` holds the lake (the Parquet files, a folder source's root) and the attached SQLite database; its name
    holds the location canary, as does the foreign PostgreSQL database's (``postgres_admin``: the admin URL of the
    session's server, None to skip the PostgreSQL variant)."""

    engine: Engine
    folder: Path
    canaries: Canaries
    postgres_admin: str | None = None
    postgres_url: str | None = None
    spark_views: list[str] = field(default_factory=list)
    campaign: str = "canary hours"  # an ldp-avg campaign over hours, which `simulate --table` plays
    releases: dict[str, int] = field(default_factory=dict)  # dataset -> its healthy release
    built: list[Variant] = field(default_factory=list)

    @property
    def lake(self) -> Path:
        return self.folder / "lake"

    @property
    def sqlite_file(self) -> Path:
        return self.folder / f"foreign-{self.canaries.location.value}.db"

    # building ----------------------------------------------------------------------------------------------------
    def build(self, variants: Sequence[Variant]) -> None:
        """``variants`` and :data:`HEALTHY`, each with its budget and release; the sources and what they hold; the
        campaign ``simulate --table`` plays. The PostgreSQL variant is skipped without a server
        (:attr:`postgres_admin`)."""
        frame = canary_frame(self.canaries)
        (self.folder / "spec.json").write_text(json.dumps(SPEC))
        frame.to_csv(self.folder / "raw.csv", index=False)
        builders = {"duckdb stored": self._load, "sql stored": self._load, "duckdb file": self._file,
                    HEALTHY.name: self._file, "duckdb glob retyped": self._glob, "duckdb glob grown": self._glob,
                    "sqlite attached": self._sqlite, "postgres attached": self._postgres, "spark": self._spark}
        for variant in (*variants, HEALTHY):
            if variant.name == "postgres attached" and self.postgres_admin is None:
                continue
            builders[variant.name](variant, frame)
            self.built.append(variant)
            accountant.set_budget(self.engine, variant.name, *BUDGET)
            self.releases[variant.name] = release_engine.release_marginals(
                self.engine, variant.name, "laplace", HEALTHY_WORKLOAD, epsilon=0.5).release_id
        self.built.remove(HEALTHY)  # never tampered
        self._attach_sources(frame, spark=any(v.engine == SPARK for v in variants))
        campaigns.create_campaign(self.engine, self.campaign, "ldp-avg", ["hours"], None, None, 1.0, 0.0,
                                  {"lower": 0, "upper": 3})

    @property
    def spec(self) -> Path:
        return self.folder / "spec.json"

    def _folder(self, variant: Variant) -> Path:
        return self.lake / variant.name.replace(" ", "-")

    def _load(self, variant: Variant, frame: pd.DataFrame) -> None:  # noqa: ARG002 - the CSV holds the frame
        datasets.load_raw_csv(self.engine, variant.name, [self.folder / "raw.csv"], self.spec, store=variant.engine)

    def _file(self, variant: Variant, frame: pd.DataFrame) -> None:
        path = write_parquet(frame, self._folder(variant) / "table.parquet")
        attach_parquet(self.engine, variant.name, [str(path)], self.spec,
                       privacy_unit=None if variant is HEALTHY else "ssn")

    def _glob(self, variant: Variant, frame: pd.DataFrame) -> None:
        self._halves(frame, self._folder(variant))
        attach_parquet(self.engine, variant.name, [str(self._folder(variant) / "part-*.parquet")], self.spec)

    def _sqlite(self, variant: Variant, frame: pd.DataFrame) -> None:
        self._sql_table(f"sqlite:///{self.sqlite_file}", frame, "people")
        attach_sql(self.engine, variant.name, f"sqlite:///{self.sqlite_file}", "people", self.spec,
                   privacy_unit="ssn")

    def _postgres(self, variant: Variant, frame: pd.DataFrame) -> None:
        self.postgres_url = self._postgres_database()
        self._sql_table(self.postgres_url, frame, "people", numbers_as_text=True)
        attach_sql(self.engine, variant.name, self.postgres_url, "people", self.spec)

    def _spark(self, variant: Variant, frame: pd.DataFrame) -> None:
        self._halves(frame, self._folder(variant))
        attach_spark(self.engine, variant.name, f"parquet.`{self._folder(variant)}`", self.spec)

    @staticmethod
    def _halves(frame: pd.DataFrame, folder: Path) -> None:
        write_parquet(frame[: ROWS // 2], folder / "part-0.parquet")
        write_parquet(frame[ROWS // 2:], folder / "part-1.parquet")

    def _sql_table(self, url: str, frame: pd.DataFrame, table: str, *, numbers_as_text: bool = False) -> None:
        number = "VARCHAR(80)" if numbers_as_text else "DOUBLE PRECISION"
        types = {"age": number, "hours": "VARCHAR(80)" if numbers_as_text else "BIGINT", "sex": "VARCHAR(8)",
                 "smoker": "VARCHAR(8)", "notes": "VARCHAR(200)", "visits": "BIGINT", "ssn": "VARCHAR(80)"}
        rows = frame.astype({"age": str, "hours": str}) if numbers_as_text else frame
        foreign = make_engine(url)
        try:
            with foreign.begin() as connection:
                connection.execute(text(f"CREATE TABLE {table} ({', '.join(f'{c} {t}' for c, t in types.items())})"))
                connection.execute(text(f"INSERT INTO {table} VALUES ({', '.join(f':{c}' for c in types)})"),
                                   rows[list(types)].to_dict("records"))
        finally:
            foreign.dispose()

    def _postgres_database(self) -> str:
        name = f"{self.canaries.location.value}_{os.getpid()}"
        admin = create_engine(self.postgres_admin, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        return self.postgres_admin.rsplit("/", 1)[0] + f"/{name}"

    def _attach_sources(self, frame: pd.DataFrame, spark: bool) -> None:
        """The sources ``POST /datasets/attach`` reads through, and what they hold (:data:`ATTACH_TABLES`)."""
        write_parquet(frame, self.lake / ATTACH_TABLES["clean"])
        outside = frame.copy()
        outside.loc[7, "hours"] = self.canaries.outside.value
        write_parquet(outside, self.lake / ATTACH_TABLES["outside"])
        write_parquet(restrung(frame, self.canaries), self.lake / ATTACH_TABLES["restrung"])
        mixed = self.lake / "attach" / "mixed"
        write_parquet(frame[: ROWS // 2], mixed / "part-0.parquet")
        write_parquet(retyped(frame[ROWS // 2:], self.canaries), mixed / "part-1.parquet")
        add_source(self.engine, "canary lake", parquet_root=self.lake)
        clean_sqlite = self.folder / f"clean-{self.canaries.location.value}.db"
        self._sql_table(f"sqlite:///{clean_sqlite}", frame, "people")
        self._sql_table(f"sqlite:///{clean_sqlite}", restrung(frame, self.canaries).astype({"age": object}),
                        "restrung")
        add_source(self.engine, "canary sqlite", sql=f"sqlite:///{clean_sqlite}")
        if self.postgres_url is not None:
            add_source(self.engine, "canary postgres", sql=self.postgres_url)
        if spark:
            from service.data.engines.spark import spark_session

            session = spark_session()
            for view, path in (("canary_clean", self.lake / ATTACH_TABLES["clean"]),
                               ("canary_restrung", self.lake / ATTACH_TABLES["restrung"])):
                session.read.parquet(str(path)).createOrReplaceTempView(view)
                self.spark_views.append(view)
            add_source(self.engine, "canary spark", spark=True)

    # tampering ---------------------------------------------------------------------------------------------------
    def tamper(self) -> None:
        """Change every variant where it lives (module docstring; each variant's ``tamper`` says how)."""
        frame, c = canary_frame(self.canaries), self.canaries
        second = frame[ROWS // 2:]
        tamperers = {
            "duckdb stored": self._stored_file,
            "duckdb file": lambda v: write_parquet(restrung(frame, c), self._folder(v) / "table.parquet"),
            "duckdb glob retyped": lambda v: write_parquet(retyped(second, c), self._folder(v) / "part-1.parquet"),
            "duckdb glob grown": lambda v: write_parquet(restrung(frame[:10], c).assign(extra=c.note.value),
                                                         self._folder(v) / "part-2.parquet"),
            "sql stored": self._stored_table,
            "sqlite attached": lambda v: self._update(f"sqlite:///{self.sqlite_file}", c.surname.value, outside=True),
            "postgres attached": lambda v: self._update(str(self.postgres_url), c.diagnosis.value, outside=False),
            "spark": lambda v: write_parquet(retyped(second, c), self._folder(v) / "part-1.parquet"),
        }
        for variant in self.built:
            tamperers[variant.name](variant)

    def _stored_file(self, variant: Variant) -> None:
        """The Parquet file the service stored, rewritten with a canary string in its first code column."""
        stored = datasets.get_dataset(self.engine, variant.name)
        path = data_folder(self.engine) / stored.location.file
        table = pq.read_table(path).to_pandas()
        table[table.columns[0]] = table[table.columns[0]].astype(str)
        table.iloc[0, 0] = self.canaries.diagnosis.value
        path.unlink()
        write_parquet(table, path)

    def _stored_table(self, variant: Variant) -> None:
        """One row of ``data_<id>``: a canary string in its first code column where SQLite lets a column hold any
        value; PostgreSQL's SMALLINT holds only numbers (a string needs the service's own schema changed): there, a
        code outside the column's domain."""
        stored = datasets.get_dataset(self.engine, variant.name)
        column, table = next(iter(stored.sql_columns.values())), stored.data_table
        sqlite = self.engine.dialect.name == "sqlite"
        row = "rowid" if sqlite else "ctid"
        with self.engine.begin() as connection:
            connection.execute(text(f'UPDATE {table} SET "{column}" = :v WHERE {row} = (SELECT {row} FROM {table} '
                                    "LIMIT 1)"), {"v": self.canaries.diagnosis.value if sqlite else 30000})

    def _update(self, url: str, age: str, *, outside: bool) -> None:
        """The foreign table ``people`` at ``url``: ``age`` written into the row of one unit, and with ``outside``
        an hours outside the spec into the rows of another."""
        foreign = make_engine(url)
        try:
            with foreign.begin() as connection:
                connection.execute(text("UPDATE people SET age = :v WHERE ssn = :unit"),
                                   {"v": age, "unit": self.canaries.unit_text.value})
                if outside:
                    connection.execute(text("UPDATE people SET hours = :v WHERE ssn = :unit"),
                                       {"v": self.canaries.outside.value, "unit": self.canaries.ssn.value})
        finally:
            foreign.dispose()

    def close(self) -> None:
        if self.spark_views:
            from service.data.engines.spark import spark_session

            for view in self.spark_views:
                spark_session().catalog.dropTempView(view)
        if self.postgres_url is not None and self.postgres_admin is not None:
            admin = create_engine(self.postgres_admin, isolation_level="AUTOCOMMIT")
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{self.postgres_url.rsplit("/", 1)[1]}" '
                                        "WITH (FORCE)"))
            admin.dispose()
        shutil.rmtree(self.lake, ignore_errors=True)
