"""The marginals protocol's spec (docs/privacy.md 8.10 (d), (e)): its checks, the set a device draws (uniform and
independent of her record), what the server accepts, and the totals it adds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from estimators.local.aggregate import ReportAggregate
from workloads.local.protocols import ProtocolError, ReportError, RoundState, spec_from_json
from workloads.local.protocols.base import BatchTotals
from workloads.local.protocols.marginals import MarginalsSpec, all_sets

STATE = RoundState(0, {})


def spec(oracle: str = "auto", epsilon: float = 1.0) -> MarginalsSpec:
    return MarginalsSpec(("a", "b", "c"), (3, 2, 40), all_sets(3, 2), epsilon, oracle=oracle)


def records(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, 3, n), rng.integers(0, 2, n), rng.integers(0, 40, n)], axis=1)


def test_the_spec_round_trips_and_checks_its_parts() -> None:
    made = spec()
    assert spec_from_json(made.to_json()) == made
    assert made.sets == ((0, 1), (0, 2), (1, 2)) and made.participant_cost("all") == (1.0, 0.0)
    with pytest.raises(ProtocolError, match="one size per attribute"):
        MarginalsSpec(("a", "b"), (3,), ((0, 1),), 1.0)
    with pytest.raises(ProtocolError, match="distinct"):
        MarginalsSpec(("a", "b"), (3, 2), ((0, 1), (1, 0)), 1.0)
    with pytest.raises(ProtocolError, match="cells"):
        MarginalsSpec(("a", "b"), (1, 1), ((0, 1),), 1.0)
    with pytest.raises(ProtocolError, match="oracle"):
        MarginalsSpec(("a",), (3,), ((0,),), 1.0, oracle="rappor")


def test_the_set_is_uniform_and_independent_of_the_record() -> None:
    made = spec()
    first = made.randomize(0, STATE, {"x": records(30_000, 1)}, np.random.default_rng(4))
    other = made.randomize(0, STATE, {"x": records(30_000, 2)}, np.random.default_rng(4))
    assert np.array_equal(first["set"], other["set"])  # the same stream draws the same sets, whatever the records
    counts = np.bincount(first["set"].astype(int), minlength=3)
    assert stats.chisquare(counts).pvalue > 1e-3


@pytest.mark.parametrize("oracle", ["auto", "grr", "olh", "hadamard", "oue"])
def test_every_honest_report_is_accepted_and_added_as_totals(oracle: str) -> None:
    made = spec(oracle)
    reports = made.randomize(0, STATE, {"x": records(2_000)}, np.random.default_rng(2))
    batch = made.report_schema(0, STATE).validate(reports)
    made.check_reports(0, STATE, batch)
    totals = made.aggregate_input(0, STATE, batch)
    assert isinstance(totals, BatchTotals) and totals.count == 2_000
    aggregate = ReportAggregate.for_round(made, 0, STATE).add(totals)
    assert aggregate.count == 2_000 and aggregate.sums["reports"].sum() == 2_000
    one = made.randomize(0, STATE, {"x": records(1)[0]}, np.random.default_rng(2))
    assert all(np.ndim(v) == (1 if k == "bits" else 0) for k, v in one.items())


def test_the_server_refuses_what_no_device_sends() -> None:
    made = spec("olh")
    reports = made.randomize(0, STATE, {"x": records(50)}, np.random.default_rng(0))
    batch = made.report_schema(0, STATE).validate(reports)
    small = int(np.flatnonzero(batch["set"] == 0)[0])  # set 0 (a x b: 6 cells) has fewer seeds than set 1
    too_big = {**batch, "seed": batch["seed"].copy()}
    too_big["seed"][small] = made.oracles[0].seed_limit
    with pytest.raises(ReportError, match=f"report {small}: set 0: .*seed") as error:
        made.check_reports(0, STATE, too_big)
    assert error.value.index == small and error.value.field == "seed"
    fraction = {**batch, "set": batch["set"].copy()}
    fraction["set"][7] = 0.5
    with pytest.raises(ReportError, match="report 7"):
        made.check_reports(0, STATE, fraction)
    unary = spec("oue")
    raw = unary.randomize(0, STATE, {"x": records(20)}, np.random.default_rng(0))
    raw["set"][:] = 0  # set 0 has 6 cells of the 80 bits
    raw["bits"][:, 6:] = 0.0
    unary.check_reports(0, STATE, unary.report_schema(0, STATE).validate(raw))
    raw["bits"][3, 50] = 1.0
    with pytest.raises(ReportError, match="report 3: set 0 has 6 cells"):
        unary.check_reports(0, STATE, unary.report_schema(0, STATE).validate(raw))


def test_bad_totals_are_refused_and_leave_the_aggregate_alone() -> None:
    made = spec()
    aggregate = ReportAggregate.for_round(made, 0, STATE)
    width = made.offsets[-1]
    for totals in (BatchTotals(2, {"counts": np.zeros(width)}, {"counts": np.zeros(width)}),
                   BatchTotals(2, {"counts": np.full(width, 3.0), "reports": np.zeros(3)},
                               {"counts": np.zeros(width), "reports": np.zeros(3)}),
                   BatchTotals(-1, {}, {})):
        with pytest.raises(ReportError):
            aggregate.add(totals)
    assert aggregate.count == 0 and not aggregate.sums["counts"].any()


def test_a_record_outside_the_domain_is_refused_on_the_device() -> None:
    bad = records(3)
    bad[1, 2] = 40
    with pytest.raises(ProtocolError, match="attribute 'c' takes the codes 0..39"):
        spec().randomize(0, STATE, {"x": bad}, np.random.default_rng(0))
