"""A ``marginals`` campaign end to end (issue 33): created from a public table's coded columns or a stated domain,
fed through the real submission path, answered (marginals with their coverage and standard errors, synthetic rows)
from one stored model, planned, and refused where it should be, with nothing stored by a refusal."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import func, select

from db.models import CampaignModel
from service.campaigns import campaigns, estimates, marginal_answers, planning, public_tables, simulate
from service.errors import Conflict, InvalidInput
from tests.support.campaign_rows import aggregate_sums, ledger_reports
from workloads.local.protocols.marginals import MarginalsSpec

DOMAIN = {"a": 3, "b": 2, "c": 4}


def rows(n: int, seed: int = 0) -> np.ndarray:
    """``b`` follows ``a`` (a = 0 -> b = 0 mostly), ``c`` independent."""
    rng = np.random.default_rng(seed)
    a = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    b = np.where(rng.random(n) < 0.9, (a > 0).astype(int), 1 - (a > 0).astype(int))
    return np.stack([a, b, rng.integers(0, 4, size=n)], axis=1)


def truth(data: np.ndarray, columns: list[int]) -> np.ndarray:
    shape = tuple(DOMAIN["abc"[c]] for c in columns)
    cells = np.ravel_multi_index(tuple(data[:, columns].T), shape)
    return np.bincount(cells, minlength=math.prod(shape)).reshape(shape)


def make(engine, name: str = "survey", epsilon: float = 2.0, **options: object):  # noqa: ANN001, ANN201
    return campaigns.create_campaign(engine, name, "marginals", ["a", "b", "c"], epsilon=epsilon,
                                     options={"domain": DOMAIN, "way": 2, **options})


def test_a_campaign_answers_marginals_and_synthetic_rows_from_one_stored_model(engine) -> None:  # noqa: ANN001
    info = make(engine)
    assert isinstance(info.spec, MarginalsSpec) and info.spec.sets == ((0, 1), (0, 2), (1, 2))
    data = rows(20_000, 1)
    simulate.simulate(engine, "survey", data, seed=7)
    sums = aggregate_sums(engine, "survey")
    assert sums["reports"].sum() == 20_000
    # every participant spent exactly the campaign's epsilon, once (docs/privacy.md 8.10 (d))
    ledger = ledger_reports(engine, "survey")
    assert len(ledger) == 20_000 and {(r, e, d) for _, r, e, d in ledger} == {(0, 2 * 10**12, 0)}
    answer = marginal_answers.answer_marginal(engine, "survey", ["b", "a"], allow_seeded=True)
    counts = np.asarray(answer["counts"])
    assert answer["campaign"] == "survey" and answer["reports"] == 20_000 and counts.shape == (2, 3)
    assert answer["error_basis"] == "measurement" and answer["coverage"]["measured"]
    assert answer["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
    error = np.asarray(answer["standard_errors"])[0, 0]
    # the measured set's per-cell standard error is the oracle's, summed over no cell (its own marginal)
    (oracle,) = [o for j, o in enumerate(info.spec.oracles) if info.spec.sets[j] == (0, 1)]
    expected = 20_000 * math.sqrt(oracle.mean_variance(int(sums["reports"][0])))
    assert error == pytest.approx(expected, rel=1e-9)
    assert np.abs(counts - truth(data, [1, 0])).max() < 5 * error  # the model pools the sets: within 5 SEs
    # an unmeasured 3-way marginal: extrapolated (said so), with bootstrap error bars on request
    three = marginal_answers.answer_marginal(engine, "survey", ["a", "b", "c"], allow_seeded=True, bootstrap=True,
                                             bootstrap_seed=1)
    assert not three["coverage"]["measured"] and "campaign 'survey' did not measure" in three["coverage"]["warning"]
    assert three["error_basis"].startswith("parametric bootstrap") and np.all(np.asarray(three["standard_errors"]) > 0)
    assert np.asarray(three["counts"]).sum() == pytest.approx(20_000, rel=1e-6)
    frame = marginal_answers.synthetic_frame(engine, "survey", 5_000, seed=3, allow_seeded=True)
    assert list(frame.columns) == ["a", "b", "c"] and len(frame) == 5_000
    share = np.mean(frame["b"].to_numpy() == (frame["a"].to_numpy() > 0))
    assert share > 0.75  # the dependence of b on a survives into the rows (0.9 in the data)
    with engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(CampaignModel)).scalar_one() == 1
    marginal_answers.clear_cache()
    again = marginal_answers.answer_marginal(engine, "survey", ["b", "a"], allow_seeded=True)
    assert again["counts"] == answer["counts"]  # read back from the stored model, not fitted again
    with engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(CampaignModel)).scalar_one() == 1


def test_more_reports_fit_a_new_model(engine) -> None:  # noqa: ANN001
    make(engine)
    simulate.simulate(engine, "survey", rows(2_000, 2))
    first = marginal_answers.answer_marginal(engine, "survey", ["a"])
    simulate.simulate(engine, "survey", rows(2_000, 3))
    second = marginal_answers.answer_marginal(engine, "survey", ["a"])
    assert (first["reports"], second["reports"]) == (2_000, 4_000)
    assert sum(second["counts"]) == pytest.approx(4_000, rel=1e-6)


def test_a_public_tables_coded_columns_give_the_domain_and_the_labels(engine, tmp_path: Path) -> None:  # noqa: ANN001
    csv = tmp_path / "public.csv"
    csv.write_text("a,b,c\n" + "\n".join(f"{a},{b},{c}" for a, b, c in rows(50)))
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps(DOMAIN))
    public_tables.load_public_csv(engine, "sample", csv, domain)
    info = campaigns.create_campaign(engine, "from-public", "marginals", ["a", "c"], public="sample", epsilon=1.0,
                                     options={"way": 1})
    assert info.spec.sizes == (3, 4) and info.spec.sets == ((0,), (1,))
    plan = planning.plan_campaign(engine, "marginals", ["a", "c"], public="sample", epsilon=1.0,
                                  options={"way": 1}, participants=5_000)
    assert set(plan.marginal_errors) == {"a", "c"} and plan.expected_error is not None
    assert "public table's 50 rows" in plan.reference


def test_bad_requests_are_named_and_store_nothing(engine) -> None:  # noqa: ANN001
    cases = [({"domain": {"a": 3, "b": 2}}, r"\['c'\] have none"),
             ({"domain": {"a": 3, "b": 2, "c": 0}}, "the size of 'c' must be a positive whole number"),
             ({"domain": {"a": 3, "b": 2, "c": 4, "z": 2}}, "names 'z', which is not among the features"),
             ({"domain": DOMAIN, "sets": [["a", "q"]]}, "names 'q'"),
             ({"domain": DOMAIN, "sets": [["a"]], "way": 1}, "sets and way exclude each other"),
             ({"domain": DOMAIN, "oracle": "rappor"}, "oracle"),
             ({"domain": "a=3;b=x;c=4"}, "the size of 'b'")]
    cases.append(({"domain": DOMAIN}, "give option participants"))
    for options, message in cases:
        with pytest.raises(InvalidInput, match=message):
            campaigns.create_campaign(engine, "bad", "marginals", ["a", "b", "c"], epsilon=1.0, options=options)
    with pytest.raises(InvalidInput, match="delta must be 0"):
        campaigns.create_campaign(engine, "bad", "marginals", ["a", "b", "c"], epsilon=1.0, delta=1e-6,
                                  options={"domain": DOMAIN, "way": 1})
    assert campaigns.list_campaigns(engine) == []
    info = campaigns.create_campaign(engine, "cli", "marginals", ["a", "b", "c"], epsilon=1.0,
                                     options={"domain": "a=3;b=2;c=4", "sets": "a,b;c"})
    assert info.spec.sets == ((0, 1), (2,))


def test_the_default_split_measures_every_attribute_and_the_pairs_the_participants_can_afford(engine) -> None:  # noqa: ANN001
    """Without way or sets, the split is planned from public inputs: every attribute, then the pairs of fewest
    cells while each is expected within L1 0.25 on its own; more participants, or a larger epsilon, afford more."""
    few = campaigns.create_campaign(engine, "few", "marginals", ["a", "b", "c"], epsilon=1.0,
                                    options={"domain": DOMAIN, "participants": 2_000})
    many = campaigns.create_campaign(engine, "many", "marginals", ["a", "b", "c"], epsilon=1.0,
                                     options={"domain": DOMAIN, "participants": 200_000})
    assert few.spec.sets[:3] == ((0,), (1,), (2,)) and many.spec.sets[:3] == ((0,), (1,), (2,))
    assert len(few.spec.sets) < len(many.spec.sets) == 6  # all three pairs at 200,000
    assert few.spec.participants == 2_000


def test_what_a_marginals_campaign_refuses(engine) -> None:  # noqa: ANN001
    make(engine)
    with pytest.raises(Conflict, match="no reports yet"):
        marginal_answers.answer_marginal(engine, "survey", ["a"])
    simulate.simulate(engine, "survey", rows(500), seed=1)
    with pytest.raises(Conflict, match="seeded simulation"):
        marginal_answers.answer_marginal(engine, "survey", ["a"])
    with pytest.raises(InvalidInput, match="fits no model"):
        estimates.fit_campaign(engine, "survey", "linear")
    with pytest.raises(InvalidInput, match="invalid|unknown|attribute"):
        marginal_answers.answer_marginal(engine, "survey", ["a", "zz"], allow_seeded=True)
    with pytest.raises(InvalidInput, match="rows must be"):
        marginal_answers.synthetic_frame(engine, "survey", 0, allow_seeded=True)
    campaigns.create_campaign(engine, "average", "ldp-avg", ["v"], epsilon=1.0, options={"lower": 0, "upper": 1})
    with pytest.raises(InvalidInput, match="only a marginals campaign"):
        marginal_answers.answer_marginal(engine, "average", ["v"])
