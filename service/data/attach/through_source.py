"""Attaching a table through a registered source (:mod:`service.data.attach.sources`): what ``POST
/datasets/attach`` runs.

The caller names a source and, inside it, Parquet files or globs relative to the source's folder (``parquet``), or
a table (``table``, for a SQL database or the Spark session), plus the public binning spec (``bins``). The attach
itself is :mod:`service.data.attach.tables`'s, with every check it makes (columns, values, rows) before anything is
stored.

**Paths stay inside the folder.** A path that is absolute, holds ``..`` or ``~``, or resolves (through symlinks,
and for a glob each file it matches) outside the folder is refused, naming the parameter; one the file system
refuses to look at (a name too long, a symlink loop, no permission: any ``OSError``) is ``missing_file``, naming the
parameter and the pattern, never the folder. A glob is expanded here,
once, to the real paths of the files it matches (``**`` recurses), and the dataset reads exactly those files: what
was checked is what DuckDB reads (DuckDB's own glob would be expanded again at every scan). A file whose real path
holds a glob character (``*?[``) is refused, since DuckDB would read its path as a pattern. A Spark table is a
catalog name (``db.table``), never a path Spark reads.

**Errors never show where the source reads.** Every message (ours, DuckDB's, the database driver's) is rewritten:
the folder, the URL, its host, port, role and password, the Spark Connect URL and its host and port become the
source's name (or ``<hidden>``), and the command-line option names become the body's parameter names (:func:`redact`).
"""

from __future__ import annotations

import glob
import itertools
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from db.engine import normalized_url, safe_url
from service.data.attach import tables
from service.data.attach.sources import GLOB_CHARACTERS, PARQUET, SPARK_SOURCE, SQL_SOURCE, Source, get_source
from service.data.datasets import DatasetInfo
from service.error_text import is_bad_input
from service.errors import InvalidInput, ServiceError

#: The most files one attach may read (a glob matching more is refused).
MAX_FILES = 10_000
#: A Spark catalog name: ``table``, ``db.table`` or ``catalog.db.table`` (no path, no quoting).
SPARK_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")
HIDDEN = "<hidden>"
#: The phases an attach reports, as ``progress(step, STEPS, phase)``: finding what to read in the source, the one
#: scan checking every row against the spec (and counting them), then the dataset stored (``STEPS`` of ``STEPS``).
PHASES = ("finding the table in its source", "checking every row against the spec", "attached")
STEPS = len(PHASES) - 1


def attach_from_source(engine: Engine, name: str, source_name: str, *, parquet: Sequence[str] | None = None,
                       table: str | None = None, bins: tables.SpecSource, privacy_unit: str | None = None,
                       progress: Callable[[int, int, str], None] | None = None,
                       may_name: tables.MayName = tables.everyone) -> DatasetInfo:
    """Attach dataset ``name`` from source ``source_name`` (module docstring), one row per value of the column
    ``privacy_unit`` when given (:mod:`service.data.attach.tables`); every error is :func:`redact`-ed. ``progress``
    gets the phases (:data:`PHASES`: the engines report no progress inside their one checking scan), never a path.
    ``may_name(dataset)``: whether the caller may be told that ``dataset`` already reads the table (the caller's
    scope covers it). Whether the caller may use the source at all is the route's check, made before this call
    (:func:`service.api.security.check_source_scope`)."""
    progress = progress or _silent
    progress(0, STEPS, PHASES[0])
    source = get_source(engine, source_name)
    try:
        if source.kind == PARQUET:
            if parquet is None or table is not None:
                raise InvalidInput(f"parameter parquet: source {source.name!r} is a folder of Parquet files; give "
                                   "parquet (paths or globs inside it), not table", code="invalid_parameter")
            files = resolve_inside(source, parquet)
            progress(1, STEPS, PHASES[1])
            info = tables.attach_parquet(engine, name, files, bins, privacy_unit=privacy_unit, may_name=may_name)
        elif table is None or parquet is not None:
            raise InvalidInput(f"parameter table: source {source.name!r} is a {source.kind} source; give table, not "
                               "parquet", code="invalid_parameter")
        elif source.kind == SQL_SOURCE:
            progress(1, STEPS, PHASES[1])
            info = tables.attach_sql(engine, name, str(source.url), table, bins, privacy_unit=privacy_unit,
                                     may_name=may_name, through=(int(source.id or 0), source.connection()))
        elif not SPARK_TABLE.match(table):
            raise InvalidInput(f"parameter table: {table!r} is not a Spark catalog name (table, db.table or "
                               "catalog.db.table); paths are not attachable over HTTP", code="invalid_parameter")
        else:
            progress(1, STEPS, PHASES[1])
            info = tables.attach_spark(engine, name, table, bins, privacy_unit=privacy_unit, may_name=may_name)
    except ServiceError as exc:
        raise redact(exc, source) from None
    except ValueError as exc:  # a bad spec or name found below the service layer: still bad input, still redacted
        if not is_bad_input(exc):  # a library's ValueError may quote the data: the API's internal error, withheld
            raise
        raise redact(InvalidInput(str(exc), code="invalid_parameter"), source) from None
    progress(STEPS, STEPS, PHASES[STEPS])
    return info


