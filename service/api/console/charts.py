"""The console's charts, drawn on the server as SVG: no script, readable with a pointer and with a screen reader.

Every mark carries a ``<title>`` (the browser shows it on hover: the figure and its interval, or the entry it stands
for), every chart a ``role="img"`` and an ``aria-label`` that says what it shows, and every page that draws one also
shows its numbers in a table. Widths are in SVG units; the stylesheet scales them to the page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from service.api.console.formats import number

#: The normal quantile of a two-sided 95 % interval.
Z95 = 1.959963984540054
PALETTE = ("#3465a4", "#c17d11", "#4e9a06", "#75507b")


@dataclass(frozen=True)
class Series:
    """One series of bars: its name, a value per category, and each value's standard error (None: none known)."""

    name: str
    values: Sequence[float]
    standard_errors: Sequence[float] | None = None


def _svg(width: float, height: float, label: str, body: list[str], role: str = "img") -> Markup:
    """An SVG chart; ``role="group"`` for one whose marks are links (an image holds no interactive control)."""
    return Markup(f'<svg class="chart" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
                  f'height="{height:.0f}" role="{role}" aria-label="{escape(label)}" '
                  f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}</svg>')


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values from at most ``low`` to at least ``high`` (the axis's ends: every mark
    between ``low`` and ``high`` is drawn inside it)."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if raw <= m * step)
    first, last = math.floor(low / step + 1e-9) * step, math.ceil(high / step - 1e-9) * step
    return [first + i * step for i in range(round((last - first) / step) + 1)]


def bars(categories: Sequence[str], series: Sequence[Series], *, label: str, unit: str = "") -> Markup:
    """Grouped vertical bars, one group per category, each with its 95 % interval (value +- 1.96 standard errors) as
    a whisker when its series has standard errors."""
    if not categories or not series:
        return Markup("")
    group = max(18.0, 10.0 * len(series) + 8)
    left, top, bottom = 110.0, 16.0, 92.0
    width = left + group * len(categories) + 16
    height = top + 220 + bottom
    highs = [v + Z95 * (s.standard_errors[i] if s.standard_errors else 0.0)
             for s in series for i, v in enumerate(s.values)]
    lows = [v - Z95 * (s.standard_errors[i] if s.standard_errors else 0.0)
            for s in series for i, v in enumerate(s.values)]
    ticks = _ticks(min(0.0, min(lows)), max(highs + [0.0]))
    low, high = ticks[0], ticks[-1] if ticks[-1] > ticks[0] else ticks[0] + 1

    def y(value: float) -> float:
        return top + 220 * (high - value) / (high - low)

    body = [f'<line class="axis" x1="{left}" x2="{width - 8}" y1="{y(0):.1f}" y2="{y(0):.1f}"/>']
    for tick in ticks:
        body.append(f'<line class="grid" x1="{left}" x2="{width - 8}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
                    f'<text class="tick" x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">'
                    f'{escape(number(tick, 3))}</text>')
    bar = (group - 8) / len(series)
    for c, category in enumerate(categories):
        x0 = left + c * group + 4
        for s, one in enumerate(series):
            value = one.values[c]
            se = one.standard_errors[c] if one.standard_errors else None
            x = x0 + s * bar
            top_y, base = min(y(value), y(0)), max(y(value), y(0))
            interval = ("" if se is None
                        else f" (95 % interval {number(value - Z95 * se)} to {number(value + Z95 * se)})")
            tip = f"{one.name}, {category}: {number(value)}{unit}{interval}"
            body.append(f'<g><title>{escape(tip)}</title><rect class="bar" fill="{PALETTE[s % len(PALETTE)]}" '
                        f'x="{x:.1f}" y="{top_y:.1f}" width="{max(bar - 1, 1):.1f}" height="{base - top_y:.1f}"/>')
            if se is not None and se > 0:
                mid = x + (bar - 1) / 2
                a, b = y(value + Z95 * se), y(value - Z95 * se)
                body.append(f'<line class="whisker" x1="{mid:.1f}" x2="{mid:.1f}" y1="{a:.1f}" y2="{b:.1f}"/>'
                            f'<line class="whisker" x1="{mid - 3:.1f}" x2="{mid + 3:.1f}" y1="{a:.1f}" y2="{a:.1f}"/>'
                            f'<line class="whisker" x1="{mid - 3:.1f}" x2="{mid + 3:.1f}" y1="{b:.1f}" y2="{b:.1f}"/>')
            body.append("</g>")
        cx = x0 + (group - 8) / 2
        body.append(f'<text class="category" transform="translate({cx:.1f},{top + 226}) rotate(-50)" '
                    f'text-anchor="end">{escape(category[:24])}</text>')
    if len(series) > 1:
        for s, one in enumerate(series):
            body.append(f'<rect x="{left + 150 * s}" y="2" width="10" height="10" fill="{PALETTE[s % len(PALETTE)]}"/>'
                        f'<text class="legend" x="{left + 150 * s + 14}" y="11">{escape(one.name)}</text>')
    return _svg(width, height, label, body)


