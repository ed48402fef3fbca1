"""The HTTP API (FastAPI). ``create_app(engine)`` builds it; ``marginalia serve`` runs it."""

from service.api.app import create_app

__all__ = ["create_app"]
