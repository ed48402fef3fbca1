"""The regression page's old and new rows side by side (issue 9): for every run whose JSON exists in both folders,
the median metric per epsilon of DD-SSP before (``benchmarks/results/regression``: DD-SSP from AIM, 1 marginal
trial, 4 AIM rounds per attribute) and after (``benchmarks/results/regression-issue9``: the mechanism rule, 5 trials,
AIM's default 16 rounds per attribute), beside the service's AdaSSP (linear) or ObjPert (logistic) of the new run,
and whether DD-SSP wins. Prints Markdown; reads only the JSON files ``marginalia bench regression`` wrote::

    .venv/bin/python benchmarks/regression_compare.py            # every run present in both folders
    .venv/bin/python benchmarks/regression_compare.py --new DIR  # another folder of new results
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from _measure import REPO

RESULTS = REPO / "benchmarks" / "results"


def _median(summary: dict, method: str, epsilon: str) -> float | None:
    entry = summary.get(method, {}).get(epsilon)
    return None if entry is None else entry["median"]


def _mechanisms(result: dict, epsilon: float) -> str:
    used = Counter(r.get("mechanism", "aim") for r in result["records"]
                   if r["method"] == "dd-ssp" and r["epsilon"] == epsilon)
    return "/".join(sorted(used)) or "-"


def compare(old: dict, new: dict) -> list[str]:
    linear = new["metric"] == "mse"
    rival = "adassp" if linear else "objpert"
    lines = [f"| epsilon | DD-SSP before (AIM) | DD-SSP now (mechanism) | {rival} now | DD-SSP now vs {rival} |",
             "|---|---|---|---|---|"]
    for epsilon in sorted({r["epsilon"] for r in new["records"] if r["epsilon"] is not None}):
        key = repr(float(epsilon))
        before = _median(old["summary"], "dd-ssp", key)
        now = _median(new["summary"], "dd-ssp", key)
        other = _median(new["summary"], rival, key)
        if now is None or other is None:
            verdict = "-"
        else:
            verdict = "better" if (now <= other if linear else now >= other) else "**worse**"
        show = (lambda v: "-" if v is None else f"{v:.4f}")  # noqa: E731
        lines.append(f"| {epsilon:g} | {show(before)} | {show(now)} ({_mechanisms(new, epsilon)}) | {show(other)} | "
                     f"{verdict} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, default=RESULTS / "regression")
    parser.add_argument("--new", type=Path, default=RESULTS / "regression-issue9")
    args = parser.parse_args()
    for path in sorted(args.new.glob("*.json")):
        previous = args.old / path.name
        if not previous.exists():
            continue
        new, old = json.loads(path.read_text()), json.loads(previous.read_text())
        print(f"#### {path.stem} ({new['metric']}; {new['seconds_total']:.0f} s wall time)\n")
        print("\n".join(compare(old, new)) + "\n")


if __name__ == "__main__":
    main()
