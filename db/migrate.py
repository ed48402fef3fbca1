"""Run the Alembic migrations in ``alembic/`` programmatically (``marginalia init``, and every command and server
start, which bring the database to the newest schema before anything else).

A database already at the newest schema (nearly every start) is recognised without Alembic: its ``alembic_version``
row is compared with the head revision read from the migration files themselves (:func:`head_revision`, which parses
their ``revision`` / ``down_revision`` assignments with :mod:`ast`; tests/db/test_migrate.py checks it equals
Alembic's own head). Importing Alembic and running its environment costs about 0.3 s per process, a fifth of a
short CLI command's time; any other state (no table, an older revision, an unknown one) goes through Alembic, which
upgrades as before. A database at a revision these files do not know was upgraded by a newer marginalia: it is
refused by name (:class:`SchemaNewerThanCode`), never touched (docs/operations.md, "Upgrades and downgrades").
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from db.engine import OPEN_ERRORS, DatabaseUnavailable, make_engine, safe_url, unavailable

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent.parent / "alembic"


class SchemaNewerThanCode(DatabaseUnavailable):
    """The database's schema is at a revision this code does not know: a newer marginalia upgraded it. Nothing is
    read or written; the message names both revisions and what to do."""

    code = "schema_too_new"


@functools.cache
def known_revisions() -> dict[str, str | None]:
    """Every revision of ``alembic/versions`` and the one it follows (its ``down_revision``), read with :mod:`ast`."""
    revisions: dict[str, str | None] = {}
    for path in sorted((MIGRATIONS / "versions").glob("*.py")):
        assigned = {target.id: ast.literal_eval(node.value) for node in ast.parse(path.read_text()).body
                    if isinstance(node, ast.Assign) for target in node.targets
                    if isinstance(target, ast.Name) and target.id in ("revision", "down_revision")}
        revisions[assigned["revision"]] = assigned.get("down_revision")
    return revisions


def head_revision() -> str:
    """The newest revision of ``alembic/versions``: the one no other migration names as its ``down_revision``.
    Refuses (ValueError) a history that is not one line (several heads, or none), which Alembic would refuse too."""
    revisions = known_revisions()
    heads = set(revisions) - set(revisions.values())
    if len(heads) != 1:
        raise ValueError(f"alembic/versions has {len(heads)} heads ({sorted(heads)}); it must have one")
    return heads.pop()


def schema_revisions(engine: Engine) -> list[str] | None:
    """The revisions the database's ``alembic_version`` names (None: no such table, or no database to ask)."""
    try:
        with engine.connect() as connection:
            return list(connection.execute(text("SELECT version_num FROM alembic_version")).scalars())
    except DBAPIError:
        return None


def at_head(engine: Engine) -> bool:
    """Whether the database's ``alembic_version`` names :func:`head_revision` (False when the table is missing)."""
    return schema_revisions(engine) == [head_revision()]


def check_not_newer(engine: Engine, revisions: list[str] | None) -> None:
    """Refuse a database whose schema revision this code does not know (:class:`SchemaNewerThanCode`)."""
    unknown = [r for r in revisions or [] if r not in known_revisions()]
    if unknown:
        raise SchemaNewerThanCode(
            f"the database {safe_url(engine.url.render_as_string(hide_password=False))} is at schema revision "
            f"{unknown[0]!r}, which this marginalia ({_code_version()}) does not know: its newest is "
            f"{head_revision()!r}. A newer marginalia upgraded it; run that version or a later one against it. "
            "Downgrading a schema is not supported (docs/operations.md): nothing was changed.")


def _code_version() -> str:
    from importlib import metadata

    try:
        return f"version {metadata.version('marginalia')}"
    except metadata.PackageNotFoundError:
        return "a source checkout"


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade_to_head(engine: Engine) -> None:
    """Bring the database behind ``engine`` to the newest schema (idempotent; nothing to do, and no Alembic import,
    when it is there already)."""
    revisions = schema_revisions(engine)
    if revisions == [head_revision()]:
        return
    check_not_newer(engine, revisions)
    from alembic import command

    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def open_database(url: str | None = None) -> Engine:
    """An engine on ``url`` (default: MARGINALIA_DATABASE_URL) upgraded to the newest schema; a database
    that cannot be opened raises :class:`db.engine.DatabaseUnavailable` naming the URL and the reason."""
    engine = make_engine(url)
    try:
        upgrade_to_head(engine)
    except SchemaNewerThanCode:
        engine.dispose()
        raise
    except OPEN_ERRORS as exc:
        engine.dispose()
        raise unavailable(engine.url.render_as_string(hide_password=False), exc) from None
    return engine
