"""A CSV file read in chunks of rows, each row with its file line, in memory bounded by the chunk.

The file is read in blocks of bytes and never held whole. Each block's complete lines are found, and classified,
by numpy on the block's bytes (line breaks, blank lines, lines that start with the ``comment`` string, commas and
quotes per line), never by a Python loop over lines: blank lines and comments are skipped; at most ``chunk_rows``
data lines are kept at a time, with their line numbers, so an error names the exact line of the file whichever
chunk it is in. Each chunk is parsed by pandas' C parser (``pandas.read_csv`` on the chunk's bytes), either as
strings (:meth:`Chunk.strings`) or with the parser's own number conversion (:meth:`Chunk.numbers`). Every row must
have as many fields as the header (or the names given); a row with more or fewer is reported on its line, as such,
not as a bad value. A line's fields are its commas plus one, or, for a line holding a quote, what Python's
:mod:`csv` reads in it.

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

#: A block read from the file holds about this many bytes per row of a chunk (clipped to the bounds below), so the
#: bytes held at once stay proportional to the chunk, not to the file.
BLOCK_BYTES_PER_ROW = 32
MIN_BLOCK_BYTES = 1 << 12
MAX_BLOCK_BYTES = 1 << 22

_NEWLINE, _COMMA, _QUOTE = ord("\n"), ord(","), ord('"')
#: The bytes ``bytes.strip()`` removes: a line of only these is blank.
_BLANK = np.zeros(256, dtype=bool)
_BLANK[list(b" \t\n\r\x0b\x0c")] = True


@dataclass(frozen=True)
class Chunk:
    """Up to ``chunk_rows`` data lines of ``path``: their bytes (with their line ends) joined in ``data``, row ``i``
    being ``data[offsets[i]:offsets[i + 1]]``, and their file lines."""

    path: Path
    columns: tuple[str, ...]
    data: bytes
    offsets: np.ndarray
    lines: np.ndarray
    strip: bool

    def __len__(self) -> int:
        return len(self.lines)

    def row(self, i: int) -> bytes:
        return self.data[int(self.offsets[i]):int(self.offsets[i + 1])]

    def strings(self) -> pd.DataFrame:
        """The chunk as strings, exactly as written (only leading spaces after a comma dropped with ``strip``)."""
        return self._parse(dtype=str, na_filter=False)

    def numbers(self) -> pd.DataFrame:
        """The chunk with pandas' number conversion: integer or float columns where every cell is a number (an
        empty or ``NA`` cell is NaN); other columns as objects."""
        return self._parse()

    def _parse(self, **options: object) -> pd.DataFrame:
        try:
            frame = pd.read_csv(io.BytesIO(self.data), header=None, names=range(len(self.columns)),
                                index_col=False, skipinitialspace=self.strip, skip_blank_lines=False,
                                encoding="utf-8", engine="c", **options)
        except UnicodeDecodeError:
            raise _not_utf8(self) from None
        except (pd.errors.ParserError, ValueError) as exc:
            first, last = int(self.lines[0]), int(self.lines[-1])
            raise InvalidInput(f"{self.path}, lines {first}–{last}: malformed CSV ({exc}); a row is one line, "
                               "and a quoted field may not span lines", code="malformed_csv") from None
        if len(frame) != len(self):
            raise InvalidInput(f"{self.path}, lines {int(self.lines[0])}–{int(self.lines[-1])}: a quoted field "
                               "spans lines; a row must be one line", code="malformed_csv")
        frame.columns = list(self.columns)
        return frame


@dataclass(frozen=True)
class _Lines:
    """Some complete lines of a block: ``block[starts[i]:ends[i]]`` is file line ``numbers[i]``, with ``commas[i]``
    commas and ``quoted[i]`` true when it holds a quote."""

    block: bytes
    starts: np.ndarray
    ends: np.ndarray
    numbers: np.ndarray
    commas: np.ndarray
    quoted: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def line(self, i: int) -> bytes:
        return self.block[int(self.starts[i]):int(self.ends[i])]

    def take(self, index: np.ndarray | slice) -> _Lines:
        return _Lines(self.block, self.starts[index], self.ends[index], self.numbers[index], self.commas[index],
                      self.quoted[index])

    def data(self) -> bytes:
        """The lines' bytes joined (one slice of the block when no skipped line lies between them)."""
        if len(self) == 0:
            return b""
        if np.array_equal(self.starts[1:], self.ends[:-1]):
            return self.block[int(self.starts[0]):int(self.ends[-1])]
        return b"".join(self.line(i) for i in range(len(self)))


