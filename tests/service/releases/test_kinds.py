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
from service.mechanisms.gram import GramPayload
from service.mechanisms.objpert import ModelPayload
from service.mechanisms.registry import ReleaseKind
from service.privacy.cost import PrivacyCost
from service.releases import engine as release_engine
from service.releases import kinds
from service.releases.kinds import KindSpec

CAMPAIGN = "test-campaign"


@pytest.fixture
def uncharged_kind() -> Iterator[KindSpec]:
    spec = kinds.register(KindSpec(CAMPAIGN, "reports spent from each participant's own budget",
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
    assert kinds.get(ReleaseKind.GRAM).encode_result is None  # gram runners keep and encode their own payload
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
                                   runner=lambda *args: ran.append(args), seed=None, principal="test",
                                   encode_payload=lambda result: b"")
    assert ran == []
    with engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM ledger_entries WHERE entry = 'charge'")).scalar_one() == 0
        assert connection.execute(text("SELECT COUNT(*) FROM releases")).scalar_one() == 0
