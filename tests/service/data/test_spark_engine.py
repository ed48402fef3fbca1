"""The Spark engine (issue 21), in local mode and through Spark Connect: ``dataset attach --spark TABLE --spec``
registers a table of the Spark session where it lives; its counts (one ``GROUPING SETS`` scan, the binning spec
compiled to Spark SQL) equal numpy's ``bincount`` of the same rows coded by ``workloads.binning.apply_spec``; the
distinct rows stream in order; bad input (an unreachable Spark, a missing table, a spec column the table lacks, a
value outside the spec) is one clear error and stores nothing; a release through Spark costs and looks like the same
release on a SQLite copy.

Each test that reads through Spark runs twice: on the process's local-mode session, and on a Spark Connect session
(``MARGINALIA_SPARK_REMOTE``) of a real Connect server the test session starts from the pip package
(tests/support/sparkconnect.py); a server that stops mid-way is one clear error that stores nothing, and a restarted
one is reached again. Slow (starting Spark costs seconds, more on a busy machine)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from service.accounting import accountant
from service.cli import app
from service.data import datasets
from service.data.attach.tables import attach_spark
from service.data.engines.base import EngineError
from service.data.engines.boundary import Reason
from service.data.engines.dialect import SPARK_SQL
from service.data.engines.spark import SPARK_REMOTE_VARIABLE, SparkTable, spark_session
from service.data.oracle import TableCountOracle
from service.errors import InvalidInput
from service.regression.fit import fit as fit_regression
from service.releases import answers
from service.releases import engine as release_engine
from tests.support.binned import one_row_per_unit, write_spec
from tests.support.sparkconnect import ConnectServer, SparkConnectUnavailable
from workloads.binning import apply_spec, parse_spec

pytestmark = pytest.mark.slow

SPEC = {"columns": {
    "age": {"kind": "ordinal", "edges": [0, 25, 45, 65, 100]},
    "hours": {"kind": "ordinal", "edges": [0, 20, 40, 60, 100]},
    "sex": {"values": ["F", "M"]},
    "work": {"values": ["Private", "Self-emp", "Gov", "?"]},
    "label": {"values": ["no", "yes"], "strip_suffix": "."},
}}
runner = CliRunner()


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite only: the ledger's backend does not matter to Spark (the PostgreSQL variants would only start it
    twice as often)."""
    return f"sqlite:///{tmp_path / 'test.db'}"


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """The Spark Connect server of the test session (one JVM, started once, stopped at the end)."""
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    try:
        server.start()
    except SparkConnectUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"a Spark Connect server is required in CI: {exc}")
        pytest.skip(f"Spark Connect server unavailable: {exc}")
    yield server
    server.stop()


@pytest.fixture(params=["local", "connect"])
def spark(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """The Spark session the test's tables are read through (:func:`spark_session` keeps one per remote): the
    in-process local-mode Spark, or Spark Connect at the session's server."""
    if request.param == "connect":
        monkeypatch.setenv(SPARK_REMOTE_VARIABLE, request.getfixturevalue("connect_server").url)
    else:
        monkeypatch.delenv(SPARK_REMOTE_VARIABLE, raising=False)
    return spark_session()


def _frame(rows: int = 600, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(0, 101, rows).astype(float),  # 100 is the closed last edge
        "hours": rng.integers(0, 100, rows),
        "sex": rng.choice(["F", "M"], rows),
        "work": rng.choice([" Private", "Self-emp ", "Gov", "?"], rows, p=[0.6, 0.2, 0.15, 0.05]),
        "label": rng.choice(["no", "yes", "yes."], rows),
        "ignored": rng.integers(0, 9, rows),  # a column the spec does not name
    })


def _parquet(tmp_path: Path, frame: pd.DataFrame, name: str = "t.parquet") -> str:
    path = tmp_path / name
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return f"parquet.`{path}`"


def _spec(tmp_path: Path) -> Path:
    return write_spec(tmp_path, SPEC)


def _codes(frame: pd.DataFrame) -> tuple[np.ndarray, list[str], list[int]]:
    spec = parse_spec(SPEC)
    return apply_spec(spec, frame.astype(str)), [c.name for c in spec.columns], [c.size for c in spec.columns]


def _bincount(frame: pd.DataFrame, attributes: tuple[str, ...]) -> np.ndarray:
    codes, names, sizes = _codes(frame)
    shape = tuple(sizes[names.index(a)] for a in attributes)
    index = np.ravel_multi_index([codes[:, names.index(a)] for a in attributes], shape)
    return np.bincount(index, minlength=math.prod(shape)).reshape(shape)


def _stored(engine) -> list[str]:  # noqa: ANN001
    return [d.name for d in datasets.list_datasets(engine)]


