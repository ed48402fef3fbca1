"""Release kinds: each built-in kind reads back what its mechanisms store, and a kind that is not charged to a
dataset's budget (as local-DP campaigns will be) is refused by the central release engine before anything is
reserved."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from sqlalchemy import text

from service.accounting import accountant
from service.data import datasets
from service.errors import InvalidInput
from service.mechanisms.base import MechanismResult
from service.mechanisms.payloads import GramPayload, MarginalsPayload, ModelPayload
from service.mechanisms.registry import ReleaseKind
from service.privacy.cost import PrivacyCost
from service.releases import engine as release_engine
from service.releases import kinds
from service.releases.kinds import KindSpec

CAMPAIGN = "test-campaign"


@pytest.fixture
def uncharged_kind() -> Iterator[KindSpec]:
    spec = kinds.register(KindSpec(CAMPAIGN, "reports spent from each participant's own budget", payload_type=bytes,
                                   decode_payload=lambda payload, domain: payload, charged_to_dataset=False))
    try:
        yield spec
    finally:
        kinds.unregister(CAMPAIGN)


def test_the_stored_strings_of_the_builtin_kinds_never_change() -> None:
    assert [str(k) for k in ReleaseKind] == ["marginals", "gram", "model"]
    assert kinds.names()[:3] == ["marginals", "gram", "model"]
    with pytest.raises(InvalidInput, match="release kind must be one of"):
        kinds.get("nope")


def test_the_model_kind_reads_back_a_released_model() -> None:
    payload = ModelPayload(("a", "b"), (0.5, -1.0), 0.25)
    assert kinds.get(ReleaseKind.MODEL).decode_payload(payload.to_bytes(), None) == payload
    # each kind names the payload type its mechanisms return (issue 28: no runner keeps a payload of its own)
    assert [kinds.get(k).payload_type for k in ReleaseKind] == [MarginalsPayload, GramPayload, ModelPayload]
    assert kinds.get(ReleaseKind.GRAM).decode_payload.__name__ == "_decode_gram"
    assert GramPayload.from_bytes  # the codec the gram kind delegates to


def test_a_kind_not_charged_to_a_dataset_is_refused_by_the_central_engine(engine, data_dir: Path,  # noqa: ANN001
                                                                         uncharged_kind) -> None:  # noqa: ANN001, ARG001
    datasets.load_coded_csv(engine, "titanic", data_dir / "titanic/titanic.csv",
                            data_dir / "titanic/titanic-domain.json", categorical=("Sex", "Embarked"))
    accountant.set_budget(engine, "titanic", "4", "1e-6")
    ran = []
    with pytest.raises(InvalidInput, match="not charged to a dataset's budget"):
        release_engine.run_release(engine, datasets.get_dataset(engine, "titanic"), kind=CAMPAIGN, mechanism="x",
                                   cost=PrivacyCost(epsilon=Fraction(1)), params={},
                                   runner=lambda *args: ran.append(args), seed=None, principal="test")
    assert ran == []
    with engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM ledger_entries WHERE entry = 'charge'")).scalar_one() == 0
        assert connection.execute(text("SELECT COUNT(*) FROM releases")).scalar_one() == 0


def _titanic(engine, data_dir: Path):  # noqa: ANN001, ANN202
    datasets.load_coded_csv(engine, "titanic", data_dir / "titanic/titanic.csv",
                            data_dir / "titanic/titanic-domain.json", categorical=("Sex", "Embarked"))
    accountant.set_budget(engine, "titanic", "4", "1e-6")
    return datasets.get_dataset(engine, "titanic")


def test_a_result_carries_its_payload_and_the_engine_stores_its_bytes(engine, data_dir: Path) -> None:  # noqa: ANN001
    """Issue 28: one kind-neutral result; the release engine stores ``result.payload.to_bytes()``, of the kind's
    payload type, and no runner keeps a payload of its own for the engine to fish out."""
    model = ModelPayload(("a",), (0.5,), None)
    outcome = release_engine.run_release(
        engine, _titanic(engine, data_dir), kind=ReleaseKind.MODEL, mechanism="objpert",
        cost=PrivacyCost(epsilon=Fraction(1), delta=Fraction(1, 10**6)), params={},
        runner=lambda oracle, noise, progress: MechanismResult(PrivacyCost(epsilon=Fraction(1), delta=Fraction(
            1, 10**6)), model, {"public": 1}), seed=1, principal="test")
    with engine.connect() as connection:
        stored = connection.execute(text("SELECT payload FROM releases WHERE id = :id"),
                                    {"id": outcome.release_id}).scalar_one()
    assert bytes(stored) == model.to_bytes() and outcome.details == {"public": 1}


def test_a_payload_of_another_kind_fails_the_release_naming_both_types(engine, data_dir: Path) -> None:  # noqa: ANN001
    with pytest.raises(RuntimeError, match="returned a ModelPayload payload; a gram release stores a GramPayload"):
        release_engine.run_release(
            engine, _titanic(engine, data_dir), kind=ReleaseKind.GRAM, mechanism="adassp",
            cost=PrivacyCost(rho=Fraction(1, 10)), params={},
            runner=lambda oracle, noise, progress: MechanismResult(PrivacyCost(rho=Fraction(1, 10)),
                                                                   ModelPayload((), (), None)),
            seed=1, principal="test")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT status FROM releases")).scalar_one() == "failed_before_noise"


def test_the_kinds_are_a_registry_that_refuses_a_taken_name() -> None:
    """The kinds' catalog is the project's one generic registry (workloads/registry.py), with its own messages."""
    from workloads.registry import Registry

    assert isinstance(kinds._KINDS, Registry)  # noqa: SLF001
    with pytest.raises(ValueError, match="release kind 'model' is registered already"):
        kinds.register(kinds.get(ReleaseKind.MODEL))
    with pytest.raises(InvalidInput, match=r"release kind must be one of \['marginals', 'gram', 'model'") as refused:
        kinds.get("nope")
    assert refused.value.code == "invalid_parameter"
