"""The console's SVG charts: axes that hold every mark, one whisker per interval, hover text with the figures."""

from __future__ import annotations

import re

import pytest

from service.api.console import charts
from service.api.console.charts import Series, _ticks


@pytest.mark.parametrize(("low", "high"), [(0, 640), (-3.2, 17), (0.37, 1.15), (0, 0), (-5e-4, 2e-3), (12, 13)])
def test_the_ticks_hold_the_whole_range(low: float, high: float) -> None:
    ticks = _ticks(low, high)
    assert ticks[0] <= low + 1e-12 and ticks[-1] >= high - 1e-12 and 2 <= len(ticks) <= 12
    steps = {round(b - a, 12) for a, b in zip(ticks, ticks[1:], strict=False)}
    assert len(steps) == 1


def test_every_bar_and_whisker_is_inside_the_plot() -> None:
    values, errors = [94.0, 50.0, 297.0, 640.0, -20.0], [11.9, 11.9, 11.9, 11.9, 30.0]
    svg = str(charts.bars(list("abcde"), [Series("release", values, errors)], label="counts"))
    top, bottom = 16.0, 16.0 + 220
    ys = [float(y) for y in re.findall(r'<line class="whisker" x1="[^"]+" x2="[^"]+" y1="([^"]+)"', svg)]
    rects = [(float(y), float(h)) for y, h in re.findall(r'class="bar"[^>]* y="([^"]+)" width="[^"]+" height="([^"]+)"',
                                                          svg)]
    assert len(rects) == 5 and len(ys) == 3 * 5
    assert all(top - 0.05 <= y <= bottom + 0.05 for y in ys)
    assert all(top - 0.05 <= y and y + h <= bottom + 0.05 for y, h in rects)
    assert "release, d: 640 (95 % interval 616.7 to 663.3)" in svg


def test_interval_whiskers_stay_on_the_axis() -> None:
    svg = str(charts.intervals(["a", "b"], [0.76, -0.2], [0.2, 0.05], label="coefficients"))
    xs = [float(v) for pair in re.findall(r'class="whisker" x1="([^"]+)" x2="([^"]+)"', svg) for v in pair]
    assert xs and all(180.0 - 0.05 <= x <= 180.0 + 380.0 + 0.05 for x in xs)
