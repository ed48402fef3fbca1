"""The client tests' shared fixture: one in-process app and a client per role, each with its own spend file."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.client import Client, Device
from tests.support.campaign_keys import new_key


@pytest.fixture
def clients(engine, tmp_path) -> Iterator[dict[str, Client]]:  # noqa: ANN001
    app = create_app(engine)
    out = {}
    for role in ("steward", "analyst", "participant", "gateway"):
        _, token = new_key(engine, role, role)
        device = Device(spend_file=tmp_path / f"{role}-spend.json")  # never the user's own spend file
        out[role] = Client("http://testserver", token, http=TestClient(app), device=device)
    yield out
