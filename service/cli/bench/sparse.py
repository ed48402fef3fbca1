"""``marginalia bench sparse``: Sec. 7.1 of Wang & Xu (2019) through the collections path, and the central DP-IHT on
the same rows (:mod:`service.tools.bench.sparse`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from service.cli.bench import bench_app
from service.cli.common import (
    QuietFlag,
    check_output,
    column_list,
    handles_errors,
    stderr,
    stdout,
    write_output,
)


def _numbers(text: str, option: str, kind: type) -> tuple:
    from service.tools.bench.sparse import SparseBenchError

    try:
        return tuple(kind(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SparseBenchError(f"{option} must be comma-separated {kind.__name__}s, got {text!r}") from None


@bench_app.command("sparse")
@handles_errors
def bench_sparse(
    out: Annotated[Path, typer.Option("--json", help="Write the JSON records here (refused if it exists, unless "
                                                     "--force).")],
    method: Annotated[str, typer.Option(help="Comma-separated methods (ldp-iht, label-ldp-iht, lasso, and any "
                                             "registered one).")] = "ldp-iht,label-ldp-iht,lasso",
    p: Annotated[str, typer.Option("--p", help="Comma-separated dimensions.")] = "100,400",
    n: Annotated[str, typer.Option("--n", help="Comma-separated numbers of participants.")] = "10000,40000",
    s: Annotated[int, typer.Option("--s", help="Non-zeros of theta* (and the s kept by IHT).")] = 10,
    epsilon: Annotated[str, typer.Option(help="Comma-separated local epsilons.")] = "1",
    delta: Annotated[float, typer.Option(help="Local delta of the Gaussian label reports.")] = 1e-3,
    eta: Annotated[float | None, typer.Option(help="IHT step (default: the protocols' default, 1; Sec. 7.1 "
                                                   "states 0.1 or 0.2).")] = None,
    trials: Annotated[int, typer.Option(help="Trials per cell.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the rows and the simulated devices.")] = 0,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG plot of relative error vs n here.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --json and --plot if they exist.",
                                        metavar="")] = False,
    quiet: QuietFlag = False,
) -> None:
    """Sec. 7.1 of Wang & Xu (2019): sparse linear regression under local DP through the real collections path
    (campaigns on a temporary SQLite database, the simulator, campaign fit)."""
    from service.tools.bench import sparse as sparse_bench

    config = sparse_bench.SparseBench(
        methods=tuple(column_list(method) or ()), ps=_numbers(p, "--p", int), ns=_numbers(n, "--n", int),
        sparsity=s, epsilons=_numbers(epsilon, "--epsilon", float), delta=delta, trials=trials, seed=seed, eta=eta)
    sparse_bench.check_config(config)
    check_output(out, force, "--json")
    if plot is not None:
        check_output(plot, force, "--plot")
    result = sparse_bench.run_sparse_bench(config, log=(lambda m: None) if quiet else (lambda m: stderr.print(m)))
    write_output(out, "--json", lambda path: path.write_text(json.dumps(result, indent=1) + "\n"))
    if plot is not None:
        write_output(plot, "--plot", lambda path: sparse_bench.plot_sparse_bench(result, path))
    table = Table("method", "p", "n", "epsilon", "trials", "relative error (mean)", "seconds (mean)",
                  title="relative error ||theta - theta*|| / ||theta*||")
    for row in result["summary"]:
        table.add_row(row["method"], str(row["p"]), str(row["n"]), f"{row['epsilon']:g}", str(row["trials"]),
                      f"{row['relative_error_mean']:.3f}", f"{row['seconds_mean']:.1f}")
    stdout.print(table)
    stdout.print(f"wrote {out}" + (f" and {plot}" if plot is not None else ""), highlight=False)
