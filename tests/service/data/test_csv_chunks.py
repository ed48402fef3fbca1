"""The CSV reader's block seams (issue 21, load speed): the file is split into lines by numpy in blocks of bytes, so
a line cut by a block's end, a line longer than a block, CRLF line ends, a last line without its line break, blank
and comment lines and quoted commas must give exactly the rows, lines and field counts of reading line by line,
whatever the block size."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from service.data import csv_chunks
from service.errors import InvalidInput


def _expected(text: bytes, comment: bytes | None) -> tuple[list[str], list[bytes], list[int]]:
    """The header, data rows and their file lines, read one line at a time (the reader before blocks)."""
    header, rows, lines = None, [], []
    for number, line in enumerate(io.BytesIO(text), start=1):
        if not line.strip() or (comment and line.startswith(comment)):
            continue
        if header is None:
            header = [f.strip() for f in next(csv.reader([line.decode()], skipinitialspace=True))]
            continue
        rows.append(line)
        lines.append(number)
    return header, rows, lines


def _read(path: Path, chunk_rows: int, comment: str | None) -> tuple[list[str], list[bytes], list[int], list[int]]:
    header, rows, lines, sizes = None, [], [], []
    for chunk in csv_chunks.chunks(path, chunk_rows, comment=comment):
        header = list(chunk.columns)
        rows += [chunk.row(i) for i in range(len(chunk))]
        lines += chunk.lines.tolist()
        sizes.append(len(chunk))
        assert chunk.data == b"".join(chunk.row(i) for i in range(len(chunk)))
    return header, rows, lines, sizes


TEXT = (b"# a comment, with a comma\r\n"
        b"\n"
        b"  a , b,c\r\n"
        + b"".join(b"%d,%d,%d\r\n" % (i, i % 7, i % 3) for i in range(40))
        + b"   \t\r\n"
        + b'1,"x, y",2\n'
        + b"#1,2,3\n"
        + b"2," + b"9" * 300 + b",4\n"  # longer than the smallest block
        + b" 5,6,7\n"
        + b"8,9,10")  # no line break at the end


@pytest.mark.parametrize("block", [4, 7, 16, 64, 1 << 12])
@pytest.mark.parametrize("chunk_rows", [1, 3, 50])
def test_rows_and_lines_do_not_depend_on_the_block_size(tmp_path: Path, monkeypatch, block: int,
                                                        chunk_rows: int) -> None:  # noqa: ANN001
    monkeypatch.setattr(csv_chunks, "MIN_BLOCK_BYTES", block)
    monkeypatch.setattr(csv_chunks, "MAX_BLOCK_BYTES", block)
    path = tmp_path / "t.csv"
    path.write_bytes(TEXT)
    header, rows, lines = _expected(TEXT, b"#")
    got_header, got_rows, got_lines, sizes = _read(path, chunk_rows, "#")
    assert (got_header, got_rows, got_lines) == (header, rows, lines) == (["a", "b", "c"], rows, lines)
    assert sizes == [chunk_rows] * (len(rows) // chunk_rows) + ([len(rows) % chunk_rows] if len(rows) % chunk_rows
                                                                 else [])
    assert csv_chunks.count_data_lines(path, comment="#", chunk_rows=chunk_rows) == len(rows) == 44
    last = list(csv_chunks.chunks(path, chunk_rows, comment="#"))[-1].strings()
    assert last.iloc[-1].tolist() == ["8", "9", "10"]


@pytest.mark.parametrize("block", [4, 1 << 12])
def test_a_row_with_a_field_too_many_is_named_after_a_quoted_comma(tmp_path: Path, monkeypatch,
                                                                  block: int) -> None:  # noqa: ANN001
    monkeypatch.setattr(csv_chunks, "MIN_BLOCK_BYTES", block)
    monkeypatch.setattr(csv_chunks, "MAX_BLOCK_BYTES", block)
    path = tmp_path / "t.csv"
    path.write_bytes(b'a,b\n1,"2,3"\n\n4,5\n6,7,8\n9,10\n')  # the quoted comma is one field; line 5 has three
    with pytest.raises(InvalidInput, match="line 5: 3 fields, but every row needs 2"):
        list(csv_chunks.chunks(path, 10))


def test_a_file_of_blank_lines_and_comments_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b"\n  \n#x\n\r\n")
    with pytest.raises(InvalidInput, match="the file is empty"):
        csv_chunks.count_data_lines(path, comment="#")
    assert list(csv_chunks.chunks(path, 10, comment="#")) == []
