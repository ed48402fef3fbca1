"""``marginalia bench stein-glm`` (the synthetic experiments of Sec. 6 of Wang, Hu, Zhang, Gaboardi & Xu, ALT 2021)
and ``marginalia bench stein-glm-real`` (binary logistic on a real table with a public unlabeled half), both through
the real collection path on temporary SQLite databases (:mod:`service.tools.bench.stein_glm`,
:mod:`service.tools.bench.stein_glm_real`).

Two commands rather than a ``--table`` form of one: they share no option but ``--epsilon``, ``--trials`` and ``--seed``,
measure different things (coefficient error against a known ``w*`` vs test accuracy against references) and write
different JSON; one command would have half its options meaningless in each mode.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from service.cli.bench import bench_app
from service.cli.common import QuietFlag, check_output, column_list, handles_errors, stderr, stdout, write_output

JsonOut = Annotated[Path, typer.Option("--json", help="Write the JSON records and summary to this file.")]
PlotOut = Annotated[Path | None, typer.Option("--plot", help="Write a PNG plot here.")]
Force = Annotated[bool, typer.Option("--force", help="Overwrite --json and --plot if they exist.", metavar="")]


def _numbers(text: str | None, option: str, kind: Callable[[str], Any]) -> tuple[Any, ...] | None:
    """A comma list of ``kind`` (int or float), or an error naming the option."""
    from service.tools.bench.stein_glm import SteinBenchError

    if text is None:
        return None
    try:
        return tuple(kind(v) for v in column_list(text) or [])
    except ValueError:
        noun = "integers" if kind is int else "numbers"
        raise SteinBenchError(f"{option} must be comma-separated {noun}, got {text!r}") from None


def _run(config: Any, run: Callable[..., dict[str, Any]], draw: Callable[[dict[str, Any], Path], None], out: Path,
         plot: Path | None, force: bool, quiet: bool) -> dict[str, Any]:
    """Validate, refuse unwritable outputs before any work, run, write the JSON and the plot."""
    config.validate()
    check_output(out, force, "--json")
    if plot is not None:
        check_output(plot, force, "--plot")
    result = run(config, log=(lambda m: None) if quiet else (lambda m: stderr.print(m)))
    write_output(out, "--json", lambda path: path.write_text(json.dumps(result, indent=1, default=str) + "\n"))
    if plot is not None:
        write_output(plot, "--plot", lambda path: draw(result, path))
    return result


@bench_app.command("stein-glm")
@handles_errors
def bench_stein_glm(
    out: JsonOut,
    design: Annotated[str, typer.Option(help="gaussian, rotated or bernoulli (Sec. 6).")] = "gaussian",
    model: Annotated[str, typer.Option(help="The link labels are drawn from and fitted with (logistic, probit, "
                                            "boosting).")] = "logistic",
    p: Annotated[str, typer.Option("--p", help="Comma-separated dimensions.")] = "10",
    n: Annotated[str, typer.Option("--n", help="Comma-separated participant counts.")] = "10000,30000,100000,290000",
    public_n: Annotated[str | None, typer.Option(
        "--public-n", help="Comma-separated public table sizes (default: as many as n).")] = None,
    epsilon: Annotated[str, typer.Option(help="Comma-separated local epsilons (delta = n^-1.1).")] = "2,3,5,10",
    trials: Annotated[int, typer.Option(help="Trials per (setting, n).")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the whole run (simulated participants, not a campaign's).")] = 0,
    plot: PlotOut = None,
    force: Force = False,
    quiet: QuietFlag = False,
) -> None:
    """Squared relative error of the Stein-lemma GLM against n, through campaigns, the simulator and campaign fit."""
    from service.tools.bench import stein_glm as stein_bench

    config = stein_bench.SteinBench(
        design=design, model=model, sizes=_numbers(n, "--n", int), epsilons=_numbers(epsilon, "--epsilon", float),
        dimensions=_numbers(p, "--p", int),
        public_sizes=_numbers(public_n, "--public-n", int) if public_n is not None else (None,),
        trials=trials, seed=seed)
    result = _run(config, stein_bench.run_stein_bench, stein_bench.plot_stein_bench, out, plot, force, quiet)
    table = Table("p", "public n", "epsilon", "n", "answered", "no root", "median error", title="stein-glm bench")
    for entry in result["summary"]:
        for point in entry["by_n"]:
            median = point["median_error"]
            table.add_row(str(entry["p"]), str(entry["public_n"]), f"{entry['epsilon']:g}", f"{point['n']:,}",
                          f"{point['answered']}/{point['trials']}", str(point["no_root"]),
                          "-" if median is None else f"{median:.4g}")
        slope = entry["median_slope"]
        table.add_row("", "", "", "slope", "", "", "n/a" if slope is None else f"{slope:+.2f}")
    if not quiet:
        stdout.print(table)
    stdout.print(f"wrote {out}" + (f" and {plot}" if plot is not None else ""), highlight=False)


@bench_app.command("stein-glm-real")
@handles_errors
def bench_stein_glm_real(
    train: Annotated[Path, typer.Option(help="Training CSV (numeric or coded columns; a 0/1 or coded target).")],
    test: Annotated[Path, typer.Option(help="Test CSV (same columns).")],
    target: Annotated[str, typer.Option(help="The binary label column.")],
    out: JsonOut,
    features: Annotated[str | None, typer.Option(help="Comma-separated features (default: all others).")] = None,
    positive: Annotated[int, typer.Option(help="The target's code for label 1.")] = 1,
    epsilon: Annotated[str, typer.Option(help="Comma-separated local epsilons (delta = n^-1.1).")] = "1,2,5,10",
    trials: Annotated[int, typer.Option(help="Trials per epsilon.")] = 3,
    max_train: Annotated[int | None, typer.Option(help="Use at most this many training rows (a seeded sample).")]
    = None,
    seed: Annotated[int, typer.Option(help="Seed of the split and the simulated participants.")] = 0,
    plot: PlotOut = None,
    force: Force = False,
    quiet: QuietFlag = False,
) -> None:
    """Binary logistic from local reports: half the training rows public and unlabeled, half participants."""
    from service.tools.bench import stein_glm_real as stein_real

    config = stein_real.SteinRealBench(
        train=train, test=test, target=target,
        features=tuple(column_list(features) or ()) if features is not None else None, positive=positive,
        epsilons=_numbers(epsilon, "--epsilon", float), trials=trials, max_train=max_train, seed=seed)
    result = _run(config, stein_real.run_stein_real, stein_real.plot_stein_real, out, plot, force, quiet)
    table = Table("method", "epsilon", "no root", "accuracy", "auc", "log loss", title="stein-glm-real bench")
    for method, by_eps in result["summary"].items():
        for eps, entry in by_eps.items():
            cells = [f"{entry[f'median_{m}']:.3f}" if f"median_{m}" in entry else "-"
                     for m in ("accuracy", "auc", "log_loss")]
            table.add_row(method, eps, f"{entry['no_root']}/{entry['trials']}", *cells)
    if not quiet:
        stdout.print(table)
    stdout.print(f"wrote {out}" + (f" and {plot}" if plot is not None else ""), highlight=False)
