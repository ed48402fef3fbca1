"""Fixtures of the API tests: a world (a database with titanic, keys and a release) per test module and backend,
and an in-process client of the app over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from tests.support.apihelpers import BACKENDS, World, build_world, database_url


@pytest.fixture(scope="module", params=BACKENDS)
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("world")
    built = build_world(database_url(request.param, request, folder), data_dir, folder=folder / "lake")
    yield built
    built.engine.dispose()


@pytest.fixture
def client(world: World) -> TestClient:
    return TestClient(create_app(world.engine), raise_server_exceptions=False)
