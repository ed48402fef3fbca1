"""Every test of the release engine starts and ends without a recorded stop request (Ctrl-C's in-process hook,
service/interrupts.py): a request left by one test would stop the next test's release."""

from __future__ import annotations

import pytest

from service import interrupts


@pytest.fixture(autouse=True)
def no_pending_request():  # noqa: ANN201
    interrupts.clear()
    yield
    interrupts.clear()
