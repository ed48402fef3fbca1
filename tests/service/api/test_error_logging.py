"""Log lines and stored failures show an exception's type and frames, never the message of an exception that is
not our own (issue 27, finding 1; docs/privacy.md section 1.3): the API's internal-error log line, a background
job's record, a failed release's row and the ledger's refund reason, the heartbeat's warning. ``MARGINALIA_DEBUG=1``
is the operator's request for the whole traceback.

On f80d414 the API logged ``exc_info`` (the foreign message in full), the release row and the refund reason held
``RuntimeError: <its message>``, and the heartbeat logged the exception itself."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from db.engine import transaction
from db.models import Job, LedgerEntry, Release
from service import runners
from service.access import auth
from service.accounting import accountant
from service.api import create_app
from service.data.oracle import TableCountOracle
from service.error_text import shown_message, shown_traceback
from service.errors import InvalidInput
from tests.support.apihelpers import bearer, finished_job
from tests.support.datasets import titanic_with_budget

CANARY = "Jane Doe HIV+ canary-5f1d"


def _fail(*args: object, **kwargs: object) -> None:
    raise RuntimeError(f"invalid input syntax for type double precision: \"{CANARY}\"")


@pytest.fixture
def steward(engine, data_dir: Path) -> str:  # noqa: ANN001
    titanic_with_budget(engine, data_dir, "4", "1e-5")
    return auth.create_key(engine, "steward", "sam")[1]


def test_an_internal_error_is_logged_by_type_and_frames_only(engine, steward: str, caplog,  # noqa: ANN001
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accountant, "ledger_rows", _fail)
    monkeypatch.delenv("MARGINALIA_DEBUG", raising=False)
    caplog.set_level(logging.DEBUG)
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    response = client.get("/datasets/titanic/ledger", headers=bearer(steward))
    assert response.status_code == 500 and CANARY not in response.text
    reference = response.json()["message"].split("reference ")[1].rstrip(")")
    logged = [r for r in caplog.records if reference in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is None
    line = logged[0].getMessage()
    assert "RuntimeError (its message is withheld" in line and "in _fail" in line  # the type and the frames
    assert CANARY not in caplog.text


def test_marginalia_debug_logs_the_whole_traceback(engine, steward: str, caplog,  # noqa: ANN001
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accountant, "ledger_rows", _fail)
    monkeypatch.setenv("MARGINALIA_DEBUG", "1")
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    response = client.get("/datasets/titanic/ledger", headers=bearer(steward))
    assert response.status_code == 500 and CANARY not in response.text  # the answer withholds it still
    assert CANARY in caplog.text  # the operator asked for everything


def test_a_failed_release_stores_no_foreign_message_in_its_row_its_refund_or_its_job(
        engine, steward: str, caplog, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """A bug below the engines (a foreign exception in the count oracle) fails a background release: its job's
    record is the generic 500, its release row and the refund's reason name the type only."""
    monkeypatch.setattr(TableCountOracle, "counts_many", _fail)
    monkeypatch.delenv("MARGINALIA_DEBUG", raising=False)
    caplog.set_level(logging.DEBUG)
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    started = client.post("/datasets/titanic/releases/marginals", headers={**bearer(steward),
                                                                            "Prefer": "respond-async"},
                          json={"mechanism": "laplace", "workload": "all-1way", "epsilon": 0.5})
    assert started.status_code == 202, started.text
    job = finished_job(client, steward, started.json()["job_id"])
    assert (job["state"], job["status_code"], job["result"]["error"]) == ("failed", 500, "internal_error")
    with transaction(engine) as session:
        stored = [str(row) for model in (Job, Release, LedgerEntry)
                  for row in session.execute(select(model.__table__)).all()]
        errors = session.execute(select(Release.error).where(Release.status == "failed_before_noise")).scalars().all()
    assert errors == ["RuntimeError (its message is withheld: it may quote the data)"]
    assert not any(CANARY in row for row in stored) and CANARY not in caplog.text
    assert accountant.budget_status(engine, "titanic").epsilon_pure_spent == 0  # refunded


def test_a_missed_heartbeat_is_logged_without_the_drivers_message(caplog) -> None:  # noqa: ANN001
    class Broken:
        def begin(self) -> None:
            _fail()

    class OneBeat:
        def __init__(self) -> None:
            self.waits = 0

        def wait(self, seconds: float) -> bool:  # noqa: ARG002
            self.waits += 1
            return self.waits > 1  # one beat, then stop

    heartbeat = runners.Heartbeat(Broken(), Job.__table__, 7)  # type: ignore[arg-type]
    heartbeat._stop = OneBeat()  # type: ignore[assignment]
    heartbeat._run()
    assert "heartbeat of jobs 7 failed: RuntimeError" in caplog.text and CANARY not in caplog.text


def test_a_traceback_shows_our_messages_and_withholds_the_others() -> None:
    try:
        try:
            _fail()
        except RuntimeError as exc:
            raise InvalidInput("dataset 'titanic': column 'Age' is refused") from exc
    except InvalidInput as exc:
        caught = exc
    shown = shown_traceback(caught)
    assert "The above exception was the direct cause" in shown and "in _fail" in shown
    assert "service.errors.InvalidInput: dataset 'titanic': column 'Age' is refused" in shown
    assert "RuntimeError (its message is withheld" in shown and CANARY not in shown
    assert shown_message(caught) == "dataset 'titanic': column 'Age' is refused"
