"""Does stopping mirror descent on a tolerance move the answers? (issue 9, item 4)

For each case, one seeded set of noisy measurements is fitted twice by ``estimators.graphical.mirror_descent.fit``:
``--iters`` iterations (1,000) without a tolerance (the old behaviour) and with each tolerance of ``--tols`` (that
cap). Reported per tolerance: iterations run, seconds, and the largest absolute difference of any cell of any
measured (workload) marginal between the two fits, in counts and in units of the measurement's noise standard
deviation (an answer that moves by 1 % of its own noise is not a change an analyst can see).

Cases (numpy noise, seeds fixed; the service draws its own noise, these only exercise the estimator):

* ``titanic-laplace``: every 2-way marginal of titanic, Laplace noise at epsilon 1 split equally (variance ``2 b^2``),
  the pairs kept in the model while it fits 80 MB, as a direct Laplace release does -- the case that took over a
  minute per release;
* ``adult-tree``: the 1-way marginals and a chain of 14 pairs of adult_train, Gaussian noise at rho 0.05 split
  equally -- an MST-like model.

    .venv/bin/python -m benchmarks.fit_tolerance            # writes benchmarks/results/fit_tolerance.json and .png
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import harness
from benchmarks.harness import DATA, machine
from estimators.graphical import junction_tree, mirror_descent
from estimators.graphical.mirror_descent import Measurement
from workloads.domain import Domain

MAX_MODEL_MB = 80.0


def counts(frame: pd.DataFrame, domain: Domain, clique: tuple[str, ...]) -> np.ndarray:
    index = np.ravel_multi_index([frame[a].to_numpy() for a in clique], domain.shape(clique))
    return np.bincount(index, minlength=domain.cells(clique)).reshape(domain.shape(clique)).astype(float)


def load(csv: str, domain_file: str) -> tuple[pd.DataFrame, Domain]:
    return pd.read_csv(DATA / csv), Domain.from_sizes(json.loads((DATA / domain_file).read_text()))


def titanic_laplace(rng: np.random.Generator) -> tuple[Domain, list[Measurement]]:
    frame, domain = load("titanic/titanic.csv", "titanic/titanic-domain.json")
    pairs = list(itertools.combinations(domain.names, 2))
    scale = len(pairs) / 1.0  # epsilon 1 split equally; each marginal has L1 sensitivity 1
    measured = [Measurement(p, counts(frame, domain, p) + rng.laplace(0.0, scale, domain.shape(p)),
                            math.sqrt(2.0) * scale) for p in pairs]
    return domain, tractable(domain, measured)


def tractable(domain: Domain, measurements: list[Measurement]) -> list[Measurement]:
    """The measurements kept in the model, as a direct release keeps them: in order, while the junction tree stays
    within 80 MB (the service's default ``max_model_size``; all 36 pairs of titanic would need about 2 GB)."""
    kept: list[Measurement] = []
    for m in measurements:
        if junction_tree.model_size_mb(domain, [*(k.attributes for k in kept), m.attributes]) <= MAX_MODEL_MB:
            kept.append(m)
    return kept


def adult_tree(rng: np.random.Generator) -> tuple[Domain, list[Measurement]]:
    frame, domain = load("adult/adult_train.csv", "adult/adult-domain.json")
    cliques = [(a,) for a in domain.names] + list(itertools.pairwise(domain.names))
    sigma = math.sqrt(len(cliques) / (2 * 0.05))
    return domain, [Measurement(c, counts(frame, domain, c) + rng.normal(0.0, sigma, domain.shape(c)), sigma)
                    for c in cliques]


CASES = {"titanic-laplace": titanic_laplace, "adult-tree": adult_tree}


def timed_fit(domain: Domain, measurements: list[Measurement], tol: float | None,
              iters: int = 1000) -> tuple[object, float]:
    start = time.perf_counter()
    fitted = mirror_descent.fit(domain, measurements, iters=iters, tol=tol)
    return fitted, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=sorted(CASES), choices=sorted(CASES))
    parser.add_argument("--tols", nargs="+", type=float, default=[1e-3, 1e-4, 1e-5])
    parser.add_argument("--iters", type=int, default=1000, help="iterations of the reference fit (the others' cap)")
    harness.add_outputs(parser, "fit_tolerance")
    args = parser.parse_args()
    rows = []
    for case in args.cases:
        domain, measurements = CASES[case](np.random.default_rng(0))
        reference, reference_seconds = timed_fit(domain, measurements, None, args.iters)
        print(f"{case}: {args.iters} iterations in {reference_seconds:.1f} s", flush=True)
        for tol in args.tols:
            fitted, seconds = timed_fit(domain, measurements, tol, args.iters)
            moved = [np.abs(fitted.marginal(m.attributes) - reference.marginal(m.attributes)).max()
                     for m in measurements]
            in_noise = [d / m.stddev for d, m in zip(moved, measurements, strict=True)]
            row = {"case": case, "tol": tol, "iterations": fitted.iterations, "seconds": seconds,
                   "reference_iterations": reference.iterations, "reference_seconds": reference_seconds,
                   "max_abs_difference": float(max(moved)), "max_difference_in_noise_sd": float(max(in_noise)),
                   "loss": fitted.loss, "reference_loss": reference.loss}
            rows.append(row)
            print(json.dumps(row), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"command": " ".join(["python", *sys.argv]), "machine": machine(),
                                    "results": rows}, indent=1))
    plot(rows, harness.outputs(args)[1])


def plot(rows: list[dict], path: Path) -> None:
    plt = harness.pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for case in sorted({r["case"] for r in rows}):
        group = [r for r in rows if r["case"] == case]
        axes[0].plot([r["tol"] for r in group], [r["seconds"] / r["reference_seconds"] for r in group], "o-",
                     label=case)
        axes[1].plot([r["tol"] for r in group], [r["max_difference_in_noise_sd"] for r in group], "o-", label=case)
    axes[0].set_ylabel("time / time of the reference fit (--iters, no tolerance)")
    axes[1].set_ylabel("max |answer change| / noise sd")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("tolerance")
        ax.legend(fontsize=8)
    axes[1].set_yscale("log")
    harness.save_figure(fig, path)


if __name__ == "__main__":
    main()
