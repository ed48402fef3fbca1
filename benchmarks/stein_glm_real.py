"""``python -m benchmarks.stein_glm_real``: binary logistic regression from local reports on a real table, helped by a
public unlabeled half (the real-data experiment of Wang, Hu, Zhang, Gaboardi & Xu, "Generalized linear models in
non-interactive local differential privacy with public data", ALT 2021, Sec. 6), through the real collection path.

The training rows are shuffled (seeded) and split in two halves: the first half's feature columns, without the label,
become the public table (written to a CSV and registered by :func:`service.campaigns.public_tables.load_public_csv`,
what ``marginalia public load`` runs); the second half are the participants (a CSV of their features and 0/1 label,
read by :func:`service.campaigns.simulate.rows_from_csv` and played by :func:`service.campaigns.simulate.simulate`,
what ``marginalia simulate --csv`` runs). For every trial and epsilon four ``stein-glm`` campaigns are created
(:data:`CAMPAIGNS`), each answered by :func:`service.campaigns.estimates.fit_campaign` (``marginalia campaign fit``):

* ``public-gram``: the product's defaults (variant public-gram: features standardized and whitened with public
  statistics, the norm bound the public 0.9 quantile of ``||W x||``, labels in [0, 1], ``y (1, x)`` through PrivUnit2
  at ``delta = 0``; ``X^T X`` from the public rows; an estimated intercept). Methods
  ``public-gram/logistic`` (``--model logistic``) and ``public-gram/linear`` (the OLS with its intercept as a linear
  probability model);
* ``public-gram-l2ball``: the same with ``--option randomizer=l2ball`` (the l2-ball randomizer, pure epsilon, the
  default before PrivUnit2); methods ``public-gram-l2ball/logistic`` and ``public-gram-l2ball/linear``;
* ``public-gram-gaussian``: the same with ``--option randomizer=gaussian`` at ``delta = n^-1.1``; methods
  ``public-gram-gaussian/logistic`` and ``public-gram-gaussian/linear``;
* ``paper``: ``--option variant=paper``, Alg. 1 as printed (Alg. 1's norm bound from the public rows, labels bounded by
  1, ``delta = n^-1.1`` with ``n`` the participants). Its methods, all from the SAME reports:

* ``stein-logistic``: ``--model logistic`` (Remark 11's pooled ``X^T X``, then the link constant over the public rows);
* ``stein-logistic/private-cov``: the same with ``X^T X`` from the reports alone (what Remark 11's public rows buy);
* ``stein-logistic/public-cov``: ``X^T X`` from the public rows alone (the reports' ``x y`` only);
* ``ols-linear``: ``--model linear``, the private OLS, the "plain LDP sufficient statistics" without the Stein step,
  used as a linear probability model ``P(y = 1 | x) = 0.5 + <w, x'>`` (clipped to ``[0.001, 0.999]``; the intercept
  0.5, the centre of the label range, is an assumption: the reports hold no private label mean);
* ``ols-linear/private-cov``, ``ols-linear/public-cov``: the same with ``X^T X`` from the reports or the public rows;

and, fitted on the participants' rows themselves, the non-private references ``logreg`` (unpenalised logistic
regression with an intercept) and ``majority`` (always the training majority class).

Metrics on the test rows: ``accuracy`` of the model's own rule (score above 0; probability above 1/2 for ``public-
gram/linear``), ``auc`` of the score, ``log_loss`` and ``brier`` of the probabilities, ``mean_probability``
(calibration in the large: the base rate is ``positive_rate_test``). The Stein coefficients are ``c`` times the OLS
ones with ``c > 0``, so ``stein-logistic`` and ``ols-linear`` have the SAME accuracy and AUC by construction; what the
Stein step changes is the probabilities (log loss, Brier score). A fit whose link constant does not exist is recorded
with ``no_root: true``.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer
from scipy.special import expit

from benchmarks import harness
from benchmarks.harness import BenchError, Force, JsonOut, PlotOut
from benchmarks.stein_glm import BENCH_CAP, delta_for
from estimators.central.metrics import auc
from service.cli.common import QuietFlag, column_list
from service.errors import InvalidInput

#: campaign kind -> (its options beyond the participants, whether its delta is n^-1.1 (else 0))
CAMPAIGNS: dict[str, tuple[dict[str, Any], bool]] = {
    "public-gram": ({}, False),
    "public-gram-l2ball": ({"randomizer": "l2ball"}, False),
    "public-gram-gaussian": ({"randomizer": "gaussian"}, True),
    "paper": ({"variant": "paper"}, True),
}
#: method -> (campaign kind, campaign fit model, X^T X source)
PRIVATE_METHODS: dict[str, tuple[str, str, str | None]] = {
    "public-gram/logistic": ("public-gram", "logistic", None),
    "public-gram/linear": ("public-gram", "linear", None),
    "public-gram-l2ball/logistic": ("public-gram-l2ball", "logistic", None),
    "public-gram-l2ball/linear": ("public-gram-l2ball", "linear", None),
    "public-gram-gaussian/logistic": ("public-gram-gaussian", "logistic", None),
    "public-gram-gaussian/linear": ("public-gram-gaussian", "linear", None),
    **{f"{name}{suffix}": ("paper", model, covariance)
       for name, model in (("stein-logistic", "logistic"), ("ols-linear", "linear"))
       for suffix, covariance in (("", "pooled"), ("/private-cov", "private"), ("/public-cov", "public"))},
}
REFERENCE_METHODS = ("logreg", "majority")
PROBABILITY_FLOOR = 1e-3
PUBLIC_NAME = "bench-public-half"


@dataclass(frozen=True)
class SteinRealBench:
    """One run. ``features`` default to every column but the target; ``positive``: the target's code for label 1."""

    train: Path
    test: Path
    target: str
    features: tuple[str, ...] | None = None
    positive: int = 1
    epsilons: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0)
    trials: int = 3
    max_train: int | None = None
    seed: int = 0

    def validate(self) -> None:
        if not self.epsilons or any(isinstance(e, bool) or not isinstance(e, int | float) or not math.isfinite(e)
                                    or e <= 0 for e in self.epsilons):
            raise BenchError(f"epsilon must be a list of positive finite numbers, got {list(self.epsilons)}")
        if isinstance(self.trials, bool) or not isinstance(self.trials, int) or self.trials < 1:
            raise BenchError(f"trials must be a positive integer, got {self.trials!r}")
        if self.max_train is not None and (isinstance(self.max_train, bool) or self.max_train < 4):
            raise BenchError(f"max-train must be an integer >= 4, got {self.max_train!r}")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["train"], data["test"] = str(self.train), str(self.test)
        return data


