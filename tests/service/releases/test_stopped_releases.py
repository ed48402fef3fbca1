"""A release of many noisy steps (AIM, MST) stopped part-way is charged exactly the steps whose noise was drawn
(docs/privacy.md 6.5; service/releases/engine.py): after a stop request the ledger keeps their rho, rounded up to its
grid, and refunds the rest of the reservation in an appended row; after a failure the whole reservation stands.

What was drawn is read from the noise source itself (``tests/support/recording_noise.py``), not from the mechanism's
own record, and the stops come from the in-process hook of Ctrl-C (``interrupts.request``) at chosen progress reports,
never from timing. The real program under SIGINT: tests/system/test_cli_interrupts.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest
from sqlalchemy import text

from estimators.graphical import mirror_descent
from service import interrupts
from service.accounting import accountant
from service.data import datasets
from service.errors import ServiceError
from service.interrupts import Interrupted
from service.mechanisms.base import FIT_PHASE
from service.releases import answers
from service.releases import engine as release_engine
from tests.support.backends import ON_SQLITE
from tests.support.ledger import budget_audit, net_charge
from tests.support.recording_noise import RecordingNoise, rho_from_calls

UNIT = 10**12  # the ledger's rho units per 1
RHO = "0.5"
RESERVED = int(Fraction(RHO) * UNIT)
#: A small AIM release: two initial cliques, a few rounds, one-iteration fits (the rounds are under test, not the fits).
AIM = {"mechanism": "aim", "workload": [["a"], ["b", "c"]],
       "options": {"rounds": 20, "round_iters": 1, "iters": 1, "initial_cliques": [["a"], ["b"]]}}
#: MST on the same table: three one-way measurements, two tree selections, two pair measurements.
MST = {"mechanism": "mst", "workload": "all-1way", "options": {"iters": 1}}
MST_STEPS = 3 + 2 + 2
Progress = Callable[[int, int, str], None]


@pytest.fixture
def small(engine, tmp_path: Path) -> str:  # noqa: ANN001
    """A three-column coded table with a budget: small enough for a release per stop point."""
    csv = tmp_path / "small.csv"
    csv.write_text("a,b,c\n" + "\n".join(f"{i % 3},{(i // 3) % 2},{(i * 7 // 5) % 2}" for i in range(90)) + "\n")
    domain = tmp_path / "small.json"
    domain.write_text(json.dumps({"a": 3, "b": 2, "c": 2}))
    datasets.load_coded_csv(engine, "small", csv, domain, store="sql")  # in the service's database: quick to open
    accountant.set_budget(engine, "small", "1000", "1e-5")
    return "small"


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[RecordingNoise]:
    """Every noise source the release engine makes, recording what was drawn from it (one per release)."""
    sources: list[RecordingNoise] = []

    def recording(seed: int | None = None) -> RecordingNoise:
        sources.append(RecordingNoise(seed))
        return sources[-1]

    monkeypatch.setattr(release_engine, "NoiseSource", recording)
    return sources


def _release(engine, name: str, spec: dict[str, object], progress: Progress, seed: int = 3):  # noqa: ANN001, ANN202
    return release_engine.release_marginals(engine, name, spec["mechanism"], spec["workload"], rho=RHO, seed=seed,
                                            options=spec["options"], progress=progress)


def _stopped(engine, name: str, spec: dict[str, object], stop: Callable[[int, int, str], bool]):  # noqa: ANN001, ANN202
    """The outcome of a release stopped (Ctrl-C, in process) at the first progress report for which ``stop`` is true:
    the request is honoured at the next report, as the command line's is."""
    def progress(done: int, total: int, message: str) -> None:
        if stop(done, total, message):
            interrupts.request()

    with pytest.raises(Interrupted) as caught:
        _release(engine, name, spec, progress)
    interrupts.clear()
    return caught.value.outcome


def _ledger_of(engine, release_id: int) -> list[tuple[int, str, int, int | None, str]]:  # noqa: ANN001
    with engine.connect() as connection:
        return [tuple(r) for r in connection.execute(text(
            "SELECT id, entry, rho_units, refunds_entry_id, note FROM ledger_entries WHERE release_id = :r "
            "ORDER BY id"), {"r": release_id})]


