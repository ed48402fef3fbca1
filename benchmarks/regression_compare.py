"""The regression page's old and new rows side by side (issue 9): for every run whose JSON exists in both folders,
the median metric per epsilon of DD-SSP before (``benchmarks/results/regression``: DD-SSP from AIM, 1 marginal
trial, 4 AIM rounds per attribute) and after (``benchmarks/results/regression-issue9``: the mechanism rule, 5 trials,
AIM's default 16 rounds per attribute), beside the service's AdaSSP (linear) or ObjPert (logistic) of both runs,
and whether DD-SSP now wins against the baseline of the new run. Where the new run holds them, a second table shows
the other methods of the protocol before and now (AIM-Synth; for linear runs also the paper's uncertified AdaSSP,
``adassp-paper``) and whether DD-SSP now beats AIM-Synth now. After the tables, one line per run: the issue's
target at epsilon 0.05 and 0.1 (linear: DD-SSP MSE <= AdaSSP; logistic: DD-SSP AUC >= ObjPert), met or missed.
Prints Markdown; reads only the JSON files ``python -m benchmarks.regression`` wrote::

    .venv/bin/python -m benchmarks.regression_compare            # every run present in both folders
    .venv/bin/python -m benchmarks.regression_compare --new DIR [DIR ...]   # other folders of new results

With several ``--new`` folders, the JSON files of the same run are merged (records and per-method, per-epsilon
summaries; a later folder wins where both hold the same method and epsilon): the issue-9 target runs (epsilon 0.05
and 0.1) and runs at larger epsilon then show as one table.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from benchmarks.harness import RESULTS

TARGET_EPSILONS = (0.05, 0.1)


def _entry(summary: dict, method: str, epsilon: float) -> dict | None:
    return summary.get(method, {}).get(repr(float(epsilon)))


def _show(entry: dict | None, spread: bool = False) -> str:
    if entry is None:
        return "-"
    text = f"{entry['median']:.4f}"
    if spread and entry["trials"] > 1:
        text += f" ({entry['min']:.4f}-{entry['max']:.4f}, {entry['trials']})"
    return text


def _mechanisms(result: dict, epsilon: float) -> str:
    used = Counter(r.get("mechanism", "aim") for r in result["records"]
                   if r["method"] == "dd-ssp" and r["epsilon"] == epsilon)
    return "/".join(sorted(used)) or "-"


def _wins(result: dict, epsilon: float, rival: str | None = None) -> bool | None:
    """Whether DD-SSP's median beats ``rival``'s (default: the run's baseline, AdaSSP or ObjPert) in ``result`` at
    ``epsilon`` (None if either is missing)."""
    linear = result["metric"] == "mse"
    now = _entry(result["summary"], "dd-ssp", epsilon)
    other = _entry(result["summary"], rival or ("adassp" if linear else "objpert"), epsilon)
    if now is None or other is None:
        return None
    return now["median"] <= other["median"] if linear else now["median"] >= other["median"]


def _epsilons(result: dict) -> list[float]:
    """The private epsilons of ``result``'s records, ascending."""
    return sorted({r["epsilon"] for r in result["records"] if r["epsilon"] is not None})


def _verdict(wins: bool | None) -> str:
    return "-" if wins is None else ("better" if wins else "**worse**")


def compare(old: dict, new: dict) -> list[str]:
    """The Markdown table of one run: old and new DD-SSP and baseline per epsilon of the new run."""
    rival = "adassp" if new["metric"] == "mse" else "objpert"
    lines = [f"| epsilon | DD-SSP before (AIM, 1 trial) | {rival} before | DD-SSP now (min-max, trials) | "
             f"DD-SSP's mechanism | {rival} now (min-max, trials) | DD-SSP now vs {rival} now |",
             "|---|---|---|---|---|---|---|"]
    for epsilon in _epsilons(new):
        verdict = _verdict(_wins(new, epsilon))
        lines.append(f"| {epsilon:g} | {_show(_entry(old['summary'], 'dd-ssp', epsilon))} | "
                     f"{_show(_entry(old['summary'], rival, epsilon))} | "
                     f"{_show(_entry(new['summary'], 'dd-ssp', epsilon), spread=True)} | "
                     f"{_mechanisms(new, epsilon)} | {_show(_entry(new['summary'], rival, epsilon), spread=True)} | "
                     f"{verdict} |")
    return lines


OTHER_METHODS = {"mse": ("aim-synth", "adassp-paper"), "auc": ("aim-synth",)}


def compare_others(old: dict, new: dict) -> list[str]:
    """The Markdown table of the other methods of one run, before and now (module docstring); empty if the new run
    holds none of them."""
    methods = [m for m in OTHER_METHODS[new["metric"]] if m in new["summary"]]
    if not methods:
        return []
    header = "| epsilon | " + " | ".join(f"{m} before | {m} now (min-max, trials)" for m in methods)
    lines = [header + " | DD-SSP now vs aim-synth now |", "|---|" + "---|---|" * len(methods) + "---|"]
    for epsilon in _epsilons(new):
        cells = [f"{_show(_entry(old['summary'], m, epsilon))} | {_show(_entry(new['summary'], m, epsilon), True)}"
                 for m in methods]
        verdict = _verdict(_wins(new, epsilon, "aim-synth"))
        lines.append(f"| {epsilon:g} | " + " | ".join(cells) + f" | {verdict} |")
    return lines


def target_line(name: str, new: dict) -> str:
    """Met / missed / not measured at the issue's epsilons for one run."""
    verdicts = {epsilon: _wins(new, epsilon) for epsilon in TARGET_EPSILONS}
    if any(v is None for v in verdicts.values()):
        state = "not measured at " + ", ".join(f"{e:g}" for e, v in verdicts.items() if v is None)
    else:
        state = "met" if all(verdicts.values()) else "missed at " + ", ".join(
            f"{e:g}" for e, v in verdicts.items() if not v)
    return f"* {name}: {state}"


def merged(paths: list[Path]) -> dict:
    """One result from the JSON files of the same run in several folders (module docstring)."""
    results = [json.loads(path.read_text()) for path in paths]
    merged_result = dict(results[0], records=[], summary={}, seconds_total=0.0)
    for result in results:
        merged_result["records"] += result["records"]
        merged_result["seconds_total"] += result["seconds_total"]
        for method, by_epsilon in result["summary"].items():
            merged_result["summary"].setdefault(method, {}).update(by_epsilon)
    return merged_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, default=RESULTS / "regression")
    parser.add_argument("--new", type=Path, nargs="+", default=[RESULTS / "regression-issue9"])
    args = parser.parse_args()
    runs: dict[str, list[Path]] = {}
    for folder in args.new:
        for path in sorted(folder.glob("*.json")):
            runs.setdefault(path.stem, []).append(path)
    targets = []
    for name, paths in sorted(runs.items()):
        previous = args.old / f"{name}.json"
        if not previous.exists():
            continue
        new, old = merged(paths), json.loads(previous.read_text())
        print(f"#### {name} ({new['metric']}; {new['seconds_total']:.0f} s wall time)\n")
        print("\n".join(compare(old, new)) + "\n")
        others = compare_others(old, new)
        if others:
            print("\n".join(others) + "\n")
        targets.append(target_line(name, new))
    if targets:
        print("Target at epsilon " + " and ".join(f"{e:g}" for e in TARGET_EPSILONS) + ":\n")
        print("\n".join(targets))


if __name__ == "__main__":
    main()
