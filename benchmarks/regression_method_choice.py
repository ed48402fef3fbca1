"""``python -m benchmarks.regression_method_choice``: does linear ``method=auto`` pick the better of AdaSSP and DD-SSP
(issue 30, point 4; :func:`service.regression.choice.method_for`)?

Each design below gets :mod:`benchmarks.regression`'s protocol through the real release path (``ols``, ``adassp``,
``dd-ssp`` with the service's marginal mechanism, no intercept, epsilon 0.1 and 1, 3 trials by default), and the
table says what ``auto`` picks (from the design and epsilon only) and the ratio of its method's median test MSE to
the better median. The designs are the shared tables the DD-SSP paper does not use, held out from the rule's first
version (the paper's four linear tables are in docs/regression-results.md): titanic (Fare), salary (annual-salary
without first-name), NLTCS (eating on ten other items), ACSemployment (AGEP on eight columns) and adult_pgm
(hours-per-week on seven). Tables without a test split get a deterministic one (``DataFrame.sample(random_state=0)``
of a quarter of the rows, at most 10,000; 5,000 for NLTCS)::

    python -m benchmarks.regression_method_choice --json benchmarks/results/regression_method_choice.json \
        --plot benchmarks/results/regression_method_choice.png
    python -m benchmarks.regression_method_choice --replot benchmarks/results/regression_method_choice.json \
        --plot benchmarks/results/regression_method_choice.png
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from benchmarks import harness
from benchmarks.harness import BenchError, Force, JsonOut, PlotOut
from benchmarks.regression import RegressionBench, run_regression_bench
from service.mechanisms import registry
from service.regression.choice import AUTO_METHOD, method_for
from service.regression.design import build_design
from workloads.domain import Domain

METHODS = ("ols", "adassp", "dd-ssp")


@dataclass(frozen=True)
class HeldOut:
    """One design: its table (``csv`` split here, or ``train``/``test`` given), domain, unordered columns, target and
    features."""

    name: str
    domain: str
    categorical: tuple[str, ...]
    target: str
    features: tuple[str, ...] | None
    csv: str | None = None
    train: str | None = None
    test: str | None = None
    test_rows: int = 10_000


DESIGNS = (
    HeldOut("titanic", "titanic/titanic-domain.json", ("Sex", "Embarked"), "Fare", None, csv="titanic/titanic.csv"),
    HeldOut("salary", "salary/salary-domain.json", ("organization-name", "pay-rate", "system"), "annual-salary",
            ("pay-rate", "system", "regular-earnings", "overtime-earning", "other-earnings", "ytd-gross",
             "organization-name"), csv="salary/salary.csv"),
    HeldOut("nltcs", "nltcs/nltcs-domain.json", (), "eating",
            ("getting in/out of bed", "getting around inside", "dressing", "bathing", "using toilet",
             "heavy house work", "light house work", "laundry", "cooking", "grocery shopping"),
            csv="nltcs/nltcs.csv", test_rows=5_000),
    HeldOut("acsemployment-agep", "acs/ACSemployment-domain.json",
            ("MAR", "RELP", "DIS", "ESP", "CIT", "MIG", "MIL", "ANC", "NATIVITY", "DEAR", "DEYE", "DREM", "SEX",
             "RAC1P", "ESR"), "AGEP", ("SCHL", "MAR", "DIS", "ESP", "CIT", "SEX", "RAC1P", "ESR"),
            train="acs/ACSemployment_train.csv", test="acs/ACSemployment_test.csv"),
    HeldOut("adult-pgm-hours", "adult_pgm/adult-domain.json",
            ("workclass", "marital-status", "occupation", "relationship", "race", "sex", "native-country",
             "income>50K"), "hours-per-week",
            ("workclass", "education-num", "marital-status", "relationship", "race", "sex", "income>50K"),
            csv="adult_pgm/adult.csv"),
)


def _split(design: HeldOut, data: Path, folder: Path) -> tuple[Path, Path]:
    if design.csv is None:
        return data / str(design.train), data / str(design.test)
    frame = pd.read_csv(data / design.csv)
    test = frame.sample(n=min(design.test_rows, len(frame) // 4), random_state=0)
    train, out = folder / f"{design.name}_train.csv", folder / f"{design.name}_test.csv"
    frame.drop(test.index).to_csv(train, index=False)
    test.to_csv(out, index=False)
    return train, out


def auto_pick(design: HeldOut, data: Path, epsilon: float, delta: float) -> dict[str, object]:
    """What ``method=auto`` picks for ``design`` at ``epsilon`` (public inputs only)."""
    domain = Domain.from_json((data / design.domain).read_text(), design.categorical)
    encoding = build_design(domain, "linear", design.target, design.features, None, False)
    eps = Fraction(str(epsilon))
    rho = registry.zcdp_cost(AUTO_METHOD, eps, Fraction(str(delta)), None).rho
    return method_for(encoding, eps, rho).to_json()


def run(data: Path, epsilons: tuple[float, ...], trials: int, delta: float, only: tuple[str, ...] | None,
        log=lambda message: None) -> dict[str, object]:  # noqa: ANN001
    """Every design's run and auto's picks (module docstring)."""
    rows = []
    with harness.temporary_folder("marginalia-method-choice-") as folder:
        for design in DESIGNS:
            if only and design.name not in only:
                continue
            log(f"== {design.name}")
            train, test = _split(design, data, folder)
            config = RegressionBench(train=train, test=test, domain=data / design.domain, target=design.target,
                                     task="linear", features=design.features, categorical=design.categorical,
                                     methods=METHODS, epsilons=epsilons, delta=delta, trials=trials,
                                     intercept=False)
            result = run_regression_bench(config, log=log)
            picks = {repr(float(e)): auto_pick(design, data, e, delta) for e in epsilons}
            rows.append({"design": design.name, "result": result, "auto": picks})
    return {"epsilons": list(epsilons), "trials": trials, "delta": delta, "designs": rows}


def markdown(result: dict[str, object]) -> str:
    """The docs' table: per design and epsilon, the medians (min-max), auto's pick and its ratio to the better."""
    lines = ["| design | epsilon | AdaSSP MSE (min-max) | DD-SSP MSE (min-max) | auto picks (X^T y noise ratio) | "
             "auto / best |", "|---|---|---|---|---|---|"]
    for row in result["designs"]:  # type: ignore[union-attr]
        summary = row["result"]["summary"]
        for epsilon, pick in row["auto"].items():
            a, d = summary["adassp"][epsilon], summary["dd-ssp"][epsilon]
            best = min(a["median"], d["median"])
            ratio = pick["figures"].get("noise_ratio")
            shown = f"{pick['method']} ({ratio:.2f})" if ratio is not None else f"{pick['method']} ({pick['rule']})"
            lines.append(f"| {row['design']} | {float(epsilon):g} | {a['median']:.4f} ({a['min']:.4f}-{a['max']:.4f}) "
                         f"| {d['median']:.4f} ({d['min']:.4f}-{d['max']:.4f}) | {shown} | "
                         f"{summary[pick['method']][epsilon]['median'] / best:.3f} |")
    return "\n".join(lines)


def plot(result: dict[str, object], path: Path) -> None:
    """Each (design, epsilon): AdaSSP's and DD-SSP's median MSE over the better one (1 = the best), auto's pick
    hatched."""
    plt = harness.pyplot()
    cells = [(row, epsilon, pick) for row in result["designs"] for epsilon, pick in row["auto"].items()]  # type: ignore[union-attr]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(cells)), 3.6))
    for i, (row, epsilon, pick) in enumerate(cells):
        summary = row["result"]["summary"]
        medians = {m: summary[m][epsilon]["median"] for m in ("adassp", "dd-ssp")}
        best = min(medians.values())
        for j, (method, color) in enumerate((("adassp", "C0"), ("dd-ssp", "C1"))):
            ax.bar(i + (j - 0.5) * 0.38, medians[method] / best, 0.36, color=color,
                   hatch="//" if pick["method"] == method else None, edgecolor="black")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(cells)), [f"{row['design']}, eps {float(e):g}" for row, e, _ in cells], fontsize=7,
                  rotation=30, ha="right")
    ax.set_ylabel("median test MSE / the better")
    ax.set_title("linear method auto (hatched: its pick) against AdaSSP and DD-SSP")
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(facecolor="C0", edgecolor="black", label="adassp"),
                       Patch(facecolor="C1", edgecolor="black", label="dd-ssp"),
                       Patch(facecolor="white", edgecolor="black", hatch="//", label="auto's pick")])
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(
    json_out: JsonOut = None,
    plot_out: PlotOut = None,
    force: Force = False,
    data: Annotated[Path, typer.Option(help="The shared data folder.")] = harness.DATA,
    epsilons: Annotated[str, typer.Option(help="Comma-separated epsilons.")] = "0.1,1",
    trials: Annotated[int, typer.Option(help="Trials per epsilon.")] = 3,
    only: Annotated[str | None, typer.Option(help="Comma-separated design names (default: all).")] = None,
    replot: Annotated[Path | None, typer.Option(help="Print the table (and draw --plot) of a stored result instead "
                                                "of running.")]
    = None,
) -> None:
    """Run the held-out designs and print the table of auto's picks (module docstring)."""
    if replot is not None:
        stored = json.loads(replot.read_text())
        if plot_out is not None:
            plot(stored, plot_out)
        typer.echo(markdown(stored))
        return
    if json_out is None:
        raise BenchError("give --json FILE for the results")
    names = tuple(n.strip() for n in only.split(",")) if only else None
    eps = harness.number_list(epsilons, "--epsilons", float) or ()
    result = harness.run_and_write(lambda log: run(data, eps, trials, 1e-5, names, log), plot, json_out, plot_out,
                                   force, False)
    typer.echo(markdown(result))


app = harness.command(main)

if __name__ == "__main__":
    app()
