"""A Spark table attached through the client (issue 21: every engine through the API and the client): the operator
registers the service's Spark session as a source (local mode here); a steward attaches a table of its catalog by
name, and a release counts it inside Spark. Slow: it starts (or shares) the process's local Spark session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.client.errors import MarginaliaError
from service.data import datasets
from service.data.attach.sources import add_source
from service.data.engines.spark import spark_session
from service.data.oracle import TableCountOracle
from tests.support.binned import SPEC, expected_counts, raw_frame

pytestmark = pytest.mark.slow


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite only: the ledger's backend does not matter to Spark."""
    return f"sqlite:///{tmp_path / 'test.db'}"


def test_attach_a_spark_table_through_the_client(engine, clients) -> None:  # noqa: ANN001
    frame = raw_frame(200, 6)
    spark_session().createDataFrame(frame).createOrReplaceTempView("people_over_http")
    add_source(engine, "cluster", spark=True)
    steward = clients["steward"]
    attached = steward.attach_dataset("people", source="cluster", table="people_over_http", bins=SPEC)
    assert (attached["rows"], attached["engine"]) == (200, "spark")
    with TableCountOracle(engine, datasets.get_dataset(engine, "people")) as oracle:
        np.testing.assert_array_equal(oracle.counts(("age", "income")), expected_counts(frame, ("age", "income")))
    steward.set_budget("people", 1.0)
    release = steward.release_marginals("people", "laplace", [["work"]], epsilon=1.0)
    assert list(steward.marginal(release["release_id"], ["work"])["work"]) == ["Private", "State-gov", "?"]
    with pytest.raises(MarginaliaError) as caught:
        steward.attach_dataset("absent", source="cluster", table="no_such_view", bins=SPEC)
    assert caught.value.status == 422 and "no_such_view" in caught.value.message
    assert [d.name for d in datasets.list_datasets(engine)] == ["people"]
