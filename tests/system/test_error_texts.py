"""Errors raised below the command line name request fields, not command-line flags (issue 29, section 7).

On main @02e4138 an HTTP caller was told "laplace needs --epsilon": the field is ``epsilon``. The message of every
``raise`` under ``service/`` (the command line's own package and the tools apart), ``db/``, ``workloads/`` and
``estimators/`` is read from the source: none may name a flag (``--name``) unless its module is one of
:data:`CLI_ONLY`, each with its reason. The HTTP side is checked end to end too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from fastapi.testclient import TestClient

from service.api import create_app
from tests.support.backends import ON_SQLITE
from tests.support.campaign_keys import new_key
from tests.support.datasets import titanic_with_budget
from tests.support.paths import REPO

FLAG = re.compile(r"(?<![\w-])--[a-z]")
ROOTS = ("service", "db", "workloads", "estimators")
#: Packages of the command line itself, where flags are the words.
COMMAND_LINE = ("service/cli/", "service/tools/")
#: Modules below the command line whose errors may name flags: they are reached from the command line only, or what
#: they say over HTTP is translated (service/data/attach/through_source.py's ``redact`` names the fields).
CLI_ONLY = {
    "service/data/engines/duckdb_engine.py": "`dataset attach --parquet`; over HTTP redact() says `parameter parquet`",
    "service/data/engines/sql_engine.py": "`dataset attach --sql --table`; over HTTP redact() names the source",
    "service/data/engines/spark_engine.py": "`dataset attach --spark`; over HTTP redact() says `table`",
    "service/data/attach/tables.py": "`--privacy-unit` of `dataset attach`; over HTTP redact() says `privacy_unit`",
    "service/data/attach/sources.py": "`marginalia source add`: the operator's command, no route",
    "service/campaigns/simulate.py": "`marginalia simulate`: a command, no route",
    "service/campaigns/table_simulation.py": "`marginalia simulate --dataset`: a command, no route",
    "db/gateways.py": "names the command that widens a key's scope (`marginalia keys scope`): keys have no route",
    "service/data/credentials.py": "`source add | update --password-env | --password-file` and `dataset attach --sql`; "
                                   "over HTTP a missing password names the operator's command that sets it: sources "
                                   "have no route",
}


def _texts(node: ast.AST) -> list[str]:
    """The string constants of an expression (f-strings' literal parts included)."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def flagged_raises() -> list[str]:
    found = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            text = path.read_text()
            if name.startswith(COMMAND_LINE) or name in CLI_ONLY or not FLAG.search(text):
                continue
            for node in ast.walk(ast.parse(text, name)):
                if isinstance(node, ast.Raise) and node.exc is not None:
                    found += [f"{name}:{node.lineno}: {text!r}" for text in _texts(node.exc) if FLAG.search(text)]
    return found


def test_no_error_below_the_command_line_names_a_flag() -> None:
    assert flagged_raises() == []


def test_the_exceptions_are_still_below_the_command_line() -> None:
    """An entry of CLI_ONLY that no longer exists is stale: remove it."""
    assert [name for name in CLI_ONLY if not (REPO / name).is_file()] == []


@ON_SQLITE
def test_over_http_an_error_names_the_field(engine, data_dir: Path) -> None:  # noqa: ANN001
    titanic_with_budget(engine, data_dir, "1", "0")
    _, key = new_key(engine, "steward", "ann")
    http = TestClient(create_app(engine))
    refused = http.post("/datasets/titanic/releases/marginals", json={"mechanism": "laplace", "workload": "all-1way"},
                        headers={"Authorization": f"Bearer {key}"})
    assert refused.status_code == 422, refused.text
    message = refused.json()["message"]
    assert message == "laplace needs epsilon" and not FLAG.search(message)


def test_the_grep_finds_a_flag() -> None:
    """The check can fail: a raise naming a flag is found."""
    tree = ast.parse('raise InvalidInput(f"{name} needs --epsilon", code="x")')
    assert [t for t in _texts(tree.body[0].exc) if FLAG.search(t)] == [" needs --epsilon"]  # type: ignore[attr-defined]