def _silent(done: int, total: int, message: str) -> None:  # noqa: ARG001
    return None


def resolve_inside(source: Source, patterns: Sequence[str]) -> list[str]:
    """The real paths of the files ``patterns`` (relative paths or globs) name inside ``source``'s folder, each
    checked to stay inside it (module docstring); errors name the parameter and the pattern, never the folder."""
    if not patterns:
        raise InvalidInput("parameter parquet: give at least one path or glob inside the source's folder",
                           code="invalid_parameter")
    root = Path(str(source.root))
    files: list[str] = []
    for pattern in patterns:
        _check_relative(pattern)
        try:
            found = [f for f in (_inside(root, pattern, m) for m in _matches(root, pattern)) if f is not None]
        except OSError:  # the name is too long, a symlink loops, a folder may not be read: never the folder's path
            raise InvalidInput(f"parameter parquet: {pattern!r}: this path cannot be read in source {source.name!r} "
                               "(too long a name, a symlink loop, or no permission); nothing was stored",
                               code="missing_file") from None
        if not found:
            what = "no file matches this pattern" if GLOB_CHARACTERS & set(pattern) else "no such file"
            raise InvalidInput(f"parameter parquet: {pattern!r}: {what} in source {source.name!r}; nothing was stored",
                               code="missing_file")
        files += [f for f in found if f not in files]
        if len(files) > MAX_FILES:
            raise InvalidInput(f"parameter parquet: more than {MAX_FILES} files; attach fewer, larger files",
                               code="invalid_parameter")
    return files


def _matches(root: Path, pattern: str) -> list[str]:
    """``pattern`` itself, or for a glob its matches relative to ``root`` (sorted); more than :data:`MAX_FILES`
    is refused before the walk goes on (a ``**`` over a large tree stops early)."""
    if not GLOB_CHARACTERS & set(pattern):
        return [pattern]
    matches = list(itertools.islice(glob.iglob(pattern, root_dir=root, recursive=True), MAX_FILES + 1))
    if len(matches) > MAX_FILES:
        raise InvalidInput(f"parameter parquet: {pattern!r} matches more than {MAX_FILES} paths; attach fewer, larger "
                           "files", code="invalid_parameter")
    return sorted(matches)


def _check_relative(pattern: str) -> None:
    path = PurePosixPath(pattern)
    if not pattern or pattern.strip() != pattern:
        raise InvalidInput(f"parameter parquet: {pattern!r} is empty or has surrounding spaces",
                           code="invalid_parameter")
    if path.is_absolute() or pattern.startswith("~") or "\\" in pattern:
        raise InvalidInput(f"parameter parquet: {pattern!r} must be a path relative to the source's folder",
                           code="invalid_parameter")
    if ".." in path.parts:
        raise InvalidInput(f"parameter parquet: {pattern!r} must stay inside the source's folder (no '..')",
                           code="invalid_parameter")


