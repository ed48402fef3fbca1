"""The contract of the two registries: every registered mechanism (:mod:`service.mechanisms.registry`) and every
regression method (:mod:`service.regression.methods`) has all its parts, so the next one cannot be half-registered.

For each: a complete spec; what its releases store (its kind's payload type, with a codec both ways) and, for a
mechanism whose releases a regression's fit makes, the parameters stored with them and, for a model release, the
public details a fit answered by it reports; its options declared (typed, bounded, helped: the API, the command line
and the client read nothing else); reachable from the command line and from the API with exactly the declared options
and bounds; a row in docs/mechanisms.md's tables (rendered here from the registries, so the docs list what is
registered) naming a section of docs/privacy.md that exists and is about it; and the route it is reached by in the
role matrix (tests/service/api/test_api_roles.py, organised by route: a mechanism's releases go through the release
route of its kind, or through the fit routes of the methods it answers).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

import httpx
import pytest
import typer

from service.cli import app
from service.client import Client
from service.mechanisms import registry
from service.mechanisms.registry import MechanismSpec, PrivacyNotion, ReleaseKind
from service.options import OptionSpec
from service.regression import methods
from service.regression.choice import AUTO_METHOD
from service.regression.methods import MethodSpec
from service.releases import kinds
from tests.support.paths import REPO
from tests.support.roles import ROLE_TABLE
from workloads.encodings import TASKS

MECHANISMS = [spec.name for spec in registry.specs()]
METHODS = methods.names()
RELEASE_ROUTE = ("POST", "/datasets/{name}/releases/marginals")
DOCS = REPO / "docs" / "mechanisms.md"
PRIVACY = REPO / "docs" / "privacy.md"


# what the registries say, rendered as the docs show it ----------------------------------------------------------------
def _options_cell(options: Sequence[OptionSpec]) -> str:
    shown = [f"`{option.name}` ({option.bounds})" for option in options if not option.internal]
    return ", ".join(shown) or "none"


def mechanism_row(spec: MechanismSpec) -> str:
    """The first cells of the mechanism's row in docs/mechanisms.md (its privacy section follows)."""
    return f"| `{spec.name}` | {spec.kind} | {spec.notion} | {_options_cell(spec.options)} |"


def method_row(spec: MethodSpec) -> str:
    """The first cells of the method's row in docs/mechanisms.md (its privacy section follows)."""
    answering = ", ".join(f"`{name}`" for name in _answering(spec.name))
    return (f"| `{spec.name}` | {', '.join(spec.tasks)} | {spec.release_kind} | {answering} | "
            f"{_options_cell(spec.options)} |")


def _answering(method: str) -> list[str]:
    return [spec.name for spec in registry.specs() if method in spec.answers]


# what the surfaces offer ----------------------------------------------------------------------------------------------
@cache
def _schema() -> dict[str, Any]:
    from service.api.openapi import current_schema

    return current_schema()["components"]["schemas"]  # type: ignore[index,return-value]


def _command(*path: str) -> Any:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return command


def _choices(help_text: str) -> list[str]:
    return [re.sub(r" \(.*\)$", "", part) for part in re.split(r", | or ", help_text.rstrip("."))]


def _owners(option: OptionSpec, specs: Sequence[MechanismSpec | MethodSpec]) -> list[str]:
    return [spec.name for spec in specs if option in spec.options]


def _check_cli(command: Any, options: Sequence[OptionSpec], owners: Sequence[MechanismSpec | MethodSpec]) -> None:
    params = {param.name: param for param in command.params}
    for option in options:
        if option.internal:
            assert option.name not in params, f"internal option {option.name} is offered by the command line"
            continue
        param = params.get(option.name)
        assert param is not None, f"option {option.name} is not an option of `{command.name}`"
        assert option.flag in param.opts and param.help == option.describe(_owners(option, owners))


def _check_api(model: str, options: Sequence[OptionSpec]) -> None:
    properties = _schema()[model]["properties"]
    for option in options:
        if option.internal:
            assert option.name not in properties, f"internal option {option.name} is in the API's {model}"
            continue
        field = properties[option.name]
        declared = field["anyOf"][0]
        if option.kind is str:
            assert declared["enum"] == list(option.choices)
        else:
            assert declared["type"] == {int: "integer", float: "number"}[option.kind]  # type: ignore[index]
            if option.kind is int and option.low_open:
                assert declared["minimum"] == option.low + 1
            else:
                assert declared["exclusiveMinimum" if option.low_open else "minimum"] == option.low
            assert declared.get("maximum") == option.high
        assert field["description"].endswith(".") and option.help in field["description"]


def _privacy_sections() -> dict[str, str]:
    """``{"8.4": text of section 8.4}`` for every numbered section of docs/privacy.md."""
    sections, current = {}, None
    for line in PRIVACY.read_text().splitlines():
        heading = re.match(r"^#{2,4} (\d+(?:\.\d+)*)[. ]", line)
        if heading:
            current = heading.group(1)
            sections[current] = ""
        if current is not None:
            sections[current] += line + "\n"
    return sections