def _blocks(path: Path, block_bytes: int) -> Iterator[tuple[bytes, np.ndarray, int]]:
    """``(block, ends, first)``: the file's bytes in blocks of whole lines, ``ends`` the end (past its ``\\n``, or the
    end of the file) of each line of the block and ``first`` the file line number of its first line."""
    carry, first = b"", 1
    try:
        with path.open("rb") as handle:
            while True:
                piece = handle.read(block_bytes)
                if not piece:
                    if carry:
                        yield carry, np.asarray([len(carry)], dtype=np.int64), first
                    return
                block = carry + piece
                ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == _NEWLINE) + 1
                if ends.size == 0:
                    carry = block
                    continue
                cut = int(ends[-1])
                carry = block[cut:]
                yield block[:cut] if carry else block, ends, first
                first += ends.size
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}", code="unreadable_file") from None


def _lines(path: Path, comment: str | None, block_bytes: int, fields: bool = True) -> Iterator[_Lines]:
    """The lines of ``path`` that are neither blank nor start with ``comment``, block by block. Only a line that
    starts with a blank byte can be blank, so only those are looked at one by one; a line's commas and quotes are
    counted from their positions in the block (``searchsorted`` at the line ends; not at all without ``fields``,
    when only the lines are wanted)."""
    prefix = comment.encode() if comment else None
    for block, ends, first in _blocks(path, block_bytes):
        codes = np.frombuffer(block, dtype=np.uint8)
        starts = np.concatenate(([0], ends[:-1]))
        keep = np.ones(len(starts), dtype=bool)
        for i in np.flatnonzero(_BLANK[codes[starts]]):
            keep[i] = bool(block[int(starts[i]):int(ends[i])].strip())
        if prefix is not None:
            for i in np.flatnonzero(codes[starts] == prefix[0]):
                keep[i] &= not block.startswith(prefix, int(starts[i]), int(ends[i]))
        kept = np.flatnonzero(keep)
        if kept.size == 0:
            continue
        starts, ends = starts[kept], ends[kept]
        if not fields:
            commas, quoted = np.zeros(len(kept), dtype=np.int64), np.zeros(len(kept), dtype=bool)
        else:
            commas = _per_line(np.flatnonzero(codes == _COMMA), starts, ends)
            quoted = (_per_line(np.flatnonzero(codes == _QUOTE), starts, ends) > 0
                      if np.count_nonzero(codes == _QUOTE) else np.zeros(len(kept), dtype=bool))
        yield _Lines(block, starts, ends, first + kept, commas, quoted)


