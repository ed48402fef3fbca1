"""The regression page's protocol (Ferrando & Sheldon 2024, Sec. 4 / App. D): every table and task of
``docs/regression-results.md``, each one run of :mod:`benchmarks.regression` (formerly a shell script,
``benchmarks/results/regression/run.sh``).

Each run writes ``NAME.json`` and ``NAME.png`` into ``--out-dir`` (default ``benchmarks/results/regression``), with
``--epsilons 0.05,0.1,0.5,1,2 --delta 1e-5 --trials 5 --max-train 50000 --seed 0``, ``MARGINAL_TRIALS`` trials for the
AIM-based methods (dd-ssp, aim-synth) and AIM's planned rounds ``ROUNDS_PER_ATTRIBUTE`` times the design's attributes.
``--resume`` skips every run whose JSON exists already (a crash or a kill loses only the run in progress); ``--only
REGEX`` runs the matching runs; ``--epsilons``, ``--linear-methods``, ``--logistic-methods`` narrow the protocol (a
narrowed run writes JSON that ``--resume`` would take as complete: give it its own ``--out-dir``). nist_taxi has no
test split: a deterministic 1,000-row one (pandas ``sample(n=1000, random_state=0)``), the rest is train::

    python -m benchmarks.regression_suite 5 16 --resume --out-dir benchmarks/results/regression-issue9
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from benchmarks import harness
from benchmarks.regression import RegressionBench, plot_regression_bench, run_regression_bench
from service.cli.common import column_list, stdout

ADULT_CATEGORICAL = "workclass,education,marital-status,occupation,relationship,race,sex,native-country,income>50K"
ADULT_FEATURES = ("age,workclass,fnlwgt,marital-status,occupation,relationship,race,sex,capital-gain,capital-loss,"
                  "hours-per-week,native-country")
ACS_INCOME_CATEGORICAL = "COW,MAR,RELP,SEX,RAC1P"
ACS_EMPLOYMENT_CATEGORICAL = "MAR,RELP,DIS,ESP,CIT,MIG,MIL,ANC,NATIVITY,DEAR,DEYE,DREM,SEX,RAC1P,ESR"
ACS_MOBILITY_CATEGORICAL = "MAR,SEX,DIS,CIT,MIL,ANC,NATIVITY,RELP,DEAR,DEYE,DREM,RAC1P,GCL,COW,ESR,MIG"
TAXI_CATEGORICAL = "shift,company_id,pickup_community_area,dropoff_community_area,payment_type"
LINEAR_METHODS = "ols,adassp,adassp-paper,dd-ssp,aim-synth"
LOGISTIC_METHODS = "logreg,objpert,dd-ssp,aim-synth"


def runs(data: Path, taxi: Path) -> list[tuple[str, int, dict[str, object]]]:
    """(name, attributes of the design, the run's settings) in the page's order; ``taxi`` holds the split."""
    adult = {"train": data / "adult/adult_train.csv", "test": data / "adult/adult_test.csv",
             "domain": data / "adult/adult-domain.json", "categorical": ADULT_CATEGORICAL}
    acs = data / "acs"
    mobility = {"train": acs / "ACSmobility_train.csv", "test": acs / "ACSmobility_test.csv",
                "domain": acs / "ACSmobility-domain.json", "categorical": ACS_MOBILITY_CATEGORICAL}
    out: list[tuple[str, int, dict[str, object]]] = []
    for intercept in (False, True):
        icpt = "intercept" if intercept else "no-intercept"
        out.append((f"adult-linear-{icpt}", 14, {**adult, "target": "education-num", "task": "linear",
                                                 "intercept": intercept, "features": f"{ADULT_FEATURES},income>50K"}))
        out.append((f"adult-logistic-{icpt}", 15, {**adult, "target": "income>50K", "task": "logistic",
                                                   "intercept": intercept, "features": None}))
    # education-num is a function of education, so with both a constant is in the span of the features and the
    # intercept changes nothing above; without education the intercept matters (docs/regression-results.md).
    for intercept in (False, True):
        icpt = "intercept" if intercept else "no-intercept"
        out.append((f"adult-logistic-noeducation-{icpt}", 14, {
            **adult, "target": "income>50K", "task": "logistic", "intercept": intercept,
            "features": f"{ADULT_FEATURES},education-num"}))
    out.append(("acsincome-linear-no-intercept", 9, {
        "train": acs / "ACSincome-LIN_train.csv", "test": acs / "ACSincome-LIN_test.csv",
        "domain": acs / "ACSincome-LIN-domain.json", "categorical": ACS_INCOME_CATEGORICAL, "target": "PINCP",
        "task": "linear", "intercept": False, "features": None}))
    out.append(("acsemployment-logistic-no-intercept", 17, {
        "train": acs / "ACSemployment_train.csv", "test": acs / "ACSemployment_test.csv",
        "domain": acs / "ACSemployment-domain.json", "categorical": ACS_EMPLOYMENT_CATEGORICAL, "target": "ESR",
        "task": "logistic", "intercept": False, "features": None}))
    out.append(("acsmobility-linear-no-intercept", 21, {**mobility, "target": "AGEP", "task": "linear",
                                                        "intercept": False, "features": None}))
    out.append(("acsmobility-logistic-no-intercept", 21, {**mobility, "target": "MIG", "task": "logistic",
                                                          "intercept": False, "features": None}))
    out.append(("taxi-linear-no-intercept", 10, {
        "train": taxi / "train.csv", "test": taxi / "test.csv", "domain": data / "nist_taxi/nist-taxi-domain.json",
        "categorical": TAXI_CATEGORICAL, "target": "trip_total", "task": "linear", "intercept": False,
        "features": None}))
    return out


def split_taxi(data: Path, folder: Path) -> None:
    """nist_taxi's deterministic split (:func:`benchmarks.harness.taxi_split`) as ``train.csv`` and ``test.csv``."""
    train, test = harness.taxi_split(data / "nist_taxi/nist-taxi.csv")
    test.to_csv(folder / "test.csv", index=False)
    train.to_csv(folder / "train.csv", index=False)


def main(
    marginal_trials: Annotated[int, typer.Argument(help="Trials of the AIM-based methods (the others get all).")] = 1,
    rounds_per_attribute: Annotated[int, typer.Argument(help="AIM's planned rounds per attribute (AIM's default "
                                                             "is 16).")] = 4,
    out_dir: Annotated[Path, typer.Option(help="Folder of the runs' NAME.json and NAME.png.")]
    = harness.RESULTS / "regression",
    data: Annotated[Path, typer.Option(help="The shared data folder.")] = harness.DATA,
    resume: Annotated[bool, typer.Option("--resume", help="Skip the runs whose JSON exists.", metavar="")] = False,
    only: Annotated[str | None, typer.Option(help="Run only the runs whose name matches this regex.")] = None,
    epsilons: Annotated[str, typer.Option(help="Comma-separated epsilons.")] = "0.05,0.1,0.5,1,2",
    linear_methods: Annotated[str, typer.Option(help="Methods of the linear runs.")] = LINEAR_METHODS,
    logistic_methods: Annotated[str, typer.Option(help="Methods of the logistic runs.")] = LOGISTIC_METHODS,
    trials: Annotated[int, typer.Option(help="Trials per epsilon.")] = 5,
    max_train: Annotated[int, typer.Option(help="Cap on training rows (a seeded sample).")] = 50_000,
) -> None:
    """Every run of the regression results page through the real release path, one JSON and one PNG each."""
    eps = harness.number_list(epsilons, "--epsilons", float)
    out_dir.mkdir(parents=True, exist_ok=True)
    with harness.temporary_folder("marginalia-regression-suite-") as taxi:
        split = False
        for name, attributes, settings in runs(data, taxi):
            if only is not None and not re.search(only, name):
                continue
            out, plot = out_dir / f"{name}.json", out_dir / f"{name}.png"
            if resume and out.exists():
                stdout.print(f"== {name}: {out} exists, skipped", highlight=False)
                continue
            if name.startswith("taxi") and not split:
                split_taxi(data, taxi)
                split = True
            stdout.print(f"== {name}", highlight=False)
            methods = linear_methods if settings["task"] == "linear" else logistic_methods
            features = settings["features"]
            config = RegressionBench(
                train=Path(settings["train"]), test=Path(settings["test"]), domain=Path(settings["domain"]),
                target=str(settings["target"]), task=str(settings["task"]),
                features=tuple(column_list(str(features))) if features is not None else None,
                categorical=tuple(column_list(str(settings["categorical"])) or ()),
                methods=tuple(column_list(methods) or ()), epsilons=eps, delta=1e-5, trials=trials,
                max_train=max_train, seed=0, intercept=bool(settings["intercept"]), mechanism="auto",
                marginal_options={"rounds": rounds_per_attribute * attributes}, marginal_trials=marginal_trials)
            harness.run_and_write(lambda log, config=config: run_regression_bench(config, log=log),
                                  plot_regression_bench, out, plot, True, True)
    stdout.print("== done", highlight=False)


app = harness.command(main)

if __name__ == "__main__":
    app()
