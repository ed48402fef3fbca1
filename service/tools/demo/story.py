"""``make demo``: the main job, end to end, on the embedded SQLite default, in about two minutes (130 s of CPU).

On a fresh database in ``demo-output/``:

1. a **steward**, on the command line, loads the Adult training table and sets a budget;
2. releases marginals with each mechanism (laplace, gaussian, mst, aim): the only steps that spend;
3. answers marginals from those releases (free) and compares them with the true counts, which only
   the steward's own copy of the file can show;
4. an **analyst**, in Python through the HTTP client against a server started in the background on
   loopback, fits DD-SSP linear and logistic regressions from the AIM release (free), beside AdaSSP
   and objective perturbation (new releases, charged) and the non-private fit (computed here by the
   demo from the file, as a yardstick only), scored on the paper's 1,000-row test split;
5. an **auditor** reads the ledger through the API and recomputes the spend with plain SQL;
6. a **local-DP collection** (under a minute, :mod:`service.tools.demo.local`): a steward registers a public table
   and creates a campaign, a participant reports from her device and a simulated population through the batch
   path, an analyst fits five GLMs from that one collection (Remark 16), an auditor reads the local spend with SQL;

and writes ``demo-output/demo.png``: the ledger over time (epsilon spent after each entry) and each
mechanism's error on the marginals of step 3.

Each part is a function taking the shared :class:`Story` (paths, release ids, figures, the one HTTP server);
``PARTS`` lists them in order, so a new part is one function and one line. Releases are not seeded: the
figures change from run to run, as they would in production. Speed choices (about two minutes on two idle cores;
README.md has the measured figures): the Gaussian release measures the pairs with the income target
only, AIM plans 2 rounds per attribute (``--rounds 30``; the default is 16 per attribute, ~1 min),
the marginals of step 3 are read in this process rather than by one command each, and parts 4 and 6 share one
server (each start is seconds of imports). Most of the rest is the commands' own start (about 1.5 s of CPU each).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from workloads import data_scale
from workloads.domain import Domain
from workloads.encodings import DesignEncoding

if TYPE_CHECKING:
    from service.api.server import BackgroundServer

REPO = Path(__file__).resolve().parents[3]
OUT = REPO / "demo-output"
DATA = Path(os.environ.get("MARGINALIA_SHARED_DATA", REPO.parent / "shared" / "data"))
ADULT = DATA / "adult"
CATEGORICAL = "workclass,education,marital-status,occupation,relationship,race,sex,native-country,income>50K"
MARGINALIA = str(Path(sys.executable).with_name("marginalia"))
COMPARED = (["sex", "income>50K"], ["race", "sex"], ["relationship", "income>50K"], ["age", "hours-per-week"])
LEDGER_COLUMNS = ["entry_id", "entry", "release_id", "mechanism", "epsilon", "delta", "rho", "epsilon_priced",
                  "epsilon_spent_after"]


@dataclass
class Story:
    """What the parts of the demo share."""

    out: Path = OUT
    releases: dict[str, int] = field(default_factory=dict)  # mechanism -> release id
    errors: dict[str, list[float]] = field(default_factory=dict)  # mechanism -> L1 error / N per COMPARED marginal
    measured: dict[str, list[bool]] = field(default_factory=dict)  # mechanism -> did it measure that marginal
    ledger: pd.DataFrame | None = None
    #: what the demo keeps running until it ends: its one HTTP server (:meth:`server`)
    running: ExitStack = field(default_factory=ExitStack)
    _server: BackgroundServer | None = None

    def server(self) -> BackgroundServer:
        """The demo's HTTP server on its database, started on first use and stopped when the demo ends: the analysts
        of part 4 and the participants of part 6 share it (a server start is seconds of imports on two cores)."""
        if self._server is None:
            from service.api.server import background_server

            self._server = self.running.enter_context(background_server(f"sqlite:///{self.database}",
                                                                        self.out / "server.log"))
        return self._server

    @property
    def database(self) -> Path:
        return self.out / "marginalia.db"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "MARGINALIA_DATABASE_URL": f"sqlite:///{self.database}", "COLUMNS": "150"}

    def run(self, *args: str, as_json: bool = False, summary: Callable[[dict], str] | None = None) -> object:
        """Run one CLI command against the demo database, echoing it like a terminal session. With
        ``as_json`` the JSON answer is returned, and shown cut to a line (or as ``summary`` says)."""
        print(f"\n$ marginalia {' '.join(shlex.quote(a) for a in args)}", flush=True)
        if not as_json:
            subprocess.run([MARGINALIA, *args], env=self.env, check=True)
            return None
        result = subprocess.run([MARGINALIA, *args, "--json"], env=self.env, capture_output=True, text=True,
                                check=False)
        sys.stderr.write(result.stderr)
        if result.returncode != 0:
            sys.stderr.write(result.stdout)
            raise SystemExit(f"demo step failed: marginalia {' '.join(args)}")
        payload = json.loads(result.stdout)
        print(summary(payload) if summary is not None else json.dumps(payload)[:300])
        return payload


def heading(text: str) -> None:
    print(f"\n{'=' * 100}\n== {text}\n{'=' * 100}", flush=True)


def true_marginal(frame: pd.DataFrame, sizes: dict[str, int], attrs: list[str]) -> np.ndarray:
    counts = np.zeros([sizes[a] for a in attrs])
    np.add.at(counts, tuple(frame[a].to_numpy() for a in attrs), 1)
    return counts


# the parts ----------------------------------------------------------------------------------------
def steward_loads(story: Story) -> None:
    heading("1. The steward loads a sensitive table and sets its budget (command line)")
    story.run("init")
    story.run("dataset", "load", "adult", "--csv", str(ADULT / "adult_train.csv"), "--domain",
              str(ADULT / "adult-domain.json"), "--categorical", CATEGORICAL, "--quiet")
    # delta_reserve keeps some delta for (epsilon, delta) releases such as objective perturbation
    # after zCDP releases have started (docs/privacy.md, section 6.3).
    story.run("budget", "set", "adult", "--epsilon", "8", "--delta", "1e-5", "--delta-reserve", "3e-6")


def steward_releases(story: Story) -> None:
    heading("2. Releases: the only steps that spend budget")
    # before spending: which mechanism --mechanism auto (the default) would run, chosen from public inputs only
    story.run("release", "marginals", "adult", "--workload", "all-2way", "--epsilon", "2", "--delta", "1e-6",
              "--dry-run", as_json=True,
              summary=lambda p: f"auto would run {p['mechanism']} (rule {p['auto']['rule']}): {p['auto']['reason']}")
    plan = [
        ("laplace", ["--workload", "all-1way", "--epsilon", "0.5"]),
        ("gaussian", ["--workload", "target:income>50K", "--epsilon", "1", "--delta", "1e-6"]),
        ("mst", ["--epsilon", "1", "--delta", "1e-6"]),
        ("aim", ["--workload", "all-2way", "--epsilon", "2", "--delta", "1e-6", "--rounds", "30"]),
    ]
    for mechanism, args in plan:
        payload = story.run("release", "marginals", "adult", "--mechanism", mechanism, *args, "--quiet",
                            as_json=True, summary=release_summary)
        story.releases[mechanism] = int(payload["release_id"])


def release_summary(payload: dict) -> str:
    """A release's answer as the command prints it without --json: its cost, and what that cost in the
    budget's own epsilon (with the accountant's note when that is not simply its epsilon)."""
    from fractions import Fraction

    from service.accounting.accountant import BudgetEffect, describe_cost
    from service.privacy.cost import PrivacyCost

    cost = PrivacyCost(*(Fraction(str(payload["cost"][k])) for k in ("epsilon", "delta", "rho")))
    shown = payload["budget"]
    budget = BudgetEffect(*(Fraction(str(shown[k])) for k in ("epsilon_total", "epsilon_spent_before",
                                                               "epsilon_spent_after")), shown["note"])
    return (f"release {payload['release_id']} ({payload['mechanism']}) {payload['status']}: charged "
            f"{describe_cost(cost)}\n{budget.describe()}")


def free_answers(story: Story) -> None:
    from db.engine import make_engine
    from service.releases.answers import answer_marginal

    heading("3. Answers from releases are free: any marginal, from any release")
    story.run("marginal", str(story.releases["aim"]), "sex", "income>50K")
    frame = pd.read_csv(ADULT / "adult_train.csv")
    sizes = json.loads((ADULT / "adult-domain.json").read_text())
    engine = make_engine(f"sqlite:///{story.database}")
    print("\nL1 error / N of each release (true counts from the steward's own file, not from the service;"
          "\n* = the release did not measure that pair: the answer is its model's extrapolation):")
    print(f"{'marginal':<30}" + "".join(f"{m:>12}" for m in story.releases))
    for attrs in COMPARED:
        truth = true_marginal(frame, sizes, attrs)
        cells = []
        for mechanism, release_id in story.releases.items():
            answer = answer_marginal(engine, release_id, attrs)
            error = float(np.abs(np.asarray(answer["counts"]) - truth).sum() / len(frame))
            story.errors.setdefault(mechanism, []).append(error)
            story.measured.setdefault(mechanism, []).append(bool(answer["coverage"]["measured"]))
            cells.append(f"{error:.4f}{' ' if answer['coverage']['measured'] else '*'}")
        print(f"{' x '.join(attrs):<30}" + "".join(f"{c:>12}" for c in cells))
    engine.dispose()
    story.run("synth", str(story.releases["aim"]), "--rows", "1000", "--out", str(story.out / "synthetic-adult.csv"),
              "--force")


def analyst_fits(story: Story) -> None:
    from estimators.central.metrics import auc, mse
    from estimators.central.reference import LogisticReference, OLSReference
    from service.client import Client, FittedRegression

    heading("4. An analyst fits regressions in Python, through the HTTP API (never seeing a row)")
    analyst_key = story.run("keys", "create", "--role", "analyst", "--name", "ada", as_json=True)["key"]
    auditor_key = story.run("keys", "create", "--role", "auditor", "--name", "audrey", as_json=True)["key"]
    train = pd.read_csv(ADULT / "adult_train.csv")
    test = pd.read_csv(ADULT / "adult_test.csv")
    linear_features = [c for c in train.columns if c not in ("education", "education-num")]
    logistic_features = [c for c in train.columns if c not in ("education", "income>50K")]
    aim = story.releases["aim"]
    # The non-private yardsticks (the demo's own, from the file) are fitted while the server starts and answers.
    domain = Domain.from_json((ADULT / "adult-domain.json").read_text(), CATEGORICAL.split(","))
    designs = {"linear": DesignEncoding(domain, linear_features, "education-num", "linear", True),
               "logistic": DesignEncoding(domain, logistic_features, "income>50K", "logistic", True)}
    pool = ThreadPoolExecutor(max_workers=1)
    ols = pool.submit(lambda: OLSReference().fit(*designs["linear"].encode(train)))
    # lightly regularised (C=1): unpenalised, lbfgs needs a minute here for the same AUC
    logreg = pool.submit(lambda: LogisticReference(C=1.0).fit(*designs["logistic"].encode(train)))
    server = story.server()  # one server for the analysts and the participants (part 6)
    print(f"\nserver: {server.url} (log: {story.out / 'server.log'})")
    analyst, auditor = Client(server.url, analyst_key, progress=True), Client(server.url, auditor_key)
    print("\n>>> auditor.ledger('adult')   # before")
    print(auditor.ledger("adult")[LEDGER_COLUMNS].to_string(index=False))
    print("\n>>> analyst.fit_linear(...), analyst.fit_logistic(...)   # charging calls show their progress")
    linear = [
        ("dd-ssp (AIM release)", analyst.fit_linear("adult", "education-num", linear_features, release=aim)),
        ("adassp", analyst.fit_linear("adult", "education-num", linear_features, method="adassp",
                                      epsilon=0.5, delta=1e-6)),
    ]
    logistic = [
        ("dd-ssp (AIM release)", analyst.fit_logistic("adult", "income>50K", logistic_features, release=aim)),
        ("objpert", analyst.fit_logistic("adult", "income>50K", logistic_features, method="objpert",
                                         epsilon=0.5, delta=1e-6)),
    ]
    design = linear[0][1].design_
    assert design.to_dict() == designs["linear"].to_dict(), "the yardstick must encode as the service did"
    linear.append(("non-private OLS (yardstick)", ols.result()))
    logistic.append(("non-private logistic (yardstick)", logreg.result()))
    pool.shutdown()

    print("\nlinear regression of education-num (in its codes 0..15), test MSE on the 1,000-row split:")
    print(f"{'method':<34}{'release':>8}{'this call cost':>38}{'test MSE':>10}")
    X_test, _ = design.encode(test)
    for label, model in linear:
        predicted = (model.predict(test) if isinstance(model, FittedRegression)  # the target's own codes
                     else data_scale.target_codes(design, model.predict(X_test)))  # the yardstick, decoded
        print(f"{label:<34}{_release(model):>8}{_cost(model):>38}{mse(test['education-num'], predicted):>10.4f}")
    print("\nlogistic regression of income>50K, test AUC and mean predicted probability (positive rate "
          f"{(test['income>50K'] == 1).mean():.3f}):")
    print(f"{'method':<34}{'release':>8}{'this call cost':>38}{'AUC':>8}{'mean p':>8}")
    X_test, y_test = logistic[0][1].design_.encode(test)
    for label, model in logistic:
        proba = (model.predict_proba(test)[1] if isinstance(model, FittedRegression)  # columns named by class
                 else model.predict_proba(X_test)[:, 1])
        print(f"{label:<34}{_release(model):>8}{_cost(model):>38}{auc(y_test, proba):>8.3f}{proba.mean():>8.3f}")
    again = analyst.fit_linear("adult", "education-num", linear_features, release=aim)
    print(f"\nthe same DD-SSP question again: release {again.release_id}, cost {_cost(again)} (free)")
    print("\n>>> analyst.synthetic(aim_release, rows=5)")
    print(analyst.synthetic(aim, rows=5).to_string(index=False))
    story.ledger = auditor.ledger("adult")
    print("\n>>> auditor.ledger('adult')   # after")
    print(story.ledger[LEDGER_COLUMNS].to_string(index=False))


def _release(model: object) -> str:
    release_id = getattr(model, "release_id", None)
    return "-" if release_id is None else str(int(release_id))


def _cost(model: object) -> str:
    cost = getattr(model, "cost", None)
    if cost is None:
        return "(not a service answer)"
    parts = [f"{k}={v:.3g}" for k, v in cost.items() if v]
    return ", ".join(parts) or "0 (reused release)"


def auditor_recomputes(story: Story) -> None:
    heading("5. The auditor recomputes the spend with plain SQL")
    story.run("budget", "show", "adult")
    query = ("SELECT dataset, epsilon_total, epsilon_spent, delta_spent, rho_spent, epsilon_remaining "
             "FROM budget_remaining")
    print(f"\nsqlite> {query};")
    with sqlite3.connect(story.database) as connection:
        for row in connection.execute(query):
            print(row)
        sums = connection.execute("SELECT SUM(epsilon_units), SUM(delta_units), SUM(rho_units) "
                                  "FROM ledger_entries").fetchone()
    print(f"sums of the ledger in exact units (1e-12 for epsilon and rho, 1e-18 for delta): {sums}")


def picture(story: Story) -> None:
    """demo-output/demo.png: the ledger over time, and each mechanism's error on the compared marginals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (spent, errors) = plt.subplots(1, 2, figsize=(13, 4.8))
    ledger = story.ledger
    steps = np.arange(len(ledger))
    spent.step(steps, ledger["epsilon_spent_after"], where="post", color="tab:red")
    spent.axhline(8, color="grey", linestyle="--", label="budget epsilon = 8")
    for i, row in ledger.iterrows():
        if row["entry"] == "charge":
            spent.annotate(f"{row['mechanism']} (release {int(row['release_id'])})",
                           (i, row["epsilon_spent_after"]), textcoords="offset points",
                           xytext=(2, 8 if i % 2 else -14), fontsize=8)
    spent.set(xlabel="ledger entry", ylabel="epsilon spent (accountant's rule)", ylim=(0, 8.5),
              title="The privacy ledger over time (answers are free)")
    spent.legend(loc="upper left")
    width = 0.8 / len(story.errors)
    for k, (mechanism, values) in enumerate(story.errors.items()):
        bars = errors.bar(np.arange(len(COMPARED)) + k * width, values, width,
                          label=f"{mechanism} ({story.releases[mechanism]})")
        for bar, measured in zip(bars, story.measured[mechanism], strict=True):
            if not measured:
                bar.set_hatch("///")
                bar.set_edgecolor("white")
    errors.set_xticks(np.arange(len(COMPARED)) + 0.4 - width / 2, ["\n× ".join(a) for a in COMPARED], fontsize=8)
    errors.set(ylabel="L1 error / N", title="Error of each release on four marginals (hatched: extrapolated)")
    errors.legend(title="mechanism (release)", fontsize=8)
    figure.tight_layout()
    path = story.out / "demo.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    print(f"\nwrote {path}")


