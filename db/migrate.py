"""Run the Alembic migrations in ``alembic/`` programmatically (``marginalia init``)."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config
from sqlalchemy import Engine

from alembic import command
from db.engine import OPEN_ERRORS, make_engine, unavailable

MIGRATIONS = Path(__file__).resolve().parent.parent / "alembic"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade_to_head(engine: Engine) -> None:
    """Bring the database behind ``engine`` to the newest schema (idempotent)."""
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
    except OPEN_ERRORS as exc:
        engine.dispose()
        raise unavailable(engine.url.render_as_string(hide_password=False), exc) from None
    return engine