def test_spark_counts_equal_numpy_bincount(engine, spark, tmp_path: Path) -> None:  # noqa: ANN001, ARG001
    frame = _frame()
    info = attach_spark(engine, "people", _parquet(tmp_path, frame), _spec(tmp_path))
    assert (info.rows, info.engine) == (600, "spark")
    assert info.domain.sizes() == {"age": 4, "hours": 4, "sex": 2, "work": 4, "label": 2}
    stored = datasets.get_dataset(engine, "people")
    assert stored.engine == "spark" and stored.labels["work"] == ["Private", "Self-emp", "Gov", "?"]
    pairs = [("age", "hours"), ("sex", "work"), ("label", "age"), ("work", "hours")]
    with TableCountOracle(engine, stored) as oracle:
        assert oracle.table.name == "spark" and oracle.table.row_count() == 600
        many = oracle.counts_many(pairs, max_cells=1)  # four marginals: one GROUPING SETS scan
        assert oracle.queries == 4
        for attributes in pairs:
            np.testing.assert_array_equal(many[attributes], _bincount(frame, attributes))
        np.testing.assert_array_equal(oracle.counts(("age", "sex", "work", "label")),
                                      _bincount(frame, ("age", "sex", "work", "label")))
        codes, counts = oracle.distinct_rows(("work", "sex"), chunk_rows=3)
    all_codes, names, _ = _codes(frame)
    expected, expected_counts = np.unique(all_codes[:, [names.index("work"), names.index("sex")]], axis=0,
                                          return_counts=True)
    np.testing.assert_array_equal(codes, expected)  # ascending code order, streamed in chunks of 3
    np.testing.assert_array_equal(counts, expected_counts)


def test_the_distinct_rows_stop_at_the_public_cap(engine, spark, tmp_path: Path) -> None:  # noqa: ANN001, ARG001
    attach_spark(engine, "people", _parquet(tmp_path, _frame()), _spec(tmp_path))
    with TableCountOracle(engine, datasets.get_dataset(engine, "people")) as oracle:
        with pytest.raises(ValueError, match="more than max_rows=5 distinct rows"):
            oracle.distinct_rows(("age", "work"), max_rows=5, chunk_rows=2)  # 16 distinct rows exist


def test_spark_string_literals_round_trip(spark) -> None:  # noqa: ANN001
    text = "it's a \\ back'slash"
    assert spark.sql(f"SELECT {SPARK_SQL.literal(text)} AS t").collect()[0]["t"] == text
    assert spark.sql(f"SELECT {SPARK_SQL.double(-math.inf)} < {SPARK_SQL.double(1e-5)} AS t").collect()[0]["t"]


def test_attach_refuses_bad_input_and_stores_nothing(engine, spark, tmp_path: Path) -> None:  # noqa: ANN001, ARG001
    spec = _spec(tmp_path)
    with pytest.raises(InvalidInput, match=r"--spark no_such_table: dataset 't': its table, or a column its spec "
                                           r"reads, cannot be found.*Nothing was stored"):  # our words, not Spark's
        attach_spark(engine, "t", "no_such_table", spec)
    lacking = _parquet(tmp_path, _frame().drop(columns=["hours"]), "lacking.parquet")
    with pytest.raises(InvalidInput, match=r"the spec's column\(s\) \['hours'\] are not in the table") as missing:
        attach_spark(engine, "t", lacking, spec)
    assert missing.value.code == "column_mismatch"
    outside = _frame()
    outside.loc[17, "age"] = 140.0
    with pytest.raises(InvalidInput, match=r"column 'age' holds a value the binning spec cannot code") as refused:
        attach_spark(engine, "t", _parquet(tmp_path, outside, "outside.parquet"), spec)
    assert refused.value.code == "invalid_value" and "140" not in refused.value.message
    unlisted = _frame()
    unlisted.loc[3, "work"] = "Never-worked"
    with pytest.raises(InvalidInput, match=r"column 'work' holds a value the binning spec cannot code"):
        attach_spark(engine, "t", _parquet(tmp_path, unlisted, "unlisted.parquet"), spec)
    assert _stored(engine) == []


def test_an_unreachable_spark_is_one_clear_error(engine, tmp_path: Path, monkeypatch, caplog) -> None:  # noqa: ANN001
    """The answer says the server cannot be reached, in our words (never gRPC's, never the server's address); the
    operator's log names which server, without the URL's parameters."""
    monkeypatch.setenv(SPARK_REMOTE_VARIABLE, "sc://127.0.0.1:1")  # nothing listens on port 1
    with pytest.raises(InvalidInput, match=r"--spark people: dataset 't': where its table lives cannot be reached: "
                                           r"check that the database or Spark server is running.*Nothing was stored"):
        attach_spark(engine, "t", "people", _spec(tmp_path))
    assert "Spark Connect at sc://127.0.0.1:1 (MARGINALIA_SPARK_REMOTE) cannot be started or reached" in caplog.text
    monkeypatch.setenv(SPARK_REMOTE_VARIABLE, "sc://127.0.0.1:1/;use_ssl=true;token=not-for-errors")
    with pytest.raises(InvalidInput, match=r"dataset 't': where its table lives cannot be reached") as tls:
        attach_spark(engine, "t", "people", _spec(tmp_path))
    assert "127.0.0.1" not in str(tls.value) and "not-for-errors" not in str(tls.value) + caplog.text
    assert _stored(engine) == []


