"""``marginalia serve`` (the HTTP API) and ``marginalia keys create | revoke | list`` (its API keys), ``marginalia keys
scope | unscope | scopes`` (the campaigns a gateway key may submit to, and its quotas)."""

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
    log_level: Annotated[str | None, typer.Option(
        help="debug, info, warning or error, for every logger; default: MARGINALIA_LOG_LEVEL, else info "
             "(MARGINALIA_LOG_FORMAT=json for JSON lines: docs/operations.md).")] = None,
    workers: Annotated[int | None, typer.Option(
        min=1, help="Worker processes (uvicorn); default: one per core, 2 where unknown.")] = None,
) -> None:
    """Serve the HTTP API: migrates the database and recovers interrupted releases first, then serves with
    --workers processes (they share the database: the ledger, jobs and recovery are safe across them)."""
    from db.engine import database_url
    from service.api.server import default_workers
    from service.api.server import serve as run_server

    run_server(database_url(), host, port, log_level=log_level,
               workers=default_workers() if workers is None else workers)


@keys_app.command("create")
@handles_errors
def keys_create(
    role: Annotated[str, typer.Option(help="steward, analyst, auditor, participant or gateway.")],
    name: Annotated[str, typer.Option(help="Who holds the key (shown in the ledger).")],
    dataset: Annotated[list[str] | None, typer.Option(help="Scope a steward key to this dataset; repeatable.")] = None,
    source: Annotated[list[str] | None, typer.Option(
        help="Let a steward key attach tables through this source (`source list`); repeatable. Default: every "
        "source for a key without --dataset, none for a key scoped to datasets.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an API key and print it ONCE; only its SHA-256 hash is stored."""
    from service.access import auth

    info, key = auth.create_key(open_engine(), role, name, dataset or None, source or None)
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
        table = Table("id", "name", "role", "datasets", "sources", "created", "revoked")
        for k in items:
            table.add_row(str(k.id), k.name, k.role, _scope(k.scope), _scope(k.sources) if k.role == "steward" else "",
                          k.created_at.isoformat(timespec="seconds"),
                          k.revoked_at.isoformat(timespec="seconds") if k.revoked_at else "")
        stdout.print(table)

    emit(as_json, [k.to_json() for k in items], human)


def _scope(names: tuple[str, ...] | None) -> str:
    """A scope as `keys list` shows it: ``all`` (unscoped), ``none`` (an empty scope) or the names."""
    if names is None:
        return "all"
    return ", ".join(names) if names else "none"


@keys_app.command("scope")
@handles_errors
def keys_scope(
    key_id: Annotated[int, typer.Argument(help="A gateway key's id (from `keys list`).", metavar="KEY_ID")],
    campaign: Annotated[str, typer.Option(help="The campaign the gateway may submit to.")],
    reports: Annotated[int, typer.Option(help="Its quota: reports over the whole campaign.")],
    per_round: Annotated[int | None, typer.Option(help="Its quota in any one round (default: only --reports).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Open a campaign to a gateway key, with quotas; replaces its earlier quotas there. A gateway submits only to
    the campaigns it is scoped to (403 elsewhere), and a batch that would pass a quota is refused whole."""
    from service.campaigns import gateways

    info = gateways.set_scope(open_engine(), key_id, campaign, reports, per_round, "cli")
    emit(as_json, info.to_json(), lambda: stdout.print(
        f"gateway key {info.key_id} may submit to campaign {info.campaign}: {info.reports:,} reports"
        + (f", {info.per_round:,} per round" if info.per_round is not None else "")
        + f" ({info.used:,} sent so far)", highlight=False))


@keys_app.command("unscope")
@handles_errors
def keys_unscope(
    key_id: Annotated[int, typer.Argument(help="A gateway key's id.", metavar="KEY_ID")],
    campaign: Annotated[str, typer.Option(help="The campaign to close to it.")],
    as_json: JsonFlag = False,
) -> None:
    """Close a campaign to a gateway key (the reports it sent stay)."""
    from service.campaigns import gateways

    gateways.remove_scope(open_engine(), key_id, campaign)
    emit(as_json, {"key_id": key_id, "campaign": campaign, "removed": True}, lambda: stdout.print(
        f"gateway key {key_id} may no longer submit to campaign {campaign}", highlight=False))


@keys_app.command("scopes")
@handles_errors
def keys_scopes(
    key_id: Annotated[int | None, typer.Argument(help="One gateway key's id (default: every gateway).",
                                                 metavar="[KEY_ID]")] = None,
    as_json: JsonFlag = False,
) -> None:
    """The campaigns each gateway key may submit to, its quotas and what it has sent."""
    from service.campaigns import gateways

    items = gateways.list_scopes(open_engine(), key_id)

    def human() -> None:
        table = Table("key", "campaign", "reports", "per round", "sent")
        for s in items:
            table.add_row(str(s.key_id), s.campaign, f"{s.reports:,}",
                          "-" if s.per_round is None else f"{s.per_round:,}", f"{s.used:,}")
        stdout.print(table)

    emit(as_json, [s.to_json() for s in items], human)
