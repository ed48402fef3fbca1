"""The protocol contract: every protocol a device can run (``workloads.local.protocols.PROTOCOLS``) is one complete
slice, so the next protocol cannot be half-registered. For each: a record in ``service.campaigns.protocols`` with its
spec class (and so its randomizer), its builder, its round transition (exactly when it has more than one round), the
models it answers (each with a mean the client predicts with) and its estimates; a row in docs/campaigns.md's
protocol table; a privacy section in docs/privacy.md; an entry in the API's role test (``PROTOCOL_CAMPAIGNS``). A
missing part fails naming it."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.base import EstimatorError
from service.campaigns.options import Options
from service.campaigns.protocols import CAMPAIGN_PROTOCOLS, build_spec, next_state
from service.campaigns.types import CampaignRequest
from tests.support.paths import REPO
from tests.support.roles import PROTOCOL_CAMPAIGNS
from tests.support.two_round import first_round
from workloads.links import LINEAR_MODELS, LINK_MEANS
from workloads.local.protocols import PROTOCOLS, ProtocolSpec, SteinGlmSpec, TwoRoundSteinSpec

#: what a spec class must define itself (the base class's raise NotImplementedError)
SPEC_METHODS = ("rounds", "groups", "report_schema", "randomize")


def _request(body: dict[str, object]) -> CampaignRequest:
    """A builder's request from the role test's body (a standard-normal public table where it names one)."""
    features = tuple(body["features"])  # type: ignore[arg-type]
    public = np.random.default_rng(0).standard_normal((40, len(features))) if "public" in body else None
    return CampaignRequest(features, body.get("target"), float(body["epsilon"]),  # type: ignore[arg-type]
                           float(body.get("delta", 0.0)), Options(dict(body.get("options", {}))),  # type: ignore[arg-type]
                           public)


def missing_parts(name: str) -> list[str]:
    """What protocol ``name`` lacks, each named (empty: a complete slice)."""
    record = CAMPAIGN_PROTOCOLS.get(name)
    if record is None:
        return [f"{name}: no record in service.campaigns.protocols (a module there must register a CampaignProtocol)"]
    missing = []
    if record.spec is not PROTOCOLS[name]:
        missing.append(f"{name}: the record's spec class is {record.spec.__name__}, not the registered "
                       f"{PROTOCOLS[name].__name__}")
    for method in SPEC_METHODS:
        if getattr(record.spec, method) is getattr(ProtocolSpec, method):
            missing.append(f"{name}: its spec class {record.spec.__name__} does not define {method}"
                           f"{' (the randomizer devices run)' if method == 'randomize' else ''}")
    for part in ("build", "fit"):
        if not callable(getattr(record, part)):
            missing.append(f"{name}: the record's {part} is not callable")
    if not record.models or not all(isinstance(model, str) and model for model in record.models):
        missing.append(f"{name}: the record names no models it answers")
    for model in record.models:
        if model not in LINK_MEANS and model not in LINEAR_MODELS:
            missing.append(f"{name}: model {model!r} has no mean in workloads.links (LINK_MEANS or LINEAR_MODELS), so "
                           "the client cannot predict with it")
    if name not in PROTOCOL_CAMPAIGNS:
        missing.append(f"{name}: no entry in PROTOCOL_CAMPAIGNS of tests/support/roles.py (the role test "
                       "creates a campaign of every protocol as every caller)")
    elif callable(record.build):
        spec = build_spec(name, _request(PROTOCOL_CAMPAIGNS[name]))
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

    monkeypatch.setitem(PROTOCOLS, "half-registered", HalfSpec)
    assert missing_parts("half-registered") == [
        "half-registered: no record in service.campaigns.protocols (a module there must register a CampaignProtocol)"]
    record = CAMPAIGN_PROTOCOLS["stein-glm"]
    monkeypatch.setitem(CAMPAIGN_PROTOCOLS, "stein-glm-2round", record.__class__(
        "stein-glm-2round", TwoRoundSteinSpec, CAMPAIGN_PROTOCOLS["stein-glm-2round"].build, None, record.models,
        record.fit, "required", "no transition"))
    assert missing_parts("stein-glm-2round") == [
        "stein-glm-2round: 2 rounds but no transition (the next round's public state)"]


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
