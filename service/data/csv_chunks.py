"""A CSV file read in chunks of rows, each row with its file line, in memory bounded by the chunk.

The file is read line by line as bytes and never held whole: blank lines, and lines that start with
the ``comment`` string, are skipped; at most ``chunk_rows`` data lines are kept at a time, with their
line numbers, so an error names the exact line of the file whichever chunk it is in. Each chunk is
parsed by pandas' C parser (``pandas.read_csv`` on the chunk's bytes), either as strings
(:meth:`Chunk.strings`) or with the parser's own number conversion (:meth:`Chunk.numbers`), which is
where the time of a large load goes. Every row must have as many fields as the header (or the names
given); a row with more or fewer is reported on its line, as such, not as a bad value.

A row is one line: a quoted field may hold commas but not a line break (the chunks are cut at lines).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from service.errors import InvalidInput


@dataclass(frozen=True)
class Chunk:
    """Up to ``chunk_rows`` data lines of ``path`` (bytes, with their line ends) and their file lines."""

    path: Path
    columns: tuple[str, ...]
    rows: list[bytes]
    lines: np.ndarray
    strip: bool

    def __len__(self) -> int:
        return len(self.rows)

    def strings(self) -> pd.DataFrame:
        """The chunk as strings, exactly as written (only leading spaces after a comma dropped with ``strip``)."""
        return self._parse(dtype=str, na_filter=False)

    def numbers(self) -> pd.DataFrame:
        """The chunk with pandas' number conversion: integer or float columns where every cell is a number (an
        empty or ``NA`` cell is NaN); other columns as objects."""
        return self._parse()

    def _parse(self, **options: object) -> pd.DataFrame:
        try:
            frame = pd.read_csv(io.BytesIO(b"".join(self.rows)), header=None, names=range(len(self.columns)),
                                index_col=False, skipinitialspace=self.strip, skip_blank_lines=False,
                                encoding="utf-8", engine="c", **options)
        except UnicodeDecodeError:
            raise _not_utf8(self.path, self.rows, self.lines) from None
        except (pd.errors.ParserError, ValueError) as exc:
            first, last = int(self.lines[0]), int(self.lines[-1])
            raise InvalidInput(f"{self.path}, lines {first}–{last}: malformed CSV ({exc}); a row is one line, "
                               "and a quoted field may not span lines", code="malformed_csv") from None
        if len(frame) != len(self.rows):
            raise InvalidInput(f"{self.path}, lines {int(self.lines[0])}–{int(self.lines[-1])}: a quoted field "
                               "spans lines; a row must be one line", code="malformed_csv")
        frame.columns = list(self.columns)
        return frame


def chunks(path: Path, chunk_rows: int, *, comment: str | None = None, names: Sequence[str] | None = None,
           strip: bool = True) -> Iterator[Chunk]:
    """The data rows of ``path`` in chunks of at most ``chunk_rows``. The first line that is neither blank nor a
    comment is the header, unless ``names`` names the columns (a file without a header)."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    prefix = comment.encode() if comment else None
    columns = None if names is None else tuple(names)
    rows: list[bytes] = []
    lines: list[int] = []
    for number, line in _lines(path):
        if not line.strip() or (prefix is not None and line.startswith(prefix)):
            continue
        if columns is None:
            columns = tuple(f.strip() for f in _fields(path, line, number, strip))
            continue
        rows.append(line)
        lines.append(number)
        if len(rows) == chunk_rows:
            yield _checked(path, columns, rows, lines, strip, names is not None)
            rows, lines = [], []
    if rows:
        yield _checked(path, columns, rows, lines, strip, names is not None)  # type: ignore[arg-type]


def header(path: Path) -> list[str]:
    """The column names of the first line that is not blank, or an :class:`InvalidInput` if there is none."""
    for number, line in _lines(path):
        if line.strip():
            return [f.strip() for f in _fields(path, line, number, True)]
    raise InvalidInput(f"{path}: the file is empty; nothing was stored", code="empty_file")


def count_data_lines(path: Path, header: bool = True, comment: str | None = None) -> int:
    """The number of data rows (lines neither blank nor comments, less the header), counted without keeping
    them; an empty file, or one with a header only, is an :class:`InvalidInput`."""
    prefix = comment.encode() if comment else None
    count = sum(1 for _, line in _lines(path) if line.strip() and not (prefix and line.startswith(prefix)))
    if count == 0:
        raise InvalidInput(f"{path}: the file is empty; nothing was stored", code="empty_file")
    count -= 1 if header else 0
    if count <= 0:
        raise InvalidInput(f"{path}: the file has no data rows; nothing was stored", code="empty_file")
    return count


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        with path.open("rb") as handle:
            yield from enumerate(handle, start=1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}", code="unreadable_file") from None


def _fields(path: Path, line: bytes, number: int, strip: bool) -> list[str]:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise _not_utf8(path, [line], np.asarray([number])) from None
    try:
        return next(csv.reader([text], skipinitialspace=strip, strict=True))
    except (csv.Error, StopIteration) as exc:
        raise InvalidInput(f"{path}, line {number}: malformed CSV ({exc})", code="malformed_csv") from None


def _checked(path: Path, columns: tuple[str, ...], rows: list[bytes], lines: list[int], strip: bool,
             named: bool) -> Chunk:
    """The chunk, once every row has as many fields as there are columns."""
    width = len(columns)
    if any(b'"' in row for row in rows):
        counts = np.fromiter((len(_fields(path, r, n, strip)) for r, n in zip(rows, lines, strict=True)),
                             dtype=np.int64, count=len(rows))
    else:
        counts = np.fromiter((r.count(b",") for r in rows), dtype=np.int64, count=len(rows)) + 1
    wrong = np.flatnonzero(counts != width)
    if wrong.size:
        first = int(wrong[0])
        raise InvalidInput(
            f"{path}, line {lines[first]}: {int(counts[first])} fields, but every row needs {width} "
            f"({'the columns the spec names' if named else 'as the header has'}); nothing was stored",
            code="malformed_csv")
    return Chunk(path, columns, rows, np.asarray(lines, dtype=np.int64), strip)


def _not_utf8(path: Path, rows: list[bytes], lines: np.ndarray) -> InvalidInput:
    for row, number in zip(rows, lines, strict=True):
        try:
            row.decode("utf-8")
        except UnicodeDecodeError:
            return InvalidInput(f"{path}, line {int(number)}: the file is not UTF-8 text", code="malformed_csv")
    return InvalidInput(f"{path}, lines {int(lines[0])}–{int(lines[-1])}: the file is not UTF-8 text",
                        code="malformed_csv")
