"""The committed OpenAPI schema, docs/openapi.json, and the command that regenerates it::

    .venv/bin/python -m service.api.openapi            # rewrite docs/openapi.json
    .venv/bin/python -m service.api.openapi --check    # exit 1 if it is out of date
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def current_schema() -> dict[str, object]:
    """The schema of the app as the code defines it now (no database is touched)."""
    from sqlalchemy import create_engine

    from service.api.app import create_app

    return create_app(create_engine("sqlite://")).openapi()


def render(schema: dict[str, object]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render(current_schema())
    if "--check" in argv:
        if not SCHEMA_FILE.is_file() or SCHEMA_FILE.read_text() != text:
            sys.stderr.write(f"{SCHEMA_FILE} is out of date: run `python -m service.api.openapi`\n")
            return 1
        return 0
    SCHEMA_FILE.parent.mkdir(parents=True, exist_ok=True)
    SCHEMA_FILE.write_text(text)
    sys.stdout.write(f"wrote {SCHEMA_FILE}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
