"""Fixtures shared by the service's tests across their folders."""

from __future__ import annotations

import pytest

from estimators.graphical import bootstrap
from service.releases import answers


@pytest.fixture
def fresh_answer_caches():  # noqa: ANN201
    """No cached payload, model or bootstrap before and after the test (they are kept per process)."""
    answers.clear_caches()
    yield
    answers.clear_caches()


@pytest.fixture
def small_bootstrap(monkeypatch):  # noqa: ANN001, ANN201
    """A parametric bootstrap of 4 short refits (issue 29): the tests of its plumbing need no precise spread, and the
    suite's time matters."""
    monkeypatch.setattr(bootstrap, "DEFAULT_REPLICATES", 4)
    monkeypatch.setattr(bootstrap, "DEFAULT_REPLICATE_ITERS", 30)