def _check_docs_row(prefix: str, name: str) -> None:
    rows = [line for line in DOCS.read_text().splitlines() if line.startswith(f"| `{name}` |")]
    assert rows, f"docs/mechanisms.md has no row for {name}"
    row = next((line for line in rows if line.startswith(prefix)), None)
    assert row is not None, f"docs/mechanisms.md's row for {name} is not what the registry says:\n{rows}\n{prefix}"
    cited = re.findall(r"\[(\d+(?:\.\d+)+)\]\(privacy\.md#[^)]+\)", row[len(prefix):])
    assert cited, f"the row of {name} cites no section of docs/privacy.md"
    sections = _privacy_sections()
    for number in cited:
        assert number in sections, f"docs/privacy.md has no section {number} (cited for {name})"
        assert name.replace("-", "").lower() in sections[number].replace("-", "").lower(), (
            f"section {number} of docs/privacy.md does not mention {name}")


def check_release_parts(spec: MechanismSpec) -> None:
    """What a release of ``spec`` stores and reports is declared: its kind is registered with a payload type that
    writes and reads bytes (the mechanism's result carries one: service/mechanisms/payloads.py); a mechanism whose
    releases a fit makes (gram, model) says what is stored beside the payload (``release_params``); a model release,
    whose answer is the model itself, names the public details a fit answered by it reports (``public_details``)."""
    kind = kinds.find(spec.kind)
    assert kind is not None, (f"{spec.name} makes {spec.kind} releases, a kind service/releases/kinds.py does not "
                              "register")
    payload = kind.payload_type
    for method in ("to_bytes", "from_bytes") if spec.kind != ReleaseKind.MARGINALS else ("to_bytes",):
        assert callable(getattr(payload, method, None)), (
            f"{spec.name}'s releases store a {payload.__name__}, which has no {method} (the payload type of the "
            f"{spec.kind} kind, service/mechanisms/payloads.py)")
    if spec.kind != ReleaseKind.MARGINALS:
        assert callable(spec.release_params), f"{spec.name} declares no release_params"
    if spec.kind == ReleaseKind.MODEL:
        assert spec.public_details, (f"{spec.name} makes model releases but declares no public_details: a fit "
                                     "answered by its model would report none of its calibration")
        assert len(set(spec.public_details)) == len(spec.public_details), f"{spec.name} repeats a public detail"


# the contract ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MECHANISMS)
def test_every_mechanism_has_all_its_parts(name: str) -> None:
    spec = registry.get(name)
    # the spec
    assert spec.kind in set(ReleaseKind) and isinstance(spec.notion, PrivacyNotion) and callable(spec.make_runner)
    assert spec.description and len(set(spec.option_names)) == len(spec.options)
    assert spec.answers <= set(METHODS), f"{name} answers unregistered methods {spec.answers - set(METHODS)}"
    # what its releases store and report
    check_release_parts(spec)
    # its options, declared
    for option in spec.options:
        assert option.help, f"option {option.name} of {name} has no help"
        assert option.internal or option.kind in (int, float, str), f"public option {option.name} has no JSON type"
        assert (option.kind is str) == bool(option.choices)
        if option.default is not None:
            option.check(name, option.default)  # a declared default is a value the declaration allows
    # reachable from the command line and the API, with exactly its declared options
    if spec.kind == ReleaseKind.MARGINALS:
        marginal = [registry.get(n) for n in registry.names(ReleaseKind.MARGINALS)]
        command = _command("release", "marginals")
        assert name in _choices(next(p.help for p in command.params if p.name == "mechanism"))
        _check_cli(command, spec.options, marginal)
        assert name in _schema()["MarginalReleaseIn"]["properties"]["mechanism"]["enum"]
        _check_api("ReleaseOptions", spec.options)
        routes = [RELEASE_ROUTE]
    else:  # gram and model releases are made by the fit of a method they answer, with that method's settings
        assert spec.answers, f"{name} makes {spec.kind} releases that no regression method reads"
        for method in spec.answers:
            assert method in _choices(next(p.help for p in _command("fit").params if p.name == "method"))
            assert method in _schema()["FitIn"]["properties"]["method"]["enum"]
            assert set(methods.find(method).option_names) == set(spec.option_names)  # type: ignore[union-attr]
        routes = [("POST", f"/datasets/{{name}}/fit/{task}") for method in spec.answers
                  for task in methods.find(method).tasks]  # type: ignore[union-attr]
    # a docs row and its privacy section; the role matrix
    _check_docs_row(mechanism_row(spec), name)
    for route in routes:
        assert route in ROLE_TABLE, f"{route} (how {name} is reached) has no row in the role matrix"


