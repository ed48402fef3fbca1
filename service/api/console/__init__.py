"""The web console at ``/console``: pages for stewards, analysts and auditors, served by the API's own application.

Server-rendered Jinja2 templates (``templates/``), one stylesheet and one small script (``static/``), charts drawn on
the server as SVG (:mod:`~service.api.console.charts`); nothing is fetched from another site. A person signs in with an
API key and gets a signed, expiring session cookie (:mod:`~service.api.console.sessions`); every page and form checks
the session, the role and the scope as the API's routes do (:mod:`~service.api.console.access`), and every form its
CSRF token. The pages (:mod:`~service.api.console.pages`) call the same service functions as the API's routes: a
release made here is the release the API would make, charged by the same accountant. The choices and what each page
shows: docs/console.md.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from service.api.console.pages import campaigns, datasets, fitting, ledger, planner, quality, releases, sign_in
from service.api.console.sessions import Sessions

STATIC = resources.files("service.api.console") / "static"


def install(app: FastAPI, secret: str) -> None:
    """Serve the console from ``app``, its sessions signed with ``secret``."""
    app.state.console_sessions = Sessions(secret)
    for pages in (sign_in, datasets, ledger, fitting, releases, quality, planner, campaigns):
        app.include_router(pages.router)
    app.mount("/console/static", StaticFiles(directory=str(STATIC)), name="console-static")
