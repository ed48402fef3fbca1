"""The protocol contract: every protocol a device can run (``workloads.local.protocols.PROTOCOLS``) is one complete
slice, so the next protocol cannot be half-registered. For each: a record in ``service.campaigns.protocols.catalog``
with its spec class (and so its randomizer), its builder, its round transition (exactly when it has more than one
round; every function the record names by where it lives found there), the models it answers (each with a mean the
client predicts with) and its estimates, or for a protocol that answers marginals its planner; a row in
docs/campaigns.md's protocol table; a privacy section in docs/privacy.md; an entry in the API's role test
(``PROTOCOL_CAMPAIGNS``). A missing part fails naming it.

Its options: each declared (an ``OptionSpec`` with help, a JSON type, a default its own check allows), and the
builder reads no other (reading an undeclared one fails here, naming it); ``campaign create`` and ``campaign plan``
offer exactly the declared options as flags, the API describes each in the campaign bodies, and docs/campaigns.md's
options table is rendered from the declarations."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import typer

from estimators.base import EstimatorError
from service.campaigns.options import UndeclaredOption, read_option
from service.campaigns.protocols import CAMPAIGN_PROTOCOLS, build_spec, next_state
from service.campaigns.protocols.base import TRANSFORM_OPTIONS, Deferred, protocol_options
from service.campaigns.types import CampaignRequest
from service.cli import app
from service.errors import InvalidInput
from service.options import OptionSpec, declarations, describe
from tests.support.paths import REPO
from tests.support.registries import registered
from tests.support.roles import PROTOCOL_CAMPAIGNS
from tests.support.two_round import first_round
from workloads.links import LINEAR_MODELS, LINK_MEANS
from workloads.local.protocols import PROTOCOLS, ProtocolSpec, SteinGlmSpec, TwoRoundSteinSpec

#: what a spec class must define itself (the base class's raise NotImplementedError)
SPEC_METHODS = ("rounds", "groups", "report_schema", "randomize")


def _request(name: str, body: dict[str, object]) -> CampaignRequest:
    """A builder's request from the role test's body (a standard-normal public table where it names one), its options
    checked against the protocol's declaration."""
    features = tuple(body["features"])  # type: ignore[arg-type]
    public = np.random.default_rng(0).standard_normal((40, len(features))) if "public" in body else None
    options = CAMPAIGN_PROTOCOLS.get(name).check_options(body.get("options", {}))  # type: ignore[arg-type]
    return CampaignRequest(features, body.get("target"), float(body["epsilon"]),  # type: ignore[arg-type]
                           float(body.get("delta", 0.0)), options, public)


def _option_problems(name: str, options: tuple[OptionSpec, ...]) -> list[str]:
    """What is wrong with the declaration of a protocol's options."""
    problems = []
    for option in options:
        if not option.help:
            problems.append(f"{name}: option {option.name} has no help")
        if option.kind not in (int, float, bool, str, None):
            problems.append(f"{name}: option {option.name} has no JSON type (kind {option.kind!r})")
        if (option.kind is str) != bool(option.choices):
            problems.append(f"{name}: option {option.name} has choices exactly when it is a str")
        if option.internal:
            problems.append(f"{name}: option {option.name} is internal (a campaign's options are all the steward's)")
        if option.default is not None:
            try:
                read_option(option, option.default)
            except InvalidInput:
                problems.append(f"{name}: the default {option.default!r} of option {option.name} is refused by its "
                                "own declaration")
    return problems


