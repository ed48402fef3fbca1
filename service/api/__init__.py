"""The HTTP API (FastAPI). ``create_app(engine)`` builds it; ``marginalia serve`` runs it.

``create_app`` is imported on first use (PEP 562), so that importing a light module of this package does not build
the whole application: uvicorn's worker processes unpickle their configuration, which names
:class:`service.api.tcp.NoDelayH11Protocol`, before they start answering the supervisor's health checks, and a
worker that is still importing after five seconds is killed as hung.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from service.api.app import create_app

        return create_app
    raise AttributeError(f"module 'service.api' has no attribute {name!r}")