def gauge(spent: float, total: float, *, label: str, unit: str = "epsilon") -> Markup:
    """A horizontal gauge: the part of ``total`` spent, and what remains."""
    width, height = 360.0, 34.0
    share = 0.0 if total <= 0 else min(max(spent / total, 0.0), 1.0)
    remaining = max(total - spent, 0.0)
    tip = f"{unit}: {number(spent)} spent of {number(total)}, {number(remaining)} remaining ({100 * (1 - share):.0f} %)"
    body = [f"<title>{escape(tip)}</title>",
            f'<rect class="gauge-track" x="0" y="4" width="{width}" height="18" rx="3"/>',
            f'<rect class="gauge-spent" x="0" y="4" width="{width * share:.1f}" height="18" rx="3"/>',
            f'<text class="gauge-text" x="6" y="17">{escape(f"{100 * (1 - share):.0f} % remaining")}</text>']
    return _svg(width, height, label or tip, body)


@dataclass(frozen=True)
class Step:
    """One ledger entry on the timeline: when, the composed epsilon after it, what it was and where to open it."""

    when: str
    after: float
    what: str
    href: str | None = None


def timeline(steps: Sequence[Step], total: float, *, label: str) -> Markup:
    """The budget's composed epsilon spent after each ledger entry, as a step line against the total; each entry of a
    release (a charge, a refund) is a point you can hover and open."""
    if not steps:
        return Markup("")
    left, top, plot_w, plot_h = 64.0, 14.0, min(max(320.0, 36.0 * len(steps)), 1100.0), 180.0
    every = max(1, math.ceil(len(steps) / 30))  # at most about 30 entry numbers under the axis
    width, height = left + plot_w + 20, top + plot_h + 40
    ticks = _ticks(0.0, max([total] + [s.after for s in steps]))
    high = ticks[-1] if ticks[-1] > 0 else 1.0

    def y(value: float) -> float:
        return top + plot_h * (high - value) / high

    def x(index: int) -> float:
        return left + plot_w * (index + 0.5) / len(steps)

    body = []
    for tick in ticks:
        body.append(f'<line class="grid" x1="{left}" x2="{left + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
                    f'<text class="tick" x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">'
                    f'{escape(number(tick, 3))}</text>')
    body.append(f'<line class="limit" x1="{left}" x2="{left + plot_w}" y1="{y(total):.1f}" y2="{y(total):.1f}">'
                f'<title>{escape(f"the total: epsilon {number(total)}")}</title></line>')
    path, previous = [f"M{left:.1f},{y(0):.1f}"], 0.0
    for i, step in enumerate(steps):
        path.append(f"L{x(i):.1f},{y(previous):.1f}L{x(i):.1f},{y(step.after):.1f}")
        previous = step.after
    path.append(f"L{left + plot_w:.1f},{y(previous):.1f}")
    body.append(f'<path class="step" d="{"".join(path)}"/>')
    radius = 5 if len(steps) <= 60 else 3
    for i, step in enumerate(steps):
        if i % every == 0 or i == len(steps) - 1:
            body.append(f'<text class="tick" x="{x(i):.1f}" y="{top + plot_h + 16}" '
                        f'text-anchor="middle">{i + 1}</text>')
        if step.href is None:  # a budget change: part of the line, no point of its own
            continue
        tip = f"{step.when}: {step.what}; epsilon spent after it {number(step.after)}"
        body.append(f'<a href="{escape(step.href)}" aria-label="{escape(tip)}"><circle class="point" '
                    f'cx="{x(i):.1f}" cy="{y(step.after):.1f}" r="{radius}"><title>{escape(tip)}</title></circle></a>')
    body.append(f'<text class="tick" x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">'
                "ledger entry</text>")
    return _svg(width, height, label, body, role="group" if any(step.href for step in steps) else "img")


def intervals(names: Sequence[str], estimates: Sequence[float], standard_errors: Sequence[float | None], *,
              label: str) -> Markup:
    """Estimates with their 95 % intervals as horizontal whiskers (coefficients of a fit), one row each."""
    if not names:
        return Markup("")
    left, row, plot_w = 180.0, 24.0, 380.0
    width, height = left + plot_w + 20, 20 + row * len(names) + 24
    spans = [(e - Z95 * s, e + Z95 * s) if s is not None else (e, e)
             for e, s in zip(estimates, standard_errors, strict=True)]
    ticks = _ticks(min(0.0, *(a for a, _ in spans)), max(0.0, *(b for _, b in spans)))
    low, high = ticks[0], ticks[-1] if ticks[-1] > ticks[0] else ticks[0] + 1

    def x(value: float) -> float:
        return left + plot_w * (value - low) / (high - low)

    body = [f'<line class="axis" x1="{x(0):.1f}" x2="{x(0):.1f}" y1="10" y2="{height - 24}"/>']
    for tick in ticks:
        body.append(f'<text class="tick" x="{x(tick):.1f}" y="{height - 6}" text-anchor="middle">'
                    f'{escape(number(tick, 3))}</text>')
    for i, (name, estimate, se) in enumerate(zip(names, estimates, standard_errors, strict=True)):
        cy = 20 + row * i + row / 2
        a, b = spans[i]
        interval = "" if se is None else f", 95 % interval {number(a)} to {number(b)}"
        body.append(f'<g><title>{escape(f"{name}: {number(estimate)}{interval}")}</title>'
                    f'<text class="category" x="{left - 8}" y="{cy + 4:.1f}" text-anchor="end">{escape(name[:28])}'
                    f'</text><line class="whisker" x1="{x(a):.1f}" x2="{x(b):.1f}" y1="{cy:.1f}" y2="{cy:.1f}"/>'
                    f'<circle class="point" cx="{x(estimate):.1f}" cy="{cy:.1f}" r="4"/></g>')
    return _svg(width, height, label, body)