def missing_parts(name: str) -> list[str]:
    """What protocol ``name`` lacks, each named (empty: a complete slice)."""
    record = CAMPAIGN_PROTOCOLS.find(name)
    if record is None:
        return [f"{name}: no record in service.campaigns.protocols (service/campaigns/protocols/catalog.py must "
                "register a CampaignProtocol)"]
    missing = []
    if record.spec is not PROTOCOLS.get(name):
        missing.append(f"{name}: the record's spec class is {record.spec.__name__}, not the registered "
                       f"{PROTOCOLS.get(name).__name__}")
    missing.extend(_option_problems(name, record.options))
    for method in SPEC_METHODS:
        if getattr(record.spec, method) is getattr(ProtocolSpec, method):
            missing.append(f"{name}: its spec class {record.spec.__name__} does not define {method}"
                           f"{' (the randomizer devices run)' if method == 'randomize' else ''}")
    for part in ("build",) if record.marginals else ("build", "fit"):
        if not callable(getattr(record, part)):
            missing.append(f"{name}: the record's {part} is not callable")
    for part in ("build", "transition", "fit", "plan"):
        function = getattr(record, part)
        if isinstance(function, Deferred):
            try:
                resolved = function.resolve()
            except (ImportError, AttributeError, ValueError) as error:
                missing.append(f"{name}: the record's {part} names {function.target!r}, which is not found ({error})")
            else:
                if not callable(resolved):
                    missing.append(f"{name}: the record's {part} names {function.target!r}, which is not callable")
    if record.marginals:  # answers marginals and synthetic rows, from its model: the routes must exist
        if record.plan is None:
            missing.append(f"{name}: a marginals protocol without a planner")
    elif not record.models or not all(isinstance(model, str) and model for model in record.models):
        missing.append(f"{name}: the record names no models it answers")
    for model in record.models:
        if model not in LINK_MEANS and model not in LINEAR_MODELS:
            missing.append(f"{name}: model {model!r} has no mean in workloads.links (LINK_MEANS or LINEAR_MODELS), so "
                           "the client cannot predict with it")
    if name not in PROTOCOL_CAMPAIGNS:
        missing.append(f"{name}: no entry in PROTOCOL_CAMPAIGNS of tests/support/roles.py (the role test "
                       "creates a campaign of every protocol as every caller)")
    elif callable(record.build):
        try:
            spec = build_spec(name, _request(name, PROTOCOL_CAMPAIGNS[name]))
        except UndeclaredOption as error:
            missing.append(f"{name}: its builder reads an option its record does not declare ({error})")
        else:
            if spec.round_count > 1 and record.transition is None:
                missing.append(f"{name}: {spec.round_count} rounds but no transition (the next round's public state)")
            if spec.round_count == 1 and record.transition is not None:
                missing.append(f"{name}: one round but a transition")
    campaigns_doc = (REPO / "docs" / "campaigns.md").read_text()
    if f"\n| `{name}` |" not in campaigns_doc:
        missing.append(f"{name}: no row '| `{name}` |' in the protocol table of docs/campaigns.md")
    privacy = (REPO / "docs" / "privacy.md").read_text().splitlines()
    if not any(f"`{name}`" in line and (line.startswith("#") or line.startswith("* *`")) for line in privacy):
        missing.append(f"{name}: no privacy section in docs/privacy.md (a heading, or a '* *`{name}`.*' item, "
                       "naming it)")
    return missing


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_every_protocol_is_a_complete_slice(name: str) -> None:
    missing = missing_parts(name)
    assert not missing, "\n".join(missing)


def test_no_record_without_a_device_protocol() -> None:
    assert sorted(CAMPAIGN_PROTOCOLS) == sorted(PROTOCOLS), "a campaign protocol whose spec devices cannot find"


def test_a_half_registered_protocol_is_named_with_what_it_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec registered for devices with nothing server side fails, naming the protocol and the missing record."""

    class HalfSpec(SteinGlmSpec):
        protocol = "half-registered"

    with registered(PROTOCOLS, "half-registered", HalfSpec):
        assert missing_parts("half-registered") == [
            "half-registered: no record in service.campaigns.protocols (service/campaigns/protocols/catalog.py must "
            "register a CampaignProtocol)"]
    record = CAMPAIGN_PROTOCOLS.get("stein-glm")
    two_round = CAMPAIGN_PROTOCOLS.get("stein-glm-2round")
    with registered(CAMPAIGN_PROTOCOLS, "stein-glm-2round", record.__class__(
            "stein-glm-2round", TwoRoundSteinSpec, two_round.build, None, record.models, record.fit, "required",
            "no transition", options=two_round.options)):
        assert missing_parts("stein-glm-2round") == [
            "stein-glm-2round: 2 rounds but no transition (the next round's public state)"]


def test_a_builder_reading_an_undeclared_option_is_named() -> None:
    """A record whose builder reads an option it does not declare fails the contract, naming the option; so does a
    declaration without help or with a default its own bounds refuse."""
    record = CAMPAIGN_PROTOCOLS.get("dr-erm")

    def build(request: CampaignRequest) -> Any:
        request.options["colour"]  # noqa: B018  # the read under test
        return record.build(request)

    with registered(CAMPAIGN_PROTOCOLS, "dr-erm", replace(record, build=build)):
        missing = missing_parts("dr-erm")
    assert len(missing) == 1 and missing[0].startswith(
        "dr-erm: its builder reads an option its record does not declare (protocol 'dr-erm' read option 'colour', "
        "which its record does not declare")
    broken = tuple(replace(o, help="") if o.name == "rows" else replace(o, high=0.5) if o.name == "radius" else o
                   for o in record.options)
    with registered(CAMPAIGN_PROTOCOLS, "dr-erm", replace(record, options=broken)):
        assert missing_parts("dr-erm") == [
            "dr-erm: option rows has no help",
            "dr-erm: the default 1.0 of option radius is refused by its own declaration"]
    assert missing_parts("dr-erm") == []


def _command(name: str) -> Any:
    return typer.main.get_command(app).commands["campaign"].commands[name]  # type: ignore[attr-defined]


def _declared_flags(command: Any) -> dict[str, tuple[tuple[str, ...], str | None]]:
    """``{name: (spellings, help)}`` of the command's parameters that are declared protocol options."""
    names = set(declarations(protocol_options()))
    return {p.name: (tuple(p.opts), p.help) for p in command.params if p.name in names}


