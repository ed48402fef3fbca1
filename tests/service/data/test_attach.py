"""``dataset attach --parquet`` (issue 21): a Parquet table registered where it lives, coded by its public binning
spec inside DuckDB; counts equal those of the same rows coded by ``workloads.binning.apply_spec``; a value outside
the spec is refused with its column named (never dropped); bad input is one clear error and stores nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from service.cli import app
from service.data import datasets
from service.data.attach.tables import attach_parquet
from service.data.engines.base import EngineError
from service.data.oracle import TableCountOracle
from service.errors import Conflict, InvalidInput
from tests.support.binned import SPEC, expected_counts, raw_frame, write_spec

runner = CliRunner()


def _frame(rows: int = 300, seed: int = 2) -> pd.DataFrame:
    return raw_frame(rows, seed)


def _write(tmp_path: Path, frame: pd.DataFrame, name: str = "t.parquet") -> Path:
    path = tmp_path / name
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return path


def test_an_attached_parquet_table_counts_as_its_binned_rows(engine, tmp_path: Path) -> None:  # noqa: ANN001
    frame = _frame()
    first = _write(tmp_path, frame.iloc[:120], "part-1.parquet")
    second = _write(tmp_path, frame.iloc[120:], "part-2.parquet")
    info = attach_parquet(engine, "parts", [str(tmp_path / "part-*.parquet")], write_spec(tmp_path))
    assert (info.rows, info.engine) == (300, "duckdb") and info.domain.sizes() == {"age": 4, "work": 3, "income": 2}
    stored = datasets.get_dataset(engine, "parts")
    assert stored.labels["age"] == ["[0, 18)", "[18, 40)", "[40, 65)", "[65, 120]"]
    with TableCountOracle(engine, stored) as oracle:
        for attributes in [("age",), ("work", "age"), ("income",), ("age", "work", "income")]:
            np.testing.assert_array_equal(oracle.counts(attributes), expected_counts(frame, attributes))
        codes, counts = oracle.distinct_rows(("income",))
    np.testing.assert_array_equal(codes[:, 0], [0, 1])
    np.testing.assert_array_equal(counts, expected_counts(frame, ("income",)))
    assert first.is_file() and second.is_file()  # nothing was copied or moved


def test_a_value_outside_the_spec_is_refused_with_its_column_and_nothing_stored(engine, tmp_path: Path) -> None:  # noqa: ANN001
    frame = _frame()
    frame.loc[137, "age"] = 121.0
    with pytest.raises(InvalidInput) as caught:
        attach_parquet(engine, "t", [str(_write(tmp_path, frame))], write_spec(tmp_path))
    assert "column 'age'" in caught.value.message and "refused, never dropped" in caught.value.message
    assert "121" not in caught.value.message and caught.value.code == "invalid_value"
    frame = _frame()
    frame.loc[3, "work"] = None
    with pytest.raises(InvalidInput, match="column 'work'"):
        attach_parquet(engine, "t", [str(_write(tmp_path, frame))], write_spec(tmp_path))
    assert datasets.list_datasets(engine) == []


def test_a_file_that_changes_after_attach_fails_the_count_naming_the_column(engine, tmp_path: Path) -> None:  # noqa: ANN001
    path = _write(tmp_path, _frame())
    attach_parquet(engine, "t", [str(path)], write_spec(tmp_path))
    frame = _frame()
    frame.loc[0, "income"] = "unknown"
    _write(tmp_path, frame)
    with pytest.raises(EngineError) as caught:
        TableCountOracle(engine, datasets.get_dataset(engine, "t")).counts(("income",))
    assert "column 'income'" in caught.value.message and "unknown" not in caught.value.message
    assert str(tmp_path) not in caught.value.message


@pytest.mark.parametrize(("paths", "spec", "code", "fragment"), [
    (["missing.parquet"], SPEC, "missing_file", "no such file"),
    (["nothing-*.parquet"], SPEC, "missing_file", "no file matches"),
    (["t.parquet"], {"columns": {**SPEC["columns"], "hours": {"edges": [0, 99]}}}, "column_mismatch",
     "['hours'] are not in the files"),
    (["not.parquet"], SPEC, "invalid_file", "not readable as Parquet"),
])
def test_bad_input_is_one_clear_error_and_stores_nothing(engine, tmp_path: Path, paths: list[str],  # noqa: ANN001
                                                         spec: dict[str, object], code: str, fragment: str) -> None:
    _write(tmp_path, _frame())
    (tmp_path / "not.parquet").write_text("age,work\n1,x\n")
    with pytest.raises(InvalidInput) as caught:
        attach_parquet(engine, "t", [str(tmp_path / p) for p in paths], write_spec(tmp_path, spec))
    assert caught.value.code == code and fragment in caught.value.message
    assert datasets.list_datasets(engine) == []


def test_attach_through_the_command_line_never_shows_the_path(engine, tmp_path: Path) -> None:  # noqa: ANN001
    path = _write(tmp_path, _frame())
    result = runner.invoke(app, ["dataset", "attach", "t", "--parquet", str(path), "--spec", str(write_spec(tmp_path)),
                                 "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["engine"] == "duckdb"
    shown = runner.invoke(app, ["dataset", "show", "t", "--json"])
    assert json.loads(shown.output)["engine"] == "duckdb" and str(tmp_path) not in shown.output
    with pytest.raises(Conflict, match="already exists"):
        attach_parquet(engine, "t", [str(path)], write_spec(tmp_path))


def test_an_engine_that_fails_during_the_check_is_an_engine_error_not_a_bad_value(engine, tmp_path: Path,  # noqa: ANN001
                                                                                  monkeypatch) -> None:  # noqa: ANN001
    """A checking scan stopped by the engine (a file gone, a server down) is ``engine_error``, in our words (DuckDB's
    named the file); one stopped by the data (a value the spec cannot code) stays ``invalid_value``; neither stores
    anything."""
    import duckdb

    from service.data.engines.boundary import Reason
    from service.data.engines.duckdb_table import DuckDBTable

    run = DuckDBTable._run

    def unreadable(self: DuckDBTable, sql: str) -> duckdb.DuckDBPyConnection:
        if sql.startswith("SELECT COUNT(*), MAX("):  # the check's scan
            raise duckdb.IOException(f"IO Error: the disk went away under {tmp_path}")
        return run(self, sql)

    monkeypatch.setattr(DuckDBTable, "_run", unreadable)
    with pytest.raises(InvalidInput) as caught:
        attach_parquet(engine, "t", [str(_write(tmp_path, _frame()))], write_spec(tmp_path))
    assert caught.value.code == "engine_error" and Reason.FILES.value in caught.value.message
    assert "disk" not in caught.value.message and str(tmp_path) not in caught.value.message
    assert [d.name for d in datasets.list_datasets(engine)] == []
    monkeypatch.undo()
    frame = _frame()
    frame.loc[3, "work"] = "astronaut"
    with pytest.raises(InvalidInput) as caught:
        attach_parquet(engine, "t", [str(_write(tmp_path, frame, "bad.parquet"))], write_spec(tmp_path))
    assert caught.value.code == "invalid_value" and "column 'work'" in caught.value.message
    assert [d.name for d in datasets.list_datasets(engine)] == []


def test_one_file_is_one_dataset_and_the_operator_is_told_which(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """Issue 27, finding 2: a second attach of a file a dataset reads (by its path, a glob, a symlink, or a path
    Spark reads) is a 409 naming that dataset, before any row is read; nothing is stored."""
    path = _write(tmp_path, _frame())
    spec = str(write_spec(tmp_path))
    assert runner.invoke(app, ["dataset", "attach", "first", "--parquet", str(path), "--spec", spec]).exit_code == 0
    (tmp_path / "link.parquet").symlink_to(path)
    for given in (str(path), str(tmp_path / "*.parquet"), str(tmp_path / "link.parquet")):
        result = runner.invoke(app, ["dataset", "attach", "second", "--parquet", given, "--spec", spec, "--json"])
        assert result.exit_code == 2, result.output
        error = json.loads(result.output)
        assert error["error"] == "already_attached"
        assert error["message"] == (f"--parquet {path.resolve()}: already attached as dataset 'first'; one location is "
                                    "one dataset (its budget belongs to the table, not to a name), so use that "
                                    "dataset; nothing was stored")
    from service.data.attach.tables import attach_spark

    with pytest.raises(Conflict) as caught:  # refused before any Spark session starts
        attach_spark(engine, "second", f"parquet.`{tmp_path}`", write_spec(tmp_path))
    assert caught.value.code == "already_attached" and "as dataset 'first'" in caught.value.message
    assert [d.name for d in datasets.list_datasets(engine)] == ["first"]


def test_a_file_named_twice_in_one_attach_is_refused(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """Two globs that overlap (or a symlink beside its target) would make DuckDB read a file twice, counting each of
    its rows twice."""
    path = _write(tmp_path, _frame(), "part-1.parquet")
    with pytest.raises(InvalidInput) as caught:
        attach_parquet(engine, "t", [str(tmp_path / "part-*.parquet"), str(path)], write_spec(tmp_path))
    assert caught.value.code == "invalid_parameter" and "this file is named twice" in caught.value.message
    assert datasets.list_datasets(engine) == []


def test_a_path_the_file_system_refuses_is_missing_file(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """Issue 27, finding 5: a 300-character file name (``ENAMETOOLONG``) is one clear error, not a bug."""
    spec = str(write_spec(tmp_path))
    for name in ("a" * 300 + ".parquet", "a" * 300 + "/part-*.parquet"):
        result = runner.invoke(app, ["dataset", "attach", "t", "--parquet", str(tmp_path / name), "--spec", spec,
                                     "--json"])
        assert result.exit_code == 2, result.output
        assert json.loads(result.output)["error"] == "missing_file"
    assert datasets.list_datasets(engine) == []


def test_a_file_duckdb_cannot_read_is_refused_in_our_words(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """DuckDB's own message is never shown (it may quote what it read); ours names the file."""
    (tmp_path / "not.parquet").write_text("age,work\nJane Doe HIV+,x\n")
    _write(tmp_path, _frame())
    for paths, named in [([tmp_path / "not.parquet"], tmp_path / "not.parquet"),
                         ([tmp_path / "t.parquet", tmp_path / "not.parquet"], tmp_path / "not.parquet")]:
        with pytest.raises(InvalidInput) as caught:
            attach_parquet(engine, "t", [str(p) for p in paths], write_spec(tmp_path))
        assert caught.value.code == "invalid_file"
        assert caught.value.message == (f"--parquet {named}: not readable as Parquet (not a Parquet file, damaged, or "
                                        "not readable by this service); nothing was stored")
    assert datasets.list_datasets(engine) == []