def _check_stopped(engine, name: str, outcome, noise: RecordingNoise, steps: int) -> int:  # noqa: ANN001
    """Everything a stopped release leaves, against what its noise source drew; returns the rho units kept."""
    assert len(noise.calls) == steps
    spent = rho_from_calls(noise)
    kept = min(math.ceil(spent * UNIT), RESERVED)  # the drawn steps' rho, rounded up to the grid
    release_id = outcome.release_id
    assert net_charge(engine, release_id) == (0, 0, kept)
    (charge_id, entry, reserved, _, _), *refund = _ledger_of(engine, release_id)
    assert (entry, reserved) == ("charge", RESERVED)  # reserved whole up front, never edited
    if kept < RESERVED:  # one appended refund of the rest, naming the charge, and its exact reason
        ((_, entry, back, refunds, note),) = refund
        assert (entry, back, refunds) == ("refund", kept - RESERVED, charge_id)
        assert f"after {steps} steps drew their noise" in note and f"rho={spent} (exact)" in note
    else:  # every step had drawn its noise: the whole charge stands, nothing to refund
        assert refund == []
    # what the command line prints and returns agrees with the ledger
    assert outcome.status == "failed_after_noise" and not outcome.refunded
    assert outcome.spent.rho == Fraction(kept, UNIT) and outcome.to_json()["steps_drawn"] == steps
    assert outcome.to_json()["spent"]["rho"] == kept / UNIT
    # the release: failed, no payload, answers nothing; its details let an auditor recompute the charge kept
    with engine.connect() as connection:
        status, payload, details = connection.execute(text(
            "SELECT status, payload, details_json FROM releases WHERE id = :r"), {"r": release_id}).one()
    stopped = json.loads(details)["stopped"]
    assert (status, payload) == ("failed_after_noise", None)
    assert stopped["requested"] and stopped["steps_drawn"] == steps and Fraction(stopped["rho_drawn"]) == spent
    with pytest.raises(ServiceError, match="failed_after_noise"):
        answers.answer_marginal(engine, release_id, ["a"], allow_seeded=True)
    # budget show, the release's reported effect and the auditor's view say the same
    status_now = accountant.budget_status(engine, name)
    assert outcome.budget.epsilon_after == status_now.epsilon_spent
    stored, recomputed, agrees = budget_audit(engine, name)
    assert stored == recomputed == status_now.epsilon_spent * UNIT and agrees == 1
    return kept


@ON_SQLITE
def test_an_aim_release_stopped_in_any_round_is_charged_exactly_the_rounds_that_drew_noise(
        engine, small: str, drawn: list[RecordingNoise]) -> None:  # noqa: ANN001
    """Stop a small AIM release in the model fit that follows each round (the initial measurements' fit first, the
    final fit last): the ledger keeps exactly the rho of the initial cliques and of the rounds selected and measured so
    far, and refunds the rest; once every round drew its noise the whole reservation stands. A complete run is charged
    exactly its reservation (AIM's last round takes what is left)."""
    complete = _release(engine, small, AIM, lambda *_: None)
    rounds = complete.details["rounds"]
    assert net_charge(engine, complete.release_id) == (0, 0, RESERVED) and rho_from_calls(drawn[-1]) == Fraction(RHO)
    assert rounds >= 3  # several rounds to stop in
    initial = len(AIM["options"]["initial_cliques"])
    charged = [RESERVED]
    for fit in range(rounds + 2):  # the fits: after the initial cliques, after each round, the final one
        fits = iter(range(rounds + 2))

        def stop(done: int, total: int, message: str, fit: int = fit, fits=fits) -> bool:  # noqa: ANN001, ARG001
            return message == FIT_PHASE and done == 0 and next(fits) == fit  # the request: at that fit's first report

        outcome = _stopped(engine, small, AIM, stop)
        charged.append(_check_stopped(engine, small, outcome, drawn[-1], initial + 2 * min(fit, rounds)))
    assert charged[-2:] == [RESERVED, RESERVED] and all(c < RESERVED for c in charged[1:-2])
    assert accountant.budget_status(engine, small).rho_spent == Fraction(sum(charged), UNIT)