#: The demo's parts, in order. A later part (a local-DP collection, say) is one more entry.
def local_dp(story: Story) -> None:
    """Part 6: a local-DP collection (service/tools/demo/local.py)."""
    from service.client import Client
    from service.tools.demo.local import local_dp_collection

    local_dp_collection(story, heading, Client)


def console(story: Story) -> None:
    """Part 7: the web console, screenshotted (service/tools/demo/console.py)."""
    from service.tools.demo.console import console_screenshots

    console_screenshots(story, heading)


PARTS: list[Callable[[Story], None]] = [
    steward_loads, steward_releases, free_answers, analyst_fits, auditor_recomputes, picture, local_dp, console,
]


def main() -> None:
    if not ADULT.is_dir():
        raise SystemExit(f"the Adult table is not at {ADULT}; set MARGINALIA_SHARED_DATA")
    story = Story()
    story.out.mkdir(exist_ok=True)
    for stale in story.out.glob("marginalia.db*"):
        stale.unlink()
    shutil.rmtree(story.out / "marginalia-tables", ignore_errors=True)  # the Parquet tables of the last run
    started = time.monotonic()
    timings = []
    with story.running:
        for part in PARTS:
            begun = time.monotonic()
            part(story)
            timings.append((part.__name__, time.monotonic() - begun))
    print("\n" + "  ".join(f"{name} {seconds:.0f} s" for name, seconds in timings))
    print(f"the demo took {time.monotonic() - started:.0f} s; its database: {story.database}")


if __name__ == "__main__":
    main()
