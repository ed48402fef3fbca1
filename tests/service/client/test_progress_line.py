"""The client's progress line of a background job.

Issue 18: it said "0/? queued done" for a job that finished before its first step was reported. Steps show once
their number is known, a finished job says done or failed.

Issue 29 section 7: it named the job's id as a release's ("release 8 of titanic2" made release 10). It names the job
as a job, and the release by its own id once the answer names it."""

from __future__ import annotations

from service.client.http import _ProgressLine

JOB = {"job_id": 7, "kind": "release", "dataset": "adult", "fit": None}


def test_a_job_that_finished_before_its_first_step_says_done() -> None:
    queued = {**JOB, "state": "running", "progress": {"done": 0, "total": 0, "message": "queued"}}
    assert _ProgressLine.describe(queued) == "job 7 (release of adult): queued"
    assert _ProgressLine.describe({**queued, "state": "done"}) == "job 7 (release of adult): done"
    assert _ProgressLine.describe({**queued, "state": "failed"}) == "job 7 (release of adult): failed"


def test_known_steps_are_shown_with_their_message() -> None:
    step = {**JOB, "state": "running", "progress": {"done": 2, "total": 5, "message": "measuring Sex"}}
    assert _ProgressLine.describe(step) == "job 7 (release of adult): 2/5 measuring Sex"
    finished = {**step, "state": "done", "progress": {"done": 5, "total": 5, "message": "stored"}}
    assert _ProgressLine.describe(finished) == "job 7 (release of adult): 5/5 stored done"


def test_the_release_is_named_by_its_own_id_once_known() -> None:
    running = {**JOB, "job_id": 8, "dataset": "titanic2", "state": "running",
               "progress": {"done": 1, "total": 3, "message": "measuring"}, "result": None}
    assert "release 8" not in _ProgressLine.describe(running)
    done = {**running, "state": "done", "progress": {"done": 3, "total": 3, "message": "stored"},
            "result": {"release_id": 10, "status": "complete"}}
    assert _ProgressLine.describe(done) == "job 8 (release of titanic2): 3/3 stored done, release 10"
    fit = {**done, "kind": "fit/linear", "result": {"release_id": 4, "reused": True}}
    assert _ProgressLine.describe(fit) == "job 8 (fit/linear of titanic2): 3/3 stored done, release 4"