@ON_SQLITE
def test_an_mst_release_stopped_after_any_step_is_charged_exactly_the_steps_that_drew_noise(
        engine, small: str, drawn: list[RecordingNoise]) -> None:  # noqa: ANN001
    """MST has the same structure (one-way measurements, tree selections, pair measurements, each followed by a progress
    report where a stop is honoured; its amounts are fixed in advance): stopped after each step, it is charged exactly
    the steps drawn so far, and once all are drawn (a stop in the model fit) its whole reservation."""
    for after in range(MST_STEPS + 1):  # the request comes with a step's report and is honoured after the next step
        reports = iter(range(MST_STEPS + 1))

        def stop(done: int, total: int, message: str, after: int = after, reports=reports) -> bool:  # noqa: ANN001, ARG001
            return message != FIT_PHASE and next(reports) == after

        outcome = _stopped(engine, small, MST, stop)
        _check_stopped(engine, small, outcome, drawn[-1], min(after + 1, MST_STEPS))


def test_a_stop_and_its_partial_refund_agree_with_budget_show_and_the_audit_view(
        engine, small: str, drawn: list[RecordingNoise]) -> None:  # noqa: ANN001
    """On both databases, after a pure-DP release (so the anchor sits on a non-zero E_0) and a stop in AIM's second
    round: the charge kept is what the release's details and the refund's note let an auditor recompute, and the audit
    view's plain-SQL recomputation equals ``budget show`` (the views read the refund's row as any other)."""
    release_engine.release_marginals(engine, small, "laplace", [["a"]], epsilon="0.5", seed=1)
    fits = iter(range(10))
    outcome = _stopped(engine, small, AIM, lambda done, total, message: message == FIT_PHASE and done == 0
                       and next(fits) == 2)
    kept = _check_stopped(engine, small, outcome, drawn[-1], 2 + 2 * 2)
    with engine.connect() as connection:
        details = connection.execute(text("SELECT details_json FROM releases WHERE id = :r"),
                                     {"r": outcome.release_id}).scalar_one()
        rho_spent, alpha = connection.execute(text(
            "SELECT rho_spent_units, anchor_alpha_units FROM budget_remaining WHERE dataset = :d"), {"d": small}).one()
    assert math.ceil(Fraction(json.loads(details)["stopped"]["rho_drawn"]) * UNIT) == kept == int(rho_spent)
    assert alpha is not None and accountant.budget_status(engine, small).rho_spent == Fraction(kept, UNIT)


@ON_SQLITE
def test_a_failure_after_noise_keeps_the_whole_reservation(engine, small: str, drawn: list[RecordingNoise],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """A failure is not a stop request: it may depend on the data (whether memory runs out depends on what else holds
    memory, the engine's buffers of the counted rows among it), and no filter theorem covers a stop that does, so the
    whole reservation stands, and the release says why nothing was refunded."""
    real_fit, fits = mirror_descent.fit, iter(range(100))

    def fit_out_of_memory(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if next(fits) == 2:  # the fit after round 2
            raise MemoryError
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(mirror_descent, "fit", fit_out_of_memory)
    with pytest.raises(MemoryError) as caught:
        _release(engine, small, AIM, lambda *_: None)
    failure = caught.value.release_failure
    assert len(drawn[-1].calls) == 2 + 2 * 2 and rho_from_calls(drawn[-1]) < Fraction(RHO)
    assert net_charge(engine, failure.release_id) == (0, 0, RESERVED)
    assert [entry for _, entry, *_ in _ledger_of(engine, failure.release_id)] == ["charge"]
    assert failure.status == "failed_after_noise" and failure.spent.rho == Fraction(RHO)
    assert any("stands (after a failure nothing is refunded: whether a release fails may depend on the data" in note
               for note in caught.value.__notes__)
