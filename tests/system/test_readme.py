"""The README's commands, run exactly as written, so that a copy-paste break fails CI.

Every ```sh block of README.md (except one preceded by ``<!-- readme-test: skip (why) -->``) runs, in
order, in a fresh folder with a fresh database and the repository's ``.venv/bin`` first on PATH: each
command (backslash continuations joined) in ``bash -euo pipefail`` with the ``export`` lines before
it. A command must succeed; a ``# -> {json}`` line after it is what its ``--json`` output must
contain (a subset: every key shown, with that value; numbers to 1e-9). Then every ```sql block runs
against the database the walkthrough made.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import REPO

README = REPO / "README.md"
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\b")
EXPECT = "# -> "


@dataclass
class Command:
    text: str
    expected: object = None
    line: int = 0


def blocks(text: str, language: str) -> list[tuple[int, str]]:
    """(first line, body) of every fenced block in ``language`` not marked to be skipped."""
    found = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == f"```{language}":
            skipped = i > 0 and SKIP.search(lines[i - 1]) is not None
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            if not skipped:
                found.append((i + 2, "\n".join(lines[i + 1:end])))
            i = end
        i += 1
    return found


def commands(first_line: int, body: str) -> list[Command]:
    """The block's commands, continuations joined, each with the expectation that follows it."""
    out: list[Command] = []
    pending = ""
    for number, raw in enumerate(body.splitlines(), start=first_line):
        line = raw.rstrip()
        if line.lstrip().startswith(EXPECT.strip()):
            assert out, f"README.md:{number}: an expected output with no command before it"
            out[-1].expected, _ = json.JSONDecoder().raw_decode(line.lstrip()[len(EXPECT):])
            continue
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending = f"{pending} {line.strip()}" if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        out.append(Command(pending, line=number))
        pending = ""
    assert not pending, "a block ends with a continuation"
    return out


def contains(actual: object, expected: object) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and contains(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            contains(a, e) for a, e in zip(actual, expected, strict=True))
    if isinstance(expected, float | int) and not isinstance(expected, bool):
        return isinstance(actual, float | int) and math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-15)
    return actual == expected


def test_the_parser_reads_continuations_and_expectations() -> None:
    parsed = commands(1, 'export A=1\n# a comment\nmarginalia x \\\n    --y z   # trailing\n'
                         '# -> {"a": [1, 2.5]}  # why\n')
    assert [c.text for c in parsed] == ["export A=1", "marginalia x --y z   # trailing"]
    assert parsed[1].expected == {"a": [1, 2.5]} and parsed[0].expected is None
    assert contains({"a": [1, 2.5000000000001], "b": 0}, {"a": [1, 2.5]})
    assert not contains({"a": [1]}, {"a": [1, 2]}) and not contains({"reused": False}, {"reused": True})
    text = "<!-- readme-test: skip (no) -->\n```sh\nmake demo\n```\n\n```sh\nls\n```\n"
    assert blocks(text, "sh") == [(7, "ls")]


@pytest.mark.slow
def test_the_readme_runs_as_written(tmp_path: Path, data_dir: Path) -> None:
    text = README.read_text()
    env = {key: value for key, value in os.environ.items() if not key.startswith("MARGINALIA_")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", COLUMNS="120",
               MARGINALIA_SHARED_DATA=str(data_dir))
    exports: list[str] = []
    ran = 0
    for first, body in blocks(text, "sh"):
        for command in commands(first, body):
            script = "\n".join(["set -euo pipefail", *exports, command.text])
            done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=900)
            where = f"README.md:{command.line}: {command.text}"
            output = f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
            assert done.returncode == 0, f"{where}: exit {done.returncode}\n{output}"
            assert "Traceback" not in done.stderr, f"{where}\n{done.stderr}"
            if command.text.startswith("export "):
                exports.append(command.text)
            if command.expected is not None:
                actual = json.loads(done.stdout)
                assert contains(actual, command.expected), f"{where}\nexpected {command.expected}\ngot {actual}"
            ran += 1
    assert ran >= 20
    assert not any(p.name.startswith("50K") for p in tmp_path.iterdir()), "an unquoted > redirected into a file"
    database = tmp_path / "marginalia.db"
    with sqlite3.connect(database) as connection:
        for _, body in blocks(text, "sql"):
            for statement in (s.strip() for s in re.sub(r"--[^\n]*", "", body).split(";")):
                if statement:
                    assert connection.execute(statement).fetchall(), statement
        # the walkthrough's ledgers (adult's alpha R is past 64 bits) recompute exactly in plain SQL
        disagreeing = connection.execute("SELECT dataset FROM budget_audit WHERE agrees = 0").fetchall()
        assert connection.execute("SELECT COUNT(*) FROM budget_audit").fetchone()[0] >= 2 and not disagreeing


def test_the_readme_names_the_extras_make_install_installs() -> None:
    """The README said `.[server,test]` while the Makefile installed `.[server,spark,test]` (issue 31, point 11)."""
    installed = re.search(r"pip install --quiet -e '(\.\[[a-z,]+\])'", (REPO / "Makefile").read_text())
    assert installed is not None, "the Makefile's install line changed: update this test"
    assert f"`make install` installs `{installed.group(1)}`" in " ".join(README.read_text().split())
