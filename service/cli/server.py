"""``marginalia serve`` (the HTTP API) and ``marginalia keys create | revoke | list`` (its API keys)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from service.cli.common import (
    JsonFlag,
    Typer,
    app,
    emit,
    handles_errors,
    open_engine,
    stdout,
)

keys_app = Typer(help="Create, list and revoke API keys (a key is shown once).")


@app.command()
@handles_errors
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on (use a TLS proxy beyond loopback).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve the HTTP API: migrates the database and recovers interrupted releases first."""
    from db.engine import database_url
    from service.api.server import serve as run_server

    run_server(database_url(), host, port, log_level=log_level)


@keys_app.command("create")
@handles_errors
def keys_create(
    role: Annotated[str, typer.Option(help="steward, analyst or auditor.")],
    name: Annotated[str, typer.Option(help="Who holds the key (shown in the ledger).")],
    dataset: Annotated[list[str] | None, typer.Option(help="Scope a steward key to this dataset; repeatable.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an API key and print it ONCE; only its SHA-256 hash is stored."""
    from service.access import auth

    info, key = auth.create_key(open_engine(), role, name, dataset or None)
    emit(as_json, {"key": key, **info.to_json()}, lambda: stdout.print(
        f"API key {info.id} for {info.role} [bold]{info.name}[/]: {key}\n"
        "store it now: it is not kept and cannot be shown again", highlight=False))


@keys_app.command("revoke")
@handles_errors
def keys_revoke(
    key_id: Annotated[int, typer.Argument(help="Key id (from `keys list`).", metavar="KEY_ID")],
    as_json: JsonFlag = False,
) -> None:
    """Revoke a key: every later request made with it is refused (401)."""
    from service.access import auth

    info = auth.revoke_key(open_engine(), key_id)
    emit(as_json, info.to_json(), lambda: stdout.print(f"revoked API key {info.id} ({info.role} {info.name})"))


@keys_app.command("list")
@handles_errors
def keys_list(as_json: JsonFlag = False) -> None:
    """List keys (never the keys themselves nor their hashes)."""
    from service.access import auth

    items = auth.list_keys(open_engine())

    def human() -> None:
        table = Table("id", "name", "role", "datasets", "created", "revoked")
        for k in items:
            table.add_row(str(k.id), k.name, k.role, ", ".join(k.scope) if k.scope else "all",
                          k.created_at.isoformat(timespec="seconds"),
                          k.revoked_at.isoformat(timespec="seconds") if k.revoked_at else "")
        stdout.print(table)

    emit(as_json, [k.to_json() for k in items], human)
