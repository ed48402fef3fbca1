"""Issue 18: a public table holding 1e308 made a campaign whose public scale was ``inf`` (stored as ``null``), and
every report then failed with a raw TypeError. Values too large for the statistics a campaign computes are refused
when the table is registered and, for a table stored before that check, when a campaign is created; a transform
that is not finite (stated bounds near the float64 limit) is refused too. Each error names the column."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from service.campaigns import campaigns, public_tables
from service.campaigns.public_tables import PublicColumn, store_public_table
from service.errors import InvalidInput
from tests.support.campaign_data import gaussian_rows, load_public

COLUMNS = [PublicColumn("a", "numeric"), PublicColumn("b", "numeric")]


def _rows(value: float) -> np.ndarray:
    rows = gaussian_rows(50)[:, :2]
    rows[3, 1] = value
    return rows


@pytest.mark.parametrize("value, fragment", [
    (1e308, "column 'b' holds 1e+308 (data row 4), too large for the statistics"),
    (-1e200, "column 'b' holds -1e+200 (data row 4), too large for the statistics"),
    (np.inf, "column 'b' holds inf (data row 4), not a finite number"),
    (np.nan, "column 'b' holds nan (data row 4), not a finite number"),
])
def test_registering_values_too_large_for_their_statistics_is_refused(engine, value: float,  # noqa: ANN001
                                                                      fragment: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(fragment)):
        store_public_table(engine, "big", COLUMNS, _rows(value), "test")
    assert public_tables.list_public_tables(engine) == []


def test_registering_large_but_usable_values_is_allowed(engine) -> None:  # noqa: ANN001
    store_public_table(engine, "wide", COLUMNS, _rows(1e150), "test")
    info = campaigns.create_campaign(engine, "c", "stein-glm", "a,b", "y", "wide", 1, 0, {})
    assert all(np.isfinite(info.transform.scale)) and all(np.isfinite(info.transform.center))


def test_a_campaign_on_a_table_stored_before_the_check_is_refused_naming_the_column(
        engine, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(public_tables, "check_magnitudes", lambda *args: None)  # the table of an older version
    store_public_table(engine, "legacy", COLUMNS, _rows(1e308), "test")
    monkeypatch.undo()
    for protocol, features, target, delta in (("stein-glm", "a,b", "y", 1e-6), ("ldp-avg", "b", None, 0.0)):
        with pytest.raises(InvalidInput, match="public table 'legacy': column 'b' holds 1e\\+308") as refused:
            campaigns.create_campaign(engine, "c", protocol, features, target, "legacy", 1, delta, {})
        assert refused.value.code == "invalid_value"
    assert campaigns.list_campaigns(engine) == []


def test_a_transform_that_is_not_finite_is_refused_naming_the_column(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_public(engine, tmp_path, gaussian_rows(50))
    with pytest.raises(InvalidInput, match="column 'b': its transform \\(center inf"):
        campaigns.create_campaign(engine, "c", "stein-glm", "a,b", "y", None, 1, 1e-6,
                                  {"norm_bound": 3, "feature_bounds": {"a": [0, 1], "b": [1e308, 1.7e308]}})
    with pytest.raises(InvalidInput, match="feature_bounds: 'a' needs finite lo < hi, got \\[True, 2\\]"):
        campaigns.create_campaign(engine, "c", "stein-glm", "a,b", "y", None, 1, 1e-6,
                                  {"norm_bound": 3, "feature_bounds": {"a": [True, 2], "b": [0, 1]}})
    assert campaigns.list_campaigns(engine) == []