def test_campaign_create_and_plan_take_exactly_the_declared_options() -> None:
    """Both commands offer one flag per declared option (from the declarations, never listed by hand), the same flag
    with the same help, ``--participants`` included: the campaign's planned participants, at which ``campaign plan``
    predicts (one number, one flag)."""
    declared = declarations(protocol_options())
    create, plan = _declared_flags(_command("create")), _declared_flags(_command("plan"))
    assert set(create) == set(declared)
    for name, entries in declared.items():
        flag = "--" + name.replace("_", "-")
        assert flag in create[name][0] and create[name][1] == describe(entries), name
    assert plan == create
    assert "campaign plan predicts the error at it" in plan["participants"][1]
    for name in ("label_bound", "norm_bound", "lower", "upper", "participants"):
        assert name in create and name in plan


def test_a_record_naming_a_function_that_does_not_exist_is_named() -> None:
    """A record names its builder, fit, transition and planner by where they live (they are imported when first
    run); a name that is not found fails the contract, naming the part and the name."""
    record = CAMPAIGN_PROTOCOLS.get("ldp-avg")
    with registered(CAMPAIGN_PROTOCOLS, "ldp-avg", replace(record, plan=Deferred(
            "service.campaigns.protocols.ldp_avg:no_such_planner"))):
        missing = missing_parts("ldp-avg")
    assert len(missing) == 1 and missing[0].startswith(
        "ldp-avg: the record's plan names 'service.campaigns.protocols.ldp_avg:no_such_planner', which is not found")


def test_the_api_describes_every_declared_option_in_the_campaign_bodies() -> None:
    from service.api.openapi import current_schema

    schemas: dict[str, Any] = current_schema()["components"]["schemas"]  # type: ignore[assignment,index]
    declared = declarations(protocol_options())
    for body in ("CampaignIn", "PlanIn"):
        properties = schemas[body]["properties"]["options"]["properties"]
        assert properties == {name: {"description": describe(entries)} for name, entries in declared.items()}


def options_table() -> list[str]:
    """docs/campaigns.md's options table as the declarations render it: one row per declaration of a name (a ``|``
    inside a cell escaped)."""
    rows = ["| option | protocols | values | default | what |", "|---|---|---|---|---|"]
    everyone = set(CAMPAIGN_PROTOCOLS)
    for name, entries in declarations(protocol_options()).items():
        for option, takers in entries:
            owners = ("every protocol" if set(takers) == everyone else
                      "every protocol with a transform" if option in TRANSFORM_OPTIONS else
                      ", ".join(f"`{taker}`" for taker in takers))
            values = "a structured value (see what)" if option.kind is None else option.bounds
            shown = str(option.default).lower() if option.kind is bool else str(option.default)
            default = "" if option.default is None else f"`{shown}`"
            what = option.help.replace("|", "\\|")
            rows.append(f"| `{name}` | {owners} | {values} | {default} | {what} |")
    return rows


def test_the_docs_options_table_is_the_declarations() -> None:
    text = (REPO / "docs" / "campaigns.md").read_text()
    start = text.index("| option | protocols | values | default | what |")
    listed = text[start:].split("\n\n", 1)[0].splitlines()
    assert listed == options_table(), "docs/campaigns.md's options table is not what the protocols declare:\n" + \
        "\n".join(options_table())


def test_next_state_checks_the_round_and_the_aggregates() -> None:
    """The service's transition by protocol name refuses a round without a successor and the wrong aggregates."""
    spec, _, first = first_round(np.random.default_rng(4))
    with pytest.raises(EstimatorError, match="aggregates of rounds 0..0"):
        next_state(spec, 0, [])
    with pytest.raises(EstimatorError, match="no round after round 1"):
        next_state(spec, 1, [first, first])
    with pytest.raises(ValueError, match="round_index"):
        next_state(spec, 2, [first, first, first])
    with pytest.raises(EstimatorError, match="no round after round 0"):
        next_state(SteinGlmSpec(2, 3.0, 1.0, 1.0, 1e-6), 0, [first])
    assert next_state(spec, 0, [first]).round_index == 1


def test_the_glm_records_answer_exactly_their_estimators_links() -> None:
    """The catalog declares what the GLM campaigns answer without importing their estimators (so that listing the
    protocols stays light); the declaration must still be exactly what the estimators fit."""
    from estimators.local.glm.links import LINKS as STEIN_LINKS
    from estimators.local.glm.moment import MOMENT_LINKS

    assert CAMPAIGN_PROTOCOLS.get("glm").models == tuple(MOMENT_LINKS)
    for name in ("stein-glm", "stein-glm-2round"):
        assert CAMPAIGN_PROTOCOLS.get(name).models == ("linear", *STEIN_LINKS)
