"""DP-IHT's clipped gradient sums computed inside the data engine (issue 21): one aggregation per iteration, one float
per (attribute, code) back, equal to the in-memory numpy sum (``estimators.central.dp_iht.ArrayGradients``) on every
engine (DuckDB stored Parquet, the service database's SQLite and PostgreSQL tables, attached SQL tables), for the
linear and logistic losses, with clipping active and inactive, for every encoding kind (reduced one-hot, one-hot,
scalar, custom, {-1, +1}); and the release that uses them. Every registered engine's attached tables, with and
without a privacy unit (DuckDB on Parquet, SQL on SQLite and PostgreSQL, Spark local mode), are checked by the
engine contract (tests/service/data/test_engine_contract.py)."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import Engine, text

from estimators.central.dp_iht import dp_iht_calibration
from service.accounting import accountant
from service.accounting.accountant import release_costs
from service.data import datasets
from service.data.attach.tables import attach_sql
from service.data.engines.base import EngineError
from service.data.engines.gradients import ensure_sqlite_math
from service.data.oracle import TableCountOracle
from service.mechanisms import registry, row_memory
from service.mechanisms.base import MechanismError, MechanismResult
from service.mechanisms.dp_iht import COUNT_SHARE, DPIHTRelease, EngineGradients
from service.privacy import conversions
from service.privacy.cost import PrivacyCost, floor_to_grid
from service.privacy.noise import NoiseSource
from service.regression.fit import fit as fit_regression
from tests.support.binned import RAW_SQL_TYPES, SPEC, one_row_per_unit, raw_frame, sql_table, write_spec
from tests.support.gradient_sums import assert_sums_as_numpy, designs
from workloads.binning import apply_spec, parse_spec
from workloads.encodings import DesignEncoding

SIZES = {"a": 5, "b": 4, "c": 3, "d": 6, "e": 2, "y": 3}
ROWS = 700
#: every encoding kind the design allows: a, b categorical (reduced one-hot, one-hot), c custom, d scalar; the target
#: scalar (linear) or {-1, +1} with level 2 positive (logistic)
OVERRIDES = {"b": "one_hot", "c": [[1.0, -0.5, 0.25], [0.0, 2.0, -1.0]]}


def _coded(seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({name: rng.integers(0, size, ROWS) for name, size in SIZES.items()})


def _write_coded(folder: Path, frame: pd.DataFrame) -> tuple[Path, Path]:
    csv, domain = folder / "coded.csv", folder / "coded-domain.json"
    frame.to_csv(csv, index=False)
    domain.write_text(json.dumps(SIZES))
    return csv, domain


@pytest.mark.parametrize("store", ["duckdb", "sql"])
def test_stored_tables_sum_as_numpy(engine: Engine, tmp_path: Path, store: str) -> None:
    """DuckDB's Parquet file, and the service database's data table (SQLite: one GROUP BY per attribute; PostgreSQL:
    one GROUPING SETS scan), for every encoding kind, linear and logistic."""
    frame = _coded()
    datasets.load_coded_csv(engine, "t", *_write_coded(tmp_path, frame), categorical=("a", "b"), store=store,
                            chunk_rows=100)
    stored = datasets.get_dataset(engine, "t")
    with TableCountOracle(engine, stored) as oracle:
        assert oracle.table.name == store
        for design in designs(stored.domain, ["a", "b", "c", "d"], "y", OVERRIDES, 2):
            assert {enc.kind for enc in design.attribute_encodings} >= {"reduced_one_hot", "one_hot", "custom",
                                                                       "scalar"}
            assert_sums_as_numpy(oracle, design, frame)
        assert oracle.gradient_scans == 16  # two designs, two thetas, two bounds; a gradient and a curvature each


def _binned(frame: pd.DataFrame) -> pd.DataFrame:
    spec = parse_spec(SPEC)
    return pd.DataFrame(apply_spec(spec, frame.astype(str)), columns=[c.name for c in spec.columns])


def test_attached_sql_sums_as_numpy_and_refuses_a_value_outside_the_spec(engine: Engine, database_url: str,
                                                                         tmp_path: Path) -> None:
    """An attached table of another database (here the test's own SQLite or PostgreSQL): the same sums; a value the
    spec cannot code (its code is negative) is refused naming its column, never dropped from the sum."""
    frame = raw_frame(300, 6)
    sql_table(engine, frame, "people")
    attach_sql(engine, "people", database_url, "people", write_spec(tmp_path))
    stored = datasets.get_dataset(engine, "people")
    both = designs(stored.domain, ["age", "work"], "income", {}, None)
    with TableCountOracle(engine, stored) as oracle:
        for design in both:
            assert_sums_as_numpy(oracle, design, _binned(frame))
    with engine.begin() as connection:
        connection.execute(text("UPDATE people SET income = 'unknown' WHERE age < 30"))
    with TableCountOracle(engine, stored) as oracle:
        gradients = EngineGradients(oracle, both[0], "linear")
        with pytest.raises(EngineError, match=r"column 'income' holds a value the binning spec cannot code"):
            gradients(np.zeros(1 + both[0].n_features), 1.0)


def test_sqlite_math_functions_are_registered_only_where_missing() -> None:
    """SQLite's sqrt and tanh exist only when it was compiled with its math functions; a connection that lacks one
    gets Python's (a sqlite3 connection whose functions are hidden by an authorizer stands for such a build)."""
    import sqlite3

    connection = sqlite3.connect(":memory:")
    ensure_sqlite_math(connection)
    assert connection.execute("SELECT sqrt(2.25), tanh(0.5)").fetchone() == (1.5, math.tanh(0.5))

    class Lacking:  # a connection on which the built-ins fail, as on a build without them
        registered: dict[str, object] = {}

        def execute(self, sql: str) -> object:
            name = sql.split()[1].split("(")[0]
            if name not in self.registered:
                raise sqlite3.OperationalError(f"no such function: {name}")
            return connection.execute("SELECT 1")

        def create_function(self, name: str, arity: int, function: object, deterministic: bool) -> None:
            assert arity == 1 and deterministic
            self.registered[name] = function

    lacking = Lacking()
    ensure_sqlite_math(lacking)
    assert lacking.registered == {"sqrt": math.sqrt, "tanh": math.tanh, "floor": math.floor}


def _release(oracle: TableCountOracle, design: DesignEncoding, seed: int, options: dict) -> MechanismResult:
    """A DP-IHT release's result, its settings completed as the registry completes them."""
    return DPIHTRelease(design, Fraction(1, 2), registry.get("dp-iht").settings(design, options))(oracle,
                                                                                                  NoiseSource(seed))


@pytest.mark.parametrize("task", ["linear", "logistic"])
def test_the_release_on_the_engine_path_equals_the_distinct_rows_path(engine: Engine, tmp_path: Path,
                                                                      task: str) -> None:
    """The same rows in DuckDB (the engine sums, no distinct row read, one scan per iteration) and read as distinct
    rows (the numpy path): with the same seed the same model (to float summation order), the same curvature (its
    integer sums are exact on both paths, so the same noise gives the same matrix), the same calibration and charge;
    and the engine path gives the same model twice (DuckDB sums on one thread: 7 row groups here). The engine path
    scans once per iteration and once more for the curvature."""
    frame = _coded()
    datasets.load_coded_csv(engine, "t", *_write_coded(tmp_path, frame), categorical=("a", "b"), chunk_rows=100)
    stored = datasets.get_dataset(engine, "t")
    design = designs(stored.domain, ["a", "b", "c", "d"], "y", OVERRIDES, 2)[task == "logistic"]
    options = {"sparsity": 4, "iterations": 12, "clip_norm": 0.5}
    with TableCountOracle(engine, stored) as oracle:
        assert oracle.table.gradient_sums_in_one_scan
        first = _release(oracle, design, 3, options)
        assert (oracle.gradient_scans, oracle.distinct_rows_read, oracle.rows_read) == (13, 0, 0)
        again = _release(oracle, design, 3, options)
        oracle.table.gradient_sums_in_one_scan = False  # the distinct-rows path on the same table
        rows = _release(oracle, design, 3, options)
        assert oracle.distinct_rows_read > 0 and oracle.gradient_scans == 26
    assert again.payload == first.payload
    np.testing.assert_allclose(first.payload.coef, rows.payload.coef, rtol=1e-7, atol=1e-12)
    assert first.payload.curvature_names == rows.payload.curvature_names and first.payload.curvature is not None
    np.testing.assert_array_equal(first.payload.curvature, rows.payload.curvature)
    assert first.details == rows.details and first.cost == rows.cost
    assert np.count_nonzero(first.payload.coef) + (first.payload.intercept not in (None, 0.0)) <= 4


class _OracleOnly:
    """What the count oracle offers a mechanism, and nothing else: no ``table`` (its engine) to reach through."""

    def __init__(self, oracle: TableCountOracle) -> None:
        self.domain = oracle.domain
        self.counts, self.counts_many, self.distinct_rows = oracle.counts, oracle.counts_many, oracle.distinct_rows
        self.row_weight_sums, self.row_count = oracle.row_weight_sums, oracle.row_count
        self.gradient_sums_in_one_scan = oracle.gradient_sums_in_one_scan


@pytest.mark.parametrize("store", ["duckdb", "sql"])
def test_dp_iht_sees_only_the_count_oracle(engine: Engine, tmp_path: Path, store: str) -> None:
    """Issue 28: DP-IHT asks the oracle whether its engine sums gradients in one scan and for the row count; it never
    reaches the engine behind it (on both paths: DuckDB and PostgreSQL sum, SQLite reads distinct rows)."""
    datasets.load_coded_csv(engine, "t", *_write_coded(tmp_path, _coded()), categorical=("a", "b"), store=store)
    stored = datasets.get_dataset(engine, "t")
    design = designs(stored.domain, ["a", "b", "c", "d"], "y", OVERRIDES, 2)[0]
    summed = store == "duckdb" or engine.dialect.name == "postgresql"
    with TableCountOracle(engine, stored) as oracle:
        assert oracle.gradient_sums_in_one_scan is summed
        assert oracle.row_count() == ROWS
        result = _release(_OracleOnly(oracle), design, 3, {"sparsity": 4, "iterations": 3})  # type: ignore[arg-type]
        # three iterations and the curvature
        assert (oracle.gradient_scans, oracle.distinct_rows_read > 0) == ((4, False) if summed else (0, True))
    assert len(result.payload.coef) == design.n_features and result.cost == PrivacyCost(rho=Fraction(1, 2))


def test_engine_path_ignores_the_distinct_row_budget_and_charges_as_before(engine: Engine, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The accountant charges the engine path exactly what it charged the distinct-rows path (the same rho:
    ``cdp_rho(1, 1e-5)`` on the grid, split exactly by the calibration, sensitivity G either way). Then, with more
    distinct rows than the cap and a 1 MB memory budget, DP-IHT on DuckDB still runs (it holds a few floats per
    code); objective perturbation, which still reads rows, is refused before noise and refunded."""
    files = _write_coded(tmp_path, _coded())
    request = {"method": "dp-iht", "epsilon": "1", "delta": "1e-5", "options": {"sparsity": 3, "iterations": 5}}
    costs = {}
    for store in ("sql", "duckdb"):
        datasets.load_coded_csv(engine, store, *files, categorical=("a", "b"), store=store)
        accountant.set_budget(engine, store, "10", "1e-3")
        if store == "duckdb":
            monkeypatch.setenv(row_memory.MEMORY_BUDGET_ENV, "1")
            monkeypatch.setenv(row_memory.MAX_DISTINCT_ROWS_ENV, "10")
        fit = fit_regression(engine, store, "linear", "y", ["a", "b", "c", "d"], **request)
        costs[store] = release_costs(engine, [fit.release_id])[fit.release_id]
        assert fit.details["sigma_gradient"] == dp_iht_calibration(  # the fit's share: 1 - curvature_share
            costs[store].rho * Fraction(9, 10), 5, fit.details["clip_norm"], COUNT_SHARE).sigma_gradient
    assert costs["duckdb"] == costs["sql"] == PrivacyCost(rho=floor_to_grid(conversions.cdp_rho(1.0, 1e-5)))
    with pytest.raises(MechanismError, match="objective perturbation: refused before any noise"):
        fit_regression(engine, "duckdb", "logistic", "e", ["a", "b"], method="objpert", epsilon="1", delta="1e-5")
    assert [r["entry"] for r in accountant.ledger_rows(engine, "duckdb")][-2:] == ["charge", "refund"]


#: the service's test database on PostgreSQL only (the grouped iterations are PostgreSQL's)
ON_POSTGRES = pytest.mark.parametrize("database_url", [pytest.param("postgresql", marks=pytest.mark.postgres)],
                                      indirect=True)


def _postgres_leftovers(engine: Engine) -> tuple[int, int]:
    """Seen from a fresh session: (other sessions of this database inside a transaction, grouped temporary tables
    of any session). A fit holds one transaction whose temporary table no other session can see; afterwards
    neither may remain (a table created outside a transaction, or committed, would show in pg_class)."""
    with engine.connect() as connection:
        return connection.execute(text(
            "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'), "
            "(SELECT count(*) FROM pg_class WHERE relname LIKE 'marginalia\\_grouped\\_%')")).one()


def _postgres_table(engine: Engine, database_url: str, tmp_path: Path, where: str
                    ) -> tuple[datasets.StoredDataset, str, pd.DataFrame, list[DesignEncoding]]:
    """A dataset on PostgreSQL: the service's ``data_<id>`` table (``data``), or a table of an attached database
    without (``attached``) or with (``unit``) a privacy unit; with the table's name, the codes numpy sums (one row
    per unit) and the two designs of :func:`_designs` (every encoding kind on the ``data_<id>`` table)."""
    if where == "data":
        frame = _coded()
        datasets.load_coded_csv(engine, "t", *_write_coded(tmp_path, frame), categorical=("a", "b"), store="sql")
        stored = datasets.get_dataset(engine, "t")
        return stored, stored.data_table, frame, designs(stored.domain, ["a", "b", "c", "d"], "y", OVERRIDES, 2)
    frame = raw_frame(400, 8)
    frame["person"] = np.random.default_rng(9).integers(0, 90, len(frame))
    sql_table(engine, frame, "visits", {**RAW_SQL_TYPES, "person": "INTEGER"})
    unit = "person" if where == "unit" else None
    attach_sql(engine, "visits", database_url, "visits", write_spec(tmp_path), privacy_unit=unit)
    spec = parse_spec(SPEC)
    names = [c.name for c in spec.columns]
    codes = apply_spec(spec, frame[names].astype(str))
    kept = _binned(frame) if unit is None else one_row_per_unit(codes, names, frame["person"].to_numpy())
    stored = datasets.get_dataset(engine, "visits")
    return stored, "visits", kept, designs(stored.domain, ["age", "work"], "income", {}, None)


@ON_POSTGRES
@pytest.mark.parametrize("where", ["data", "attached", "unit"])
def test_postgres_iterations_read_the_rows_grouped_once_and_leave_no_table(engine: Engine, database_url: str,
                                                                           tmp_path: Path, where: str) -> None:
    """On PostgreSQL (the service's table, an attached table, one with a privacy unit) the first iteration groups
    the coded, bounded rows into a temporary table held by the fit's one transaction, and every iteration reads that
    table: rows deleted from the table after it do not change the sums (main scanned the table every iteration,
    on a connection per iteration). The sums still equal numpy's, linear and logistic, clipping on and off; after
    the fit no session holds a transaction and no grouped table exists, and the next fit reads the table anew."""
    stored, table, codes, designs = _postgres_table(engine, database_url, tmp_path, where)
    theta = np.random.default_rng(5).normal(0.0, 1.0, 1 + designs[0].n_features)
    with TableCountOracle(engine, stored) as oracle:
        assert oracle.table.gradient_sums_in_one_scan
        for design in designs:
            assert_sums_as_numpy(oracle, design, codes)
        gradients = EngineGradients(oracle, designs[0], "linear")
        first = gradients(theta, 0.5)
        assert _postgres_leftovers(engine) == (1, 0)
        with engine.begin() as connection:
            connection.execute(text(f'DELETE FROM "{table}" WHERE ctid IN (SELECT ctid FROM "{table}" LIMIT 200)'))
        np.testing.assert_array_equal(gradients(theta, 0.5), first)
    assert _postgres_leftovers(engine) == (0, 0)
    with TableCountOracle(engine, stored) as oracle:
        assert not np.array_equal(EngineGradients(oracle, designs[0], "linear")(theta, 0.5), first)
    assert _postgres_leftovers(engine) == (0, 0)


@ON_POSTGRES
@pytest.mark.parametrize("where", ["data", "attached"])
def test_postgres_failed_fits_leave_no_table_and_the_pool_works(engine: Engine, database_url: str, tmp_path: Path,
                                                                 where: str) -> None:
    """A fit that fails after its temporary table was made (PostgreSQL refuses a float overflow in an iteration;
    an attached table's value outside the spec is refused through the release engine) leaves no transaction open
    and no grouped table, and the same pool then serves a correct fit."""
    stored, table, codes, (design, _) = _postgres_table(engine, database_url, tmp_path, where)
    with TableCountOracle(engine, stored) as oracle:
        gradients = EngineGradients(oracle, design, "linear")
        gradients(np.zeros(1 + design.n_features), 1.0)
        with pytest.raises(EngineError, match="out of range"):  # PostgreSQL's own text no longer comes through
            gradients(np.full(1 + design.n_features, 8e307), 1.0)  # each margin finite, their sum not
        assert _postgres_leftovers(engine) == (1, 0)  # the fit's transaction, aborted, until the oracle closes
    assert _postgres_leftovers(engine) == (0, 0)
    with TableCountOracle(engine, stored) as oracle:
        assert_sums_as_numpy(oracle, design, codes)
    assert _postgres_leftovers(engine) == (0, 0)
    if where == "attached":
        with engine.begin() as connection:
            connection.execute(text(f"UPDATE {table} SET income = 'unknown' WHERE age < 30"))
        accountant.set_budget(engine, "visits", "10", "1e-3")
        with pytest.raises(EngineError, match=r"column 'income' holds a value the binning spec cannot"):
            fit_regression(engine, "visits", "linear", "income", ["age", "work"], method="dp-iht", epsilon="1",
                           delta="1e-5", options={"sparsity": 2, "iterations": 3})
        assert _postgres_leftovers(engine) == (0, 0)


@ON_POSTGRES
def test_postgres_release_same_seed_same_model(engine: Engine, tmp_path: Path) -> None:
    """DP-IHT on a PostgreSQL ``data_<id>`` table (grouped rows, parallel workers off): the same seed gives the same
    model, through two fits, and it equals the distinct-rows path's model to float summation order."""
    stored, _, _, designs = _postgres_table(engine, "", tmp_path, "data")
    for design in designs:
        options = {"sparsity": 4, "iterations": 12, "clip_norm": 0.5}
        fits = []
        for _ in range(2):
            with TableCountOracle(engine, stored) as oracle:
                fits.append(_release(oracle, design, 3, options))
                assert (oracle.gradient_scans, oracle.distinct_rows_read) == (13, 0)  # and the curvature
        with TableCountOracle(engine, stored) as oracle:
            oracle.table.gradient_sums_in_one_scan = False
            rows = _release(oracle, design, 3, options)
        assert fits[1].payload == fits[0].payload
        np.testing.assert_allclose(fits[0].payload.coef, rows.payload.coef, rtol=1e-7, atol=1e-12)
    assert _postgres_leftovers(engine) == (0, 0)


@ON_POSTGRES
def test_postgres_that_refuses_a_temporary_table_scans_every_iteration(engine: Engine, database_url: str,
                                                                      tmp_path: Path) -> None:
    """An attached database whose transactions are read-only (as a hot standby's), where no temporary table can be
    made: the sums fall back to scanning the coded rows each iteration, equal to numpy's."""
    frame = raw_frame(300, 6)
    sql_table(engine, frame, "people")
    read_only = f"{database_url}?options=-c%20default_transaction_read_only%3Don"
    attach_sql(engine, "people", read_only, "people", write_spec(tmp_path))
    stored = datasets.get_dataset(engine, "people")
    with TableCountOracle(engine, stored) as oracle:
        for design in designs(stored.domain, ["age", "work"], "income", {}, None):
            assert_sums_as_numpy(oracle, design, _binned(frame))
        assert oracle.table._gradients.grouping is False  # noqa: SLF001
    assert _postgres_leftovers(engine) == (0, 0)


class _AggregatesOnly:
    """A data engine that returns aggregates only: it cannot stream distinct rows (no such engine ships; every one
    streams), as a warehouse that refuses row-level reads would say."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner, self.name = inner, inner.name
        self.gradient_sums_in_one_scan = True

    def count_marginals(self, marginals):  # noqa: ANN001, ANN201
        return self.inner.count_marginals(marginals)

    def distinct_rows(self, attributes, *, chunk_rows):  # noqa: ANN001, ANN201, ARG002
        raise EngineError("dataset 't': this engine cannot stream distinct rows (it returns aggregates only)")

    def row_weight_sums(self, query):  # noqa: ANN001, ANN201
        return self.inner.row_weight_sums(query)

    def row_count(self) -> int:
        return self.inner.row_count()

    def close(self) -> None:
        self.inner.close()


def test_objpert_is_refused_naming_why_on_an_engine_that_cannot_stream_rows_and_dp_iht_runs(engine: Engine,
                                                                                            tmp_path: Path) -> None:
    """Objective perturbation needs the rows: on an engine that cannot stream them its runner stops with the
    engine's reason before any noise (the release engine's TrackedNoise sees no draw, so the charge would be
    refunded). DP-IHT needs only the engine's gradient sums and runs."""
    from service.data.engines.registry import open_table
    from service.mechanisms.objpert import ObjPertRelease
    from service.releases.engine import TrackedNoise

    datasets.load_coded_csv(engine, "t", *_write_coded(tmp_path, _coded()), categorical=("a", "b"))
    stored = datasets.get_dataset(engine, "t")
    logistic = DesignEncoding(stored.domain, ["a", "b", "d"], "e", "logistic")
    with TableCountOracle(engine, stored, table=_AggregatesOnly(open_table(engine, stored))) as oracle:
        noise = TrackedNoise(NoiseSource(1))
        with pytest.raises(EngineError, match="cannot stream distinct rows"):
            ObjPertRelease(logistic, Fraction(1), Fraction(1, 10**5))(oracle, noise)  # type: ignore[arg-type]
        assert not noise.drawn
        release = _release(oracle, logistic, 5, {"sparsity": 2, "iterations": 3})
    assert release.payload is not None and oracle.gradient_scans == 4  # three iterations and the curvature
    assert release.payload.curvature is not None