def test_attach_through_the_command_line(engine, spark, tmp_path: Path) -> None:  # noqa: ANN001, ARG001
    table, spec = _parquet(tmp_path, _frame()), str(_spec(tmp_path))
    result = runner.invoke(app, ["dataset", "attach", "people", "--spark", table, "--spec", spec, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["engine"] == "spark" and json.loads(result.output)["rows"] == 600
    both = runner.invoke(app, ["dataset", "attach", "x", "--spark", table, "--parquet", "a.parquet", "--spec", spec])
    message = " ".join(both.output.split())
    expected = "give either --parquet PATH|GLOB, or --sql URL with --table T, or --spark TABLE"
    assert both.exit_code != 0 and expected in message
    gone = runner.invoke(app, ["dataset", "attach", "x", "--spark", "missing_table", "--spec", spec])
    assert gone.exit_code != 0 and "its table, or a column its spec reads, cannot be found" in " ".join(
        gone.output.split())  # our words for Spark's TABLE_OR_VIEW_NOT_FOUND
    assert _stored(engine) == ["people"]


def test_releases_through_spark_cost_and_look_like_the_sqlite_copy(engine, spark, tmp_path: Path) -> None:  # noqa: ANN001, ARG001
    """The same rows attached in Spark and loaded into SQLite (``dataset load --bins`` of their CSV): a Laplace
    all-2way release, an AdaSSP Gram release (X^T X and X^T y from the engine's 1- and 2-way counts) and DP-IHT
    (the distinct rows, streamed) cost the same and give payloads of the same shape."""
    frame = _frame()
    attach_spark(engine, "spark_copy", _parquet(tmp_path, frame), _spec(tmp_path))
    csv = tmp_path / "rows.csv"
    frame.drop(columns=["ignored"]).to_csv(csv, index=False)
    datasets.load_raw_csv(engine, "sqlite_copy", [csv], _spec(tmp_path), store="sql")
    outcomes = {}
    for name in ("spark_copy", "sqlite_copy"):
        accountant.set_budget(engine, name, "20", "1e-3")
        laplace = release_engine.release_marginals(engine, name, "laplace", "all-2way", epsilon="1")
        gram = fit_regression(engine, name, "linear", "hours", ["age", "sex", "work"], method="adassp", epsilon="1",
                              delta="1e-5")
        iht = fit_regression(engine, name, "logistic", "label", ["age", "sex", "work"], method="dp-iht",
                             epsilon="1", delta="1e-5", options={"sparsity": 3, "iterations": 5})
        answer = answers.answer_marginal(engine, laplace.release_id, ["work", "age"])
        status = accountant.budget_status(engine, name)
        outcomes[name] = (laplace.cost, gram.cost, iht.cost, gram.release_kind, iht.release_kind,
                          sorted(laplace.details), np.shape(answer["counts"]), np.shape(gram.model.coef_),
                          np.shape(iht.model.coef_), (status.epsilon_pure_spent, status.delta_spent, status.rho_spent))
    assert outcomes["spark_copy"] == outcomes["sqlite_copy"]


def test_a_privacy_unit_counts_one_row_per_unit_whatever_the_order(engine, spark, tmp_path: Path) -> None:  # noqa: ANN001, ARG001
    """``--privacy-unit`` (docs/privacy.md 1.1): the counts, distinct rows and row count are those of the row each
    unit keeps (the smallest codes), computed with pandas; two files holding the rows in other orders give the
    same; a Laplace release costs what it costs on the rows."""
    frame = _frame()
    frame["person"] = np.random.default_rng(8).integers(0, 150, len(frame)).astype(str)  # about 4 rows per unit
    codes, names, _ = _codes(frame)
    kept = one_row_per_unit(codes, names, frame["person"].to_numpy())
    shuffled = frame.sample(frac=1.0, random_state=2)
    info = attach_spark(engine, "units", _parquet(tmp_path, frame), _spec(tmp_path), privacy_unit="person")
    attach_spark(engine, "shuffled", _parquet(tmp_path, shuffled, "s.parquet"), _spec(tmp_path), privacy_unit="person")
    assert info.rows == frame["person"].nunique() == len(kept) < len(frame) / 3
    pairs = [("age", "hours"), ("sex", "work"), ("label", "age")]
    for name in ("units", "shuffled"):
        with TableCountOracle(engine, datasets.get_dataset(engine, name)) as oracle:
            assert oracle.table.row_count() == len(kept)
            many = oracle.counts_many(pairs, max_cells=1)
            for attributes in pairs:
                index = np.ravel_multi_index([kept[a] for a in attributes], many[attributes].shape)
                np.testing.assert_array_equal(many[attributes].ravel(),
                                              np.bincount(index, minlength=many[attributes].size))
            rows, counts = oracle.distinct_rows(("work", "sex"), chunk_rows=3)
        expected, expected_counts = np.unique(kept[["work", "sex"]].to_numpy(), axis=0, return_counts=True)
        np.testing.assert_array_equal(rows, expected)
        np.testing.assert_array_equal(counts, expected_counts)
    # one location is one dataset: t.parquet is attached as "units", so the rows read a copy
    attach_spark(engine, "rows", _parquet(tmp_path, frame, "copy.parquet"), _spec(tmp_path))
    spent = {}
    for name in ("units", "rows"):
        accountant.set_budget(engine, name, "5", "1e-3")
        cost = release_engine.release_marginals(engine, name, "laplace", "all-2way", epsilon="1").cost
        spent[name] = (cost, accountant.budget_status(engine, name).epsilon_pure_spent)
    assert spent["units"] == spent["rows"] and spent["units"][1] == 1


def test_a_privacy_unit_that_is_not_a_column_or_is_null_stores_nothing(engine, spark, tmp_path: Path) -> None:  # noqa: ANN001, ARG001
    frame = _frame()
    table = _parquet(tmp_path, frame)
    with pytest.raises(InvalidInput, match=r"--spark .*: the privacy unit 'person' is not a column of the table, "
                                           r"which has \['age', 'hours', 'sex', 'work', 'label', 'ignored'\]") as bad:
        attach_spark(engine, "t", table, _spec(tmp_path), privacy_unit="person")
    assert bad.value.code == "column_mismatch"
    frame["person"] = pd.array(np.arange(len(frame)) % 50, dtype="Int64")
    frame.loc[99, "person"] = pd.NA
    with pytest.raises(InvalidInput, match=r"column 'person' \(the privacy unit\) is NULL in some row") as null:
        attach_spark(engine, "t", _parquet(tmp_path, frame, "null.parquet"), _spec(tmp_path), privacy_unit="person")
    assert null.value.code == "invalid_value"
    assert _stored(engine) == []


def test_a_connect_server_that_stops_mid_way_is_one_clear_error(engine, connect_server, tmp_path: Path,  # noqa: ANN001
                                                                monkeypatch) -> None:  # noqa: ANN001
    """The Connect server stops during a release's counting (the table attached and opened): one clear
    :class:`EngineError` naming the dataset within seconds (not the client's ten minutes of retries), nothing charged
    or stored. Once the server is back, the next release reaches it with a new session (the restarted server has
    forgotten the old one) and counts right."""
    monkeypatch.setenv(SPARK_REMOTE_VARIABLE, connect_server.url)
    frame = _frame()
    attach_spark(engine, "people", _parquet(tmp_path, frame), _spec(tmp_path))
    accountant.set_budget(engine, "people", "10", "1e-3")
    count = SparkTable.count_marginals

    def stop_then_count(table: SparkTable, marginals):  # noqa: ANN001, ANN202
        connect_server.stop()
        return count(table, marginals)

    try:
        with monkeypatch.context() as patch:
            patch.setattr(SparkTable, "count_marginals", stop_then_count)
            with pytest.raises(EngineError) as stopped:
                release_engine.release_marginals(engine, "people", "laplace", "all-2way", epsilon="1")
        reason, (outcome,) = stopped.value.message, stopped.value.__notes__  # the engine's one line; the release's fate
        assert "\n" not in reason and "parquet" not in reason  # where the table lives is not said
        assert reason == f"dataset 'people': {Reason.UNREACHABLE.value}"  # our words: gRPC's said where it lives
        assert outcome.startswith("release 1 (laplace) stopped before any noise was drawn: its charge of")
        assert [(r.status, r.payload) for r in answers.list_releases(engine, "people")] == [("failed_before_noise",
                                                                                             None)]
        assert accountant.budget_status(engine, "people").epsilon_pure_spent == 0
    finally:
        connect_server.start()
    release = release_engine.release_marginals(engine, "people", "laplace", "all-2way", epsilon="1")
    assert answers.get_release(engine, release.release_id).status == "complete"
    with TableCountOracle(engine, datasets.get_dataset(engine, "people")) as oracle:
        np.testing.assert_array_equal(oracle.counts(("sex", "work")), _bincount(frame, ("sex", "work")))
