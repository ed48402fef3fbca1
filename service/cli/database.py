"""``marginalia init``: create or upgrade the database and recover what killed processes left."""

from __future__ import annotations

from service.cli.common import (
    JsonFlag,
    app,
    emit,
    handles_errors,
    open_and_recover,
    stdout,
)


@app.command()
@handles_errors
def init(as_json: JsonFlag = False) -> None:
    """Create or upgrade the database schema and recover what killed processes left pending.

    The database is MARGINALIA_DATABASE_URL (default ./marginalia.db). Every command recovers too."""
    from db.engine import database_url, safe_url

    _, recovered = open_and_recover()
    url = safe_url(database_url())
    emit(as_json, {"database": url, "status": "ready", "recovered_releases": [f.to_json() for f in recovered]},
          lambda: stdout.print(f"database ready: {url}", highlight=False))