def _read(path: Path, columns: Sequence[str], what: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise BenchError(f"{what} file {path}: {error}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise BenchError(f"{what} file {path} has no column {missing[0]!r} (columns: {list(frame.columns)})")
    values = frame[list(columns)].apply(pd.to_numeric, errors="coerce")
    bad = ~np.isfinite(values.to_numpy(dtype=float))
    if bad.any():
        row, column = np.argwhere(bad)[0]
        raise BenchError(f"{what} file {path}, row {row + 1}: column {columns[column]!r} is not a finite number")
    return values


def split_rows(config: SteinRealBench) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, tuple[str, ...]]:
    """(public half: features only; participants: features and the 0/1 target; test rows likewise; feature names)."""
    features = config.features
    if features is None:
        try:
            features = tuple(c for c in pd.read_csv(config.train, nrows=0).columns if c != config.target)
        except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
            raise BenchError(f"train file {config.train}: {error}") from None
    if config.target in features or not features:
        raise BenchError(f"features must be a non-empty list without the target {config.target!r}, "
                              f"got {list(features)}")
    columns = [*features, config.target]
    train, test = _read(config.train, columns, "train"), _read(config.test, columns, "test")
    for frame in (train, test):
        frame[config.target] = (frame[config.target] == config.positive).astype(float)
    if train[config.target].nunique() != 2 or test[config.target].nunique() != 2:
        raise BenchError(f"target {config.target!r} == {config.positive} must hold both classes in train and test")
    order = np.random.default_rng(config.seed).permutation(len(train))
    if config.max_train is not None:
        order = order[:config.max_train]
    half = len(order) // 2
    public = train.iloc[order[:half]][list(features)].reset_index(drop=True)
    private = train.iloc[order[half:]].reset_index(drop=True)
    return public, private, test, tuple(features)


def probabilities(model: str, scores: np.ndarray, intercept: bool = False) -> np.ndarray:
    """``sigmoid(score)`` for the logistic fits; for the linear probability model ``score`` itself when it has an
    estimated intercept, else ``0.5 + score``; all clipped."""
    raw = expit(scores) if model != "linear" else (scores if intercept else 0.5 + scores)
    return np.clip(raw, PROBABILITY_FLOOR, 1 - PROBABILITY_FLOOR)


def classification_metrics(y: np.ndarray, scores: np.ndarray, proba: np.ndarray,
                           threshold: float = 0.0) -> dict[str, float]:
    """Accuracy of ``score > threshold``, AUC of the score, log loss, Brier score and mean of the probabilities."""
    return {"accuracy": float(np.mean((scores > threshold) == (y == 1))), "auc": auc(y, scores),
            "log_loss": float(-np.mean(y * np.log(proba) + (1 - y) * np.log(1 - proba))),
            "brier": float(np.mean((proba - y) ** 2)), "mean_probability": float(np.mean(proba))}


def reference_records(private: pd.DataFrame, test: pd.DataFrame, features: tuple[str, ...],
                      target: str) -> list[dict[str, Any]]:
    """The non-private logistic regression and the majority class, fitted on the participants' rows."""
    from estimators.central.reference import LogisticReference

    x, y = private[list(features)].to_numpy(float), private[target].to_numpy(float)
    center, scale = x.mean(axis=0), np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    x_test, y_test = (test[list(features)].to_numpy(float) - center) / scale, test[target].to_numpy(float)
    started = time.perf_counter()
    model = LogisticReference(fit_intercept=True).fit((x - center) / scale, 2 * y - 1, features)
    scores = model.decision_function(x_test)
    logreg = {"method": "logreg", "epsilon": None, "trial": 0,
              **classification_metrics(y_test, scores, probabilities("logistic", scores)),
              "seconds": time.perf_counter() - started}
    majority = float(y.mean() >= 0.5)
    constant = np.full(len(y_test), y.mean())
    return [logreg, {"method": "majority", "epsilon": None, "trial": 0,
                     "accuracy": float(np.mean(y_test == majority)), "auc": 0.5,
                     "log_loss": float(-np.mean(y_test * np.log(constant) + (1 - y_test) * np.log(1 - constant))),
                     "brier": float(np.mean((constant - y_test) ** 2)), "mean_probability": float(y.mean()),
                     "seconds": 0.0}]


def _test_scores(coefficients: dict[str, float], features: tuple[str, ...], x_test: np.ndarray) -> np.ndarray:
    return x_test @ np.array([coefficients[f] for f in features]) + coefficients["(intercept)"]


def campaign_records(engine: object, name: str, kind: str, epsilon: float, trial: int, features: tuple[str, ...],
                     test: pd.DataFrame, target: str) -> list[dict[str, Any]]:
    """Every private method of campaign kind ``kind`` answered from campaign ``name``'s stored reports (free fits)."""
    from service.campaigns.campaigns import get_campaign
    from service.campaigns.estimates import fit_campaign

    campaign = get_campaign(engine, name)  # type: ignore[arg-type]
    x_test, y_test = test[list(features)].to_numpy(float), test[target].to_numpy(float)
    out = []
    for method, (method_kind, model, covariance) in PRIVATE_METHODS.items():
        if method_kind != kind:
            continue
        started = time.perf_counter()
        record: dict[str, Any] = {"method": method, "epsilon": epsilon, "trial": trial, "campaign": name,
                                  "campaign_epsilon": campaign.epsilon, "campaign_delta": campaign.delta,
                                  "norm_bound": campaign.spec.norm_bound, "no_root": False}
        try:
            fitted = fit_campaign(engine, name, model, covariance)  # type: ignore[arg-type]
        except InvalidInput as error:
            if error.code != "no_root":
                raise
            record.update({"no_root": True, "note": str(error)})
        else:
            scores = _test_scores(fitted.coefficients, features, x_test)
            estimated = kind != "paper"  # the public-gram variant estimates its intercept
            threshold = 0.5 if model == "linear" and estimated else 0.0
            record.update(classification_metrics(y_test, scores, probabilities(model, scores, estimated), threshold))
            record["link_constant"] = fitted.details.get("link_constant")
        record["fit_seconds"] = time.perf_counter() - started
        out.append(record)
    return out


def run_stein_real(config: SteinRealBench, log: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Run the experiment (module docstring) and return the JSON-ready result."""
    from service.campaigns import caps, public_tables
    from service.campaigns.campaigns import create_campaign
    from service.campaigns.simulate import rows_from_csv, simulate

    config.validate()
    started = time.perf_counter()
    public, private, test, features = split_rows(config)
    records = reference_records(private, test, features, config.target)
    log(f"logreg (non-private): accuracy {records[0]['accuracy']:.3f}, auc {records[0]['auc']:.3f}; "
        f"majority: accuracy {records[1]['accuracy']:.3f}")
    n = len(private)
    with harness.temporary_folder("marginalia-stein-real-") as folder:
        public.to_csv(folder / "public.csv", index=False)
        private.to_csv(folder / "participants.csv", index=False)
        for trial in range(config.trials):
            engine = harness.temporary_database(folder / f"trial-{trial}.db")
            caps.set_default_cap(engine, *BENCH_CAP, principal="bench")
            public_tables.load_public_csv(engine, PUBLIC_NAME, folder / "public.csv", principal="bench")
            for e_index, epsilon in enumerate(config.epsilons):
                for k_index, (kind, (options, with_delta)) in enumerate(CAMPAIGNS.items()):
                    name = f"real-{kind}-eps{e_index}-trial{trial}"
                    t0 = time.perf_counter()
                    create_campaign(engine, name, "stein-glm", features, config.target, PUBLIC_NAME, epsilon,
                                    delta_for(n) if with_delta else 0.0, {**options, "participants": n},
                                    principal="bench")
                    x, y = rows_from_csv(engine, name, folder / "participants.csv")
                    seed = int(np.random.SeedSequence([config.seed, trial, e_index, k_index]).generate_state(1)[0])
                    simulated = simulate(engine, name, x, y, seed=seed)
                    mine = campaign_records(engine, name, kind, epsilon, trial, features, test, config.target)
                    for record in mine:
                        record.update({"seed": seed, "simulate_seconds": simulated.seconds,
                                       "seconds": time.perf_counter() - t0})
                    records.extend(mine)
                    log(f"eps={epsilon:g} trial={trial}: " + ", ".join(
                        f"{r['method']} " + ("no root" if r["no_root"] else
                                             f"acc {r['accuracy']:.3f} auc {r['auc']:.3f}") for r in mine))
            engine.dispose()
            (folder / f"trial-{trial}.db").unlink(missing_ok=True)
    return {"benchmark": "stein-glm-real", "config": config.to_json(),
            "data": {"features": list(features), "public_rows": len(public), "participants": n,
                     "test_rows": len(test), "positive_rate_train": float(private[config.target].mean()),
                     "positive_rate_test": float(test[config.target].mean())},
            "records": records, "summary": summarize_real(records), "seconds_total": time.perf_counter() - started}


METRICS = ("accuracy", "auc", "log_loss", "brier", "mean_probability")


def summarize_real(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per method and epsilon (``"none"`` for the references): trials, fits without a root, medians of the metrics."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for record in records:
        key = (record["method"], "none" if record["epsilon"] is None else repr(float(record["epsilon"])))
        groups.setdefault(key, []).append(record)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (method, epsilon), group in groups.items():
        answered = [r for r in group if not r.get("no_root")]
        entry: dict[str, Any] = {"trials": len(group), "no_root": len(group) - len(answered)}
        for metric in METRICS:
            if answered:
                entry[f"median_{metric}"] = statistics.median(r[metric] for r in answered)
        out.setdefault(method, {})[epsilon] = entry
    return out


def plot_stein_real(result: dict[str, Any], path: Path) -> None:
    """Median test accuracy, AUC and mean predicted probability against epsilon (log x) per private method; the
    references as dashed lines (the majority's mean probability is the training base rate)."""
    plt = harness.pyplot()

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    for ax, metric in zip(axes, ("accuracy", "auc", "mean_probability"), strict=True):
        for index, (method, by_eps) in enumerate(sorted(result["summary"].items())):
            if "none" in by_eps:
                ax.axhline(by_eps["none"][f"median_{metric}"], linestyle="--", color="k" if method == "logreg"
                           else "0.6", label=f"{method} (non-private)")
                continue
            points = sorted((float(e), v) for e, v in by_eps.items() if f"median_{metric}" in v)
            label = method if points else f"{method}: no root in any trial"
            ax.plot([p[0] for p in points], [p[1][f"median_{metric}"] for p in points], marker="o",
                    color=f"C{index % 10}", linestyle="-" if method.startswith("public-gram") else ":", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("epsilon (local, per participant; delta 0 for public-gram, else n^-1.1)")
        ax.set_ylabel(f"test {metric} (median over trials)")
        harness.finish_axes(ax, 7)
    data = result["data"]
    fig.suptitle(f"{Path(result['config']['train']).stem}: {result['config']['target']}, {data['participants']:,} "
                 f"participants, {data['public_rows']:,} public unlabeled rows", fontsize=10)
    harness.save_figure(fig, path)


def main(
    train: Annotated[Path, typer.Option(help="Training CSV (numeric or coded columns; a 0/1 or coded target).")],
    test: Annotated[Path, typer.Option(help="Test CSV (same columns).")],
    target: Annotated[str, typer.Option(help="The binary label column.")],
    out: JsonOut,
    plot: PlotOut = None,
    force: Force = False,
    quiet: QuietFlag = False,
    features: Annotated[str | None, typer.Option(help="Comma-separated features (default: all others).")] = None,
    positive: Annotated[int, typer.Option(help="The target's code for label 1.")] = 1,
    epsilon: Annotated[str, typer.Option(help="Comma-separated local epsilons (delta 0 for the pure "
                                         "public-gram campaigns, n^-1.1 for the Gaussian ones).")] = "1,2,5,10",
    trials: Annotated[int, typer.Option(help="Trials per epsilon.")] = 3,
    max_train: Annotated[int | None, typer.Option(help="Use at most this many training rows (a seeded sample).")]
    = None,
    seed: Annotated[int, typer.Option(help="Seed of the split and the simulated participants.")] = 0,
) -> None:
    """Binary logistic from local reports: half the training rows public and unlabeled, half participants."""
    config = SteinRealBench(
        train=train, test=test, target=target,
        features=tuple(column_list(features) or ()) if features is not None else None, positive=positive,
        epsilons=harness.number_list(epsilon, "--epsilon", float), trials=trials, max_train=max_train, seed=seed)
    config.validate()
    result = harness.run_and_write(lambda log: run_stein_real(config, log=log), plot_stein_real, out, plot, force,
                                   quiet)
    rows = []
    for method, by_eps in result["summary"].items():
        for eps, entry in by_eps.items():
            cells = [f"{entry[f'median_{m}']:.3f}" if f"median_{m}" in entry else "-"
                     for m in ("accuracy", "auc", "log_loss", "mean_probability")]
            rows.append((method, eps, f"{entry['no_root']}/{entry['trials']}", *cells))
    if not quiet:
        harness.summary_table("stein-glm-real bench", ("method", "epsilon", "no root", "accuracy", "auc", "log loss",
                                                       "mean p"), rows)
    harness.wrote(out, plot)


app = harness.command(main)

if __name__ == "__main__":
    app()
