"""API keys and gateway scopes for the campaign tests: a key of a role (:func:`new_key`), every gateway opened to a
campaign (:func:`open_to_gateways`).
"""

from __future__ import annotations

from sqlalchemy import Engine

from service.access import auth
from service.campaigns import gateways


def new_key(engine: Engine, role: str, name: str) -> tuple[int, str]:
    info, token = auth.create_key(engine, role, name)
    return info.id, token


def open_to_gateways(engine: Engine, campaign: str, reports: int) -> None:
    """A steward opens ``campaign`` to every gateway key, with a quota of ``reports`` reports."""
    for key in auth.list_keys(engine):
        if key.role == "gateway":
            gateways.set_scope(engine, key.id, campaign, reports)