def _inside(root: Path, pattern: str, match: str) -> str | None:
    """The real path of ``match`` (relative to ``root``) when it is a file inside ``root``; a directory a glob
    matched is skipped (None); anything that leaves the folder is refused."""
    real = Path(os.path.realpath(root / match))
    if not real.is_relative_to(root):
        raise InvalidInput(f"parameter parquet: {pattern!r} leads outside the source's folder (a symlink?); "
                           "nothing was stored", code="outside_source")
    if not real.is_file():
        return None
    if GLOB_CHARACTERS & set(str(real.relative_to(root))):
        raise InvalidInput(f"parameter parquet: {pattern!r} matches a file whose name holds one of "
                           f"{''.join(sorted(GLOB_CHARACTERS))}, which DuckDB would read as a pattern; rename it",
                           code="invalid_parameter")
    return str(real)


def redact(exc: ServiceError, source: Source) -> ServiceError:
    """``exc`` with every trace of where ``source`` reads replaced (module docstring); returns ``exc``."""
    label = f"source {source.name!r}"
    replacements: list[tuple[str, str]] = []
    if source.root is not None:
        replacements += [(source.root + os.sep, ""), (source.root, label)]
    if source.url is not None:
        for url in {source.url, normalized_url(source.url)}:
            shown = safe_url(url)
            replacements += [(f"--sql {shown} --table ", f"{label}, table "), (f"{shown} table ", f"{label}, table "),
                             (url, label), (shown, label)]
        replacements += [(secret, HIDDEN) for secret in _url_parts(source.url)]
    remote = os.environ.get("MARGINALIA_SPARK_REMOTE")
    if source.kind == SPARK_SOURCE and remote:
        replacements += [(remote, label), *((secret, HIDDEN) for secret in _url_parts(remote.replace("sc://",
                                                                                                        "http://")))]
    message = exc.message
    for secret, shown in replacements:
        if secret:
            message = message.replace(secret, shown)
    for url in filter(None, (source.url, remote if source.kind == SPARK_SOURCE else None)):
        message = _without_port_and_role(message, url)
    for option, parameter in (("--parquet ", "parameter parquet: "), ("--spark ", "table "), ("--table ", "table "),
                              ("--privacy-unit", "privacy_unit"),
                              (" (MARGINALIA_DATABASE_URL)", "")):  # db.engine's wording for the service database
        message = message.replace(option, parameter)
    exc.message = message
    exc.args = (message,)
    return exc


def _without_port_and_role(message: str, url: str) -> str:
    """``message`` with ``url``'s port (after a colon, or as "port N") and role (as a whole word: a role named
    ``postgres`` is hidden, the word PostgreSQL is not) replaced by :data:`HIDDEN`."""
    try:
        parsed = make_url(normalized_url(url.replace("sc://", "http://", 1)))
    except ArgumentError:
        return message
    if parsed.port is not None:
        message = re.sub(rf"(?<=:){parsed.port}\b|(?<=\bport ){parsed.port}\b", HIDDEN, message)
    if parsed.username:
        message = re.sub(rf"(?<![\w.-]){re.escape(parsed.username)}(?![\w.-])", HIDDEN, message)
    return message


def _url_parts(url: str) -> list[str]:
    """The host, password and (for a SQLite file) the file path of ``url``, longest first."""
    try:
        parsed = make_url(normalized_url(url))
    except ArgumentError:
        return []
    parts = [parsed.host, parsed.password]
    if parsed.drivername.startswith("sqlite"):
        parts.append(parsed.database)
        if parsed.database:
            parts.append(os.path.realpath(parsed.database))
    return sorted({str(p) for p in parts if p and str(p) not in (":memory:",)}, key=len, reverse=True)
