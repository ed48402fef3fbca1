"""Issue 18: the client's progress line of a background job said "0/? queued done" for a job that finished before
its first step was reported. Steps show once their number is known, a finished job says done or failed."""

from __future__ import annotations

from service.client.http import _ProgressLine

JOB = {"job_id": 7, "kind": "release", "dataset": "adult", "fit": None}


def test_a_job_that_finished_before_its_first_step_says_done() -> None:
    queued = {**JOB, "state": "running", "progress": {"done": 0, "total": 0, "message": "queued"}}
    assert _ProgressLine.describe(queued) == "release 7 of adult: queued"
    assert _ProgressLine.describe({**queued, "state": "done"}) == "release 7 of adult: done"
    assert _ProgressLine.describe({**queued, "state": "failed"}) == "release 7 of adult: failed"


def test_known_steps_are_shown_with_their_message() -> None:
    step = {**JOB, "state": "running", "progress": {"done": 2, "total": 5, "message": "measuring Sex"}}
    assert _ProgressLine.describe(step) == "release 7 of adult: 2/5 measuring Sex"
    finished = {**step, "state": "done", "progress": {"done": 5, "total": 5, "message": "stored"}}
    assert _ProgressLine.describe(finished) == "release 7 of adult: 5/5 stored done"
