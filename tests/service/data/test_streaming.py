"""Streaming loads (issue 22): chunks bounded by ``chunk_rows``, exact file lines in every chunk, memory that does
not grow with the file, and nothing stored when a late chunk is bad."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import inspect, select

from db import tables
from db.engine import transaction
from db.models import Dataset
from service import interrupts
from service.data import datasets
from service.data.engines.store import ParquetWriter, data_folder
from service.data.oracle import TableCountOracle
from service.errors import InvalidInput

SPEC = {"format": {"comment": "|"},
        "columns": {"x": {"kind": "ordinal", "edges": [0, 10, 20]}, "y": {"values": ["a", "b"]}}}


def _nothing_stored(engine) -> None:  # noqa: ANN001
    with transaction(engine) as session:
        assert session.execute(select(Dataset)).first() is None
    assert [t for t in inspect(engine).get_table_names() if t.startswith("data_")] == []
    folder = data_folder(engine)  # no Parquet file, complete or partial, is left behind
    assert not folder.exists() or list(folder.iterdir()) == []


def _coded(tmp_path: Path, rows: list[str], name: str = "data.csv") -> tuple[Path, Path]:
    csv = tmp_path / name
    csv.write_text("a,b\n" + "\n".join(rows) + "\n")
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps({"a": 3, "b": 2}))
    return csv, domain


@pytest.mark.parametrize("store", ["sql", "duckdb"])
def test_chunks_are_bounded_and_counted(engine, tmp_path: Path, monkeypatch, store: str) -> None:  # noqa: ANN001
    sizes: list[int] = []
    if store == "sql":
        insert = tables.insert_rows
        monkeypatch.setattr(tables, "insert_rows", lambda c, t, codes: (sizes.append(len(codes)), insert(c, t, codes)))
    else:  # one Parquet row group per chunk
        write = ParquetWriter.write
        monkeypatch.setattr(ParquetWriter, "write", lambda self, codes: (sizes.append(len(codes)), write(self, codes)))
    rows = [f"{i % 3},{i % 2}" for i in range(50)]
    csv, domain = _coded(tmp_path, rows)
    info = datasets.load_coded_csv(engine, "seven", csv, domain, chunk_rows=7, store=store)
    assert sizes == [7] * 7 + [1] and info.rows == 50
    counts = TableCountOracle(engine, datasets.get_dataset(engine, "seven")).counts(("a", "b"))
    expected = np.zeros((3, 2), dtype=np.int64)
    np.add.at(expected, (np.arange(50) % 3, np.arange(50) % 2), 1)
    np.testing.assert_array_equal(counts, expected)


def test_a_bad_cell_in_a_late_chunk_names_its_exact_line(engine, tmp_path: Path) -> None:  # noqa: ANN001
    # blank lines inside the file shift the rows against their lines; the bad cell is in the fourth chunk
    rows = ["0,1"] * 5 + [""] + ["1,0"] * 6 + ["", "  "] + ["2,1"] * 3 + ["1,x"] + ["0,0"] * 4
    csv, domain = _coded(tmp_path, rows)
    line = 1 + rows.index("1,x") + 1
    assert line == 19
    with pytest.raises(InvalidInput) as caught:
        datasets.load_coded_csv(engine, "late", csv, domain, chunk_rows=4)
    assert f"first on line {line}." in caught.value.message and "column 'b'" in caught.value.message
    assert "'x'" not in caught.value.message  # its line, never what it holds (docs/privacy.md 1.3)
    _nothing_stored(engine)


def test_a_short_row_in_a_late_chunk_names_its_line(engine, tmp_path: Path) -> None:  # noqa: ANN001
    csv, domain = _coded(tmp_path, ["0,1"] * 9 + ["2"] + ["0,1"] * 3)
    with pytest.raises(InvalidInput, match="line 11: 1 fields, but every row needs 2"):
        datasets.load_coded_csv(engine, "short", csv, domain, chunk_rows=3)
    _nothing_stored(engine)


def test_raw_files_keep_their_lines_across_chunks_comments_and_files(engine, tmp_path: Path) -> None:  # noqa: ANN001
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    first = tmp_path / "first.csv"
    first.write_text("x,y\n" + "5, a\n" * 11)
    second = tmp_path / "second.csv"
    second.write_text('|a preamble, "quoted", with commas\nx,y\n' + "15, b\n" * 6 + "|comment\n\n" + "15, c\n")
    with pytest.raises(InvalidInput) as caught:
        datasets.load_raw_csv(engine, "raw", [first, second], spec, chunk_rows=4)
    assert str(second) in caught.value.message and "first on line 11" in caught.value.message
    _nothing_stored(engine)
    second.write_text('|a preamble\nx,y\n' + "15, b\n" * 6 + "|comment\n\n" + '"15", "b"\n')
    info = datasets.load_raw_csv(engine, "raw", [first, second], spec, chunk_rows=4)
    assert info.rows == 18
    counts = TableCountOracle(engine, datasets.get_dataset(engine, "raw")).counts(("x", "y"))
    np.testing.assert_array_equal(counts, [[11, 0], [0, 7]])


def test_a_file_that_is_not_utf8_names_its_line(engine, tmp_path: Path) -> None:  # noqa: ANN001
    csv, domain = _coded(tmp_path, ["0,1"] * 6)
    csv.write_bytes(csv.read_bytes() + b"1,\xff\n")
    with pytest.raises(InvalidInput, match="line 8: the file is not UTF-8"):
        datasets.load_coded_csv(engine, "latin", csv, domain, chunk_rows=4)
    _nothing_stored(engine)


def _peak_of_load(engine, tmp_path: Path, rows: int) -> int:  # noqa: ANN001
    """Peak Python memory (tracemalloc: Python objects and numpy arrays) while loading ``rows`` rows in chunks of
    1,000 (the module's chunk size, as the command line uses it)."""
    csv, domain = _coded(tmp_path, [f"{i % 3},{i % 2}" for i in range(rows)], name=f"rows{rows}.csv")
    tracemalloc.start()
    try:
        datasets.load_coded_csv(engine, f"rows{rows}", csv, domain)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_file(engine, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A file four times longer loads within the same memory: the load never holds the file's lines (the
    line count before the load, on main, kept every line in a list: 16 times the small file's peak here)."""
    monkeypatch.setattr(datasets, "CHUNK_ROWS", 1_000)
    _peak_of_load(engine, tmp_path, 2_000)  # first use: imports and caches
    small = _peak_of_load(engine, tmp_path, 20_000)
    large = _peak_of_load(engine, tmp_path, 80_000)
    assert large < 1.5 * small, (small, large)


def test_ctrl_c_between_chunks_stops_the_load_and_stores_nothing(engine, tmp_path: Path) -> None:  # noqa: ANN001
    csv, domain = _coded(tmp_path, ["0,1"] * 20)
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        interrupts.request()

    try:
        with pytest.raises(interrupts.Interrupted, match="nothing was stored"):
            datasets.load_coded_csv(engine, "stopped", csv, domain, progress=progress, chunk_rows=6)
    finally:
        interrupts.clear()
    assert seen == [(6, 20)]
    _nothing_stored(engine)


def test_a_quoted_line_break_is_refused_on_its_line(engine, tmp_path: Path) -> None:  # noqa: ANN001
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    csv = tmp_path / "raw.csv"
    csv.write_text('x,y\n5,a\n5,"a\nb"\n5,b\n')
    with pytest.raises(InvalidInput, match="line 3: malformed CSV"):
        datasets.load_raw_csv(engine, "broken", [csv], spec)
    _nothing_stored(engine)


@pytest.mark.parametrize("failing", [1, 3])  # a middle row group (raised by the next write), the last (by finish)
def test_a_row_group_that_fails_to_write_fails_the_load_and_leaves_no_file(engine, tmp_path: Path, monkeypatch,
                                                                          failing: int) -> None:  # noqa: ANN001
    """Row groups are written by a background thread (service/data/engines/store.py): its error still fails the
    load, and neither the file nor the dataset is left behind."""
    import pyarrow.parquet as pq

    written: list[int] = []
    write_table = pq.ParquetWriter.write_table

    def flaky(self, table, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        written.append(table.num_rows)
        if len(written) == failing:
            raise OSError(28, "No space left on device")
        return write_table(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", flaky)
    csv, domain = _coded(tmp_path, ["0,1"] * 20)
    with pytest.raises(OSError, match="No space left"):
        datasets.load_coded_csv(engine, "full", csv, domain, chunk_rows=7)
    assert written[:failing] == [7, 7, 6][:failing]
    _nothing_stored(engine)
