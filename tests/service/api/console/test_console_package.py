"""The console ships in the package: every template and asset is declared as package data (a wheel built from
pyproject.toml holds it), and nothing it serves comes from another site."""

from __future__ import annotations

import fnmatch
import re
import tomllib

from tests.support.paths import REPO

CONSOLE = REPO / "service" / "api" / "console"


def test_every_template_and_asset_is_package_data() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    globs = declared["service.api.console"]
    files = [p.relative_to(CONSOLE).as_posix() for folder in ("templates", "static")
             for p in (CONSOLE / folder).rglob("*") if p.is_file()]
    assert files and all(any(fnmatch.fnmatch(f, g) for g in globs) for f in files), (files, globs)


def test_no_page_or_asset_refers_to_another_site() -> None:
    """No http(s) address in a template, the stylesheet or the script but the SVG namespace."""
    for path in [*(CONSOLE / "templates").glob("*.html"), *(CONSOLE / "static").glob("*")]:
        addresses = set(re.findall(r"https?://[^\s\"'<>)]+", path.read_text())) - {"http://www.w3.org/2000/svg"}
        assert not addresses, (path.name, addresses)
