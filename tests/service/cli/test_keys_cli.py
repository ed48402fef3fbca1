"""``marginalia keys create --source`` and ``keys list`` (issue 27, finding 2): a steward key's attach sources are part
of its scope. A key scoped to datasets attaches through no source unless it names some; an unscoped key through
every source; only steward keys take sources; ``keys list`` shows them, never a key nor its hash."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from service.access import auth
from service.cli import app

runner = CliRunner()


def _created(*args: str) -> dict[str, object]:
    result = runner.invoke(app, ["keys", "create", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_steward_keys_sources_are_stored_shown_and_looked_up(engine) -> None:  # noqa: ANN001
    named = _created("--role", "steward", "--name", "ann", "--dataset", "adult", "--source", "lake",
                     "--source", "warehouse", "--source", "lake")
    datasets_only = _created("--role", "steward", "--name", "bob", "--dataset", "adult")
    sources_only = _created("--role", "steward", "--name", "cy", "--source", "lake")
    unscoped = _created("--role", "steward", "--name", "dee")
    analyst = _created("--role", "analyst", "--name", "eve")
    assert (named["datasets"], named["sources"]) == (["adult"], ["lake", "warehouse"])
    assert (datasets_only["datasets"], datasets_only["sources"]) == (["adult"], [])
    assert (sources_only["datasets"], sources_only["sources"]) == (None, ["lake"])
    assert (unscoped["datasets"], unscoped["sources"]) == (None, None)
    assert analyst["sources"] is None
    principals = {k["name"]: auth.lookup_key(engine, str(k["key"]))
                  for k in (named, datasets_only, sources_only, unscoped)}
    assert [(p.may_attach_from("lake"), p.may_attach_from("warehouse"), p.may_attach_from("other"))
            for p in principals.values()] == [(True, True, False), (False, False, False), (True, False, False),
                                              (True, True, True)]
    listed = runner.invoke(app, ["keys", "list", "--json"])
    assert [k["sources"] for k in json.loads(listed.output)] == [["lake", "warehouse"], [], ["lake"], None, None]
    human = runner.invoke(app, ["keys", "list"], env={"COLUMNS": "200"})
    lines = {line.split("│")[2].strip(): [cell.strip() for cell in line.split("│")[1:-1]]
             for line in human.output.splitlines() if line.count("│") > 5 and line.split("│")[1].strip().isdigit()}
    assert [lines[n][4] for n in ("ann", "bob", "cy", "dee", "eve")] == ["lake, warehouse", "none", "lake", "all", ""]
    for key in (named, datasets_only, unscoped):
        assert str(key["key"]) not in listed.output + human.output


def test_only_steward_keys_take_sources(engine) -> None:  # noqa: ANN001
    for role in ("analyst", "auditor", "participant", "gateway"):
        result = runner.invoke(app, ["keys", "create", "--role", role, "--name", "x", "--source", "lake", "--json"])
        assert result.exit_code == 2, result.output
        body = json.loads(result.output)
        assert body["error"] == "invalid_parameter" and "only steward keys can be scoped to sources" in body["message"]
    result = runner.invoke(app, ["keys", "create", "--role", "steward", "--name", "x", "--source", " lake", "--json"])
    assert result.exit_code == 2 and "sources: ' lake' is not a valid name" in json.loads(result.output)["message"]
    assert auth.list_keys(engine) == []