def _per_line(positions: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many of the sorted ``positions`` fall in each line ``[starts[i], ends[i])``."""
    return np.searchsorted(positions, ends) - np.searchsorted(positions, starts)


def _block_bytes(chunk_rows: int) -> int:
    return int(np.clip(chunk_rows * BLOCK_BYTES_PER_ROW, MIN_BLOCK_BYTES, MAX_BLOCK_BYTES))


def chunks(path: Path, chunk_rows: int, *, comment: str | None = None, names: Sequence[str] | None = None,
           strip: bool = True) -> Iterator[Chunk]:
    """The data rows of ``path`` in chunks of at most ``chunk_rows``. The first line that is neither blank nor a
    comment is the header, unless ``names`` names the columns (a file without a header)."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    columns = None if names is None else tuple(names)
    pending: list[_Lines] = []
    held = 0
    for lines in _lines(path, comment, _block_bytes(chunk_rows)):
        if columns is None:
            columns = tuple(f.strip() for f in _fields(path, lines.line(0), int(lines.numbers[0]), strip))
            lines = lines.take(slice(1, None))
        while len(lines):
            part = lines.take(slice(0, chunk_rows - held))
            pending.append(part)
            held += len(part)
            lines = lines.take(slice(len(part), None))
            if held == chunk_rows:
                yield _checked(path, columns, pending, strip, names is not None)
                pending, held = [], 0
    if held:
        yield _checked(path, columns, pending, strip, names is not None)  # type: ignore[arg-type]


def header(path: Path) -> list[str]:
    """The column names of the first line that is not blank, or an :class:`InvalidInput` if there is none."""
    for lines in _lines(path, None, MIN_BLOCK_BYTES):
        return [f.strip() for f in _fields(path, lines.line(0), int(lines.numbers[0]), True)]
    raise InvalidInput(f"{path}: the file is empty; nothing was stored", code="empty_file")


def count_data_lines(path: Path, header: bool = True, comment: str | None = None, chunk_rows: int = 50_000) -> int:
    """The number of data rows (lines neither blank nor comments, less the header), counted without keeping
    them, in the blocks :func:`chunks` reads for ``chunk_rows``; an empty file, or one with a header only, is an
    :class:`InvalidInput`."""
    count = sum(len(lines) for lines in _lines(path, comment, _block_bytes(chunk_rows), fields=False))
    if count == 0:
        raise InvalidInput(f"{path}: the file is empty; nothing was stored", code="empty_file")
    count -= 1 if header else 0
    if count <= 0:
        raise InvalidInput(f"{path}: the file has no data rows; nothing was stored", code="empty_file")
    return count


def _fields(path: Path, line: bytes, number: int, strip: bool) -> list[str]:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{path}, line {number}: the file is not UTF-8 text", code="malformed_csv") from None
    try:
        return next(csv.reader([text], skipinitialspace=strip, strict=True))
    except (csv.Error, StopIteration) as exc:
        raise InvalidInput(f"{path}, line {number}: malformed CSV ({exc})", code="malformed_csv") from None


def _checked(path: Path, columns: tuple[str, ...], parts: list[_Lines], strip: bool, named: bool) -> Chunk:
    """The chunk of the lines ``parts``, once every row has as many fields as there are columns."""
    width = len(columns)
    lines = np.concatenate([p.numbers for p in parts])
    counts = np.concatenate([p.commas for p in parts]) + 1
    offset = 0
    for part in parts:  # a line holding a quote: its fields as Python's csv reads them (a quoted comma is no field)
        for i in np.flatnonzero(part.quoted):
            counts[offset + i] = len(_fields(path, part.line(int(i)), int(part.numbers[i]), strip))
        offset += len(part)
    wrong = np.flatnonzero(counts != width)
    if wrong.size:
        first = int(wrong[0])
        raise InvalidInput(
            f"{path}, line {lines[first]}: {int(counts[first])} fields, but every row needs {width} "
            f"({'the columns the spec names' if named else 'as the header has'}); nothing was stored",
            code="malformed_csv")
    sizes = np.concatenate([p.ends - p.starts for p in parts])
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    data = parts[0].data() if len(parts) == 1 else b"".join(p.data() for p in parts)
    return Chunk(path, columns, data, offsets, lines, strip)


def _not_utf8(chunk: Chunk) -> InvalidInput:
    for i, number in enumerate(chunk.lines):
        try:
            chunk.row(i).decode("utf-8")
        except UnicodeDecodeError:
            return InvalidInput(f"{chunk.path}, line {int(number)}: the file is not UTF-8 text", code="malformed_csv")
    return InvalidInput(f"{chunk.path}, lines {int(chunk.lines[0])}–{int(chunk.lines[-1])}: the file is not UTF-8 "
                        "text", code="malformed_csv")
