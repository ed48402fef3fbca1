"""Pages from the console's Jinja2 templates (``templates/``, shipped in the package), escaped by default.

:func:`page` renders a template for a signed-in visitor (the navigation of their role, their session's CSRF token for
every form); :func:`error_page` renders a refusal or a failure with its status and the API's own message.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from service.api.console import charts, formats
from service.api.console.visitor import Visitor

_environment = Environment(loader=PackageLoader("service.api.console", "templates"),
                           autoescape=select_autoescape(default=True), undefined=StrictUndefined,
                           trim_blocks=True, lstrip_blocks=True)
_environment.globals.update(charts=charts)
_environment.filters.update(number=formats.number, epsilon=formats.epsilon, moment=formats.moment)

#: The navigation of each role: (label, path); a page shows the links of its visitor's role only.
NAVIGATION = {
    "steward": [("Datasets", "/console/datasets"), ("Releases", "/console/releases"),
                ("Campaigns", "/console/campaigns")],
    "analyst": [("Datasets", "/console/datasets"), ("Releases", "/console/releases"),
                ("Campaigns", "/console/campaigns")],
    "auditor": [("Budgets", "/console/datasets"), ("Releases", "/console/releases"),
                ("Campaigns", "/console/campaigns")],
}


def page(request: Request, template: str, visitor: Visitor | None, *, title: str, status: int = 200,
         **context: Any) -> HTMLResponse:
    """The page ``template`` for ``visitor`` (None: the sign-in page)."""
    navigation = NAVIGATION.get(visitor.role, []) if visitor is not None else []
    html = _environment.get_template(template).render(
        title=title, visitor=visitor, navigation=navigation, path=request.url.path,
        csrf_token=visitor.csrf_token if visitor is not None else None, **context)
    return HTMLResponse(html, status_code=status)


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    """A refusal or failure as a page: its status, a title for it and the message (the API's own)."""
    titles = {401: "Sign in needed", 403: "Not allowed", 404: "Not found", 409: "Not possible now",
              422: "Not valid", 503: "The database does not answer"}
    title = titles.get(status, "Something went wrong" if status >= 500 else "Not valid")
    html = _environment.get_template("error.html").render(
        title=title, visitor=None, navigation=[], path=request.url.path, csrf_token=None, status=status,
        message=message)
    return HTMLResponse(html, status_code=status)