@pytest.mark.parametrize("name", METHODS)
def test_every_regression_method_has_all_its_parts(name: str) -> None:
    spec = methods.find(name)
    assert spec is not None and callable(spec.answer) and spec.description
    assert spec.tasks and set(spec.tasks) <= set(TASKS) and spec.release_kind in set(ReleaseKind)
    # answered by registered mechanisms, each of the kind of release the method reads
    answering = _answering(name)
    assert answering, f"no registered mechanism's releases answer {name}"
    assert {registry.get(m).kind for m in answering} == {spec.release_kind}
    # its options: those of the mechanism whose releases carry them (declared once)
    for option in spec.options:
        assert any(option in registry.get(m).options for m in answering), f"{option.name} is declared twice"
    # reachable from the command line, the API and the client with exactly those options
    command = _command("fit")
    assert name in _choices(next(p.help for p in command.params if p.name == "method"))
    _check_cli(command, spec.options, methods.specs())
    assert name in _schema()["FitIn"]["properties"]["method"]["enum"]
    _check_api("FitIn", spec.options)
    sent = _client_fit_body(spec)
    assert sent["method"] == name and {o.name for o in spec.options} <= set(sent)
    # a docs row and its privacy section; the role matrix
    _check_docs_row(method_row(spec), name)
    for task in spec.tasks:
        assert ("POST", f"/datasets/{{name}}/fit/{task}") in ROLE_TABLE


def _client_fit_body(spec: MethodSpec) -> dict[str, Any]:
    """The body the client sends for a fit by ``spec`` given a value for every declared option."""
    import json

    sent: dict[str, Any] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            sent.update(json.loads(request.content))
            return httpx.Response(400, json={"error": "stop", "message": "recorded"})
        return httpx.Response(200, json={"name": "d", "domain": {}})

    values = {o.name: (o.choices[0] if o.choices else 1 if o.kind is int else 0.5) for o in spec.options}
    with Client("http://test", "key", http=httpx.Client(base_url="http://test",
                                                         transport=httpx.MockTransport(handler))) as client:
        fit = client.fit_linear if "linear" in spec.tasks else client.fit_logistic
        with pytest.raises(Exception, match="recorded"):
            fit("d", "y", ["x"], method=spec.name, epsilon=1.0, delta=1e-6, **values)
    return sent


def test_the_api_the_command_line_and_the_client_offer_no_option_the_registries_do_not_declare() -> None:
    declared_marginal = {o.name for n in registry.names(ReleaseKind.MARGINALS) for o in registry.get(n).public_options}
    assert set(_schema()["ReleaseOptions"]["properties"]) == declared_marginal
    fit_fields = set(_schema()["FitIn"]["properties"])
    assert fit_fields - {"target", "features", "method", "epsilon", "delta", "release", "intercept",
                         "allow_unmeasured"} == set(methods.option_names())
    assert _schema()["FitIn"]["properties"]["method"]["enum"] == [*METHODS, AUTO_METHOD]
    assert _choices(next(p.help for p in _command("fit").params if p.name == "method")) == [*METHODS, AUTO_METHOD]
    cli = {p.name for p in _command("release", "marginals").params} - {
        "name", "mechanism", "workload", "epsilon", "delta", "rho", "seed", "dry_run", "target_error", "quiet",
        "as_json"}
    assert cli == declared_marginal


def test_the_docs_tables_list_exactly_the_registered_names() -> None:
    text = DOCS.read_text()
    for heading, names in (("## Registered mechanisms", MECHANISMS), ("## Registered regression methods", METHODS)):
        section = text[text.index(heading):].split("\n## ", 1)[0]
        listed = re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)
        assert listed == names, f"{heading}: the table lists {listed}, the registry {names}"


class _NoCodec:
    """A payload type that cannot write itself."""


@pytest.mark.parametrize(("broken", "missing"), [
    (dict(public_details=()), "objpert makes model releases but declares no public_details"),
    (dict(kind="sketch"), "makes sketch releases, a kind service/releases/kinds.py does not register"),
])
def test_the_contract_names_what_a_model_mechanism_lacks(broken: dict[str, Any], missing: str) -> None:
    """The check fails, naming the part, on a registration that lacks it (issue 28: a model-kind mechanism is its
    module and its registration; what the registration leaves out, the contract names)."""
    import dataclasses

    with pytest.raises(AssertionError, match=missing):
        check_release_parts(dataclasses.replace(registry.get("objpert"), **broken))


def test_the_contract_names_a_kind_whose_payload_type_has_no_codec() -> None:
    import dataclasses

    kinds.register(dataclasses.replace(kinds.get(ReleaseKind.MODEL), kind="test-uncoded", payload_type=_NoCodec))
    try:
        with pytest.raises(AssertionError, match="store a _NoCodec, which has no to_bytes"):
            check_release_parts(dataclasses.replace(registry.get("objpert"), kind="test-uncoded"))
    finally:
        kinds.unregister("test-uncoded")
