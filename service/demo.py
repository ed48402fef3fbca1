"""``make demo``: the main job, end to end, on the embedded SQLite default.

On a fresh database in ``demo-output/``:

1. a **steward**, on the command line, loads the Adult training table and sets a budget;
2. releases marginals with each mechanism (laplace, gaussian, mst, aim): the only steps that spend;
3. answers marginals from those releases (free) and compares them with the true counts, which only
   the steward's own copy of the file can show;
4. an **analyst**, in Python through the HTTP client against a server started in the background on
   loopback, fits DD-SSP linear and logistic regressions from the AIM release (free), beside AdaSSP
   and objective perturbation (new releases, charged) and the non-private fit (computed here by the
   demo from the file, as a yardstick only), scored on the paper's 1,000-row test split;
5. an **auditor** reads the ledger through the API and recomputes the spend with plain SQL.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "demo-output"
DB = OUT / "marginalia.db"
DATA = Path(os.environ.get("MARGINALIA_SHARED_DATA", REPO.parent / "shared" / "data"))
ADULT = DATA / "adult"
CATEGORICAL = "workclass,education,marital-status,occupation,relationship,race,sex,native-country,income>50K"
MARGINALIA = str(Path(sys.executable).with_name("marginalia"))
ENV = {**os.environ, "MARGINALIA_DATABASE_URL": f"sqlite:///{DB}", "COLUMNS": "150"}


def run(*args: str, as_json: bool = False) -> object:
    """Run one CLI command against the demo database, echoing it like a terminal session."""
    print(f"\n$ marginalia {' '.join(shlex.quote(a) for a in args)}", flush=True)
    if not as_json:
        subprocess.run([MARGINALIA, *args], env=ENV, check=True)
        return None
    result = subprocess.run([MARGINALIA, *args, "--json"], env=ENV, capture_output=True, text=True, check=False)
    sys.stderr.write(result.stderr)
    if result.returncode != 0:
        sys.stderr.write(result.stdout)
        raise SystemExit(f"demo step failed: marginalia {' '.join(args)}")
    payload = json.loads(result.stdout)
    print(json.dumps(payload)[:300])
    return payload


def heading(text: str) -> None:
    print(f"\n{'=' * 100}\n== {text}\n{'=' * 100}", flush=True)


def true_marginal(frame: pd.DataFrame, sizes: dict[str, int], attrs: list[str]) -> np.ndarray:
    counts = np.zeros([sizes[a] for a in attrs])
    np.add.at(counts, tuple(frame[a].to_numpy() for a in attrs), 1)
    return counts


def steward_releases() -> dict[str, int]:
    heading("1. The steward loads a sensitive table and sets its budget (command line)")
    run("init")
    run("dataset", "load", "adult", "--csv", str(ADULT / "adult_train.csv"), "--domain",
        str(ADULT / "adult-domain.json"), "--categorical", CATEGORICAL, "--quiet")
    # delta_reserve keeps some delta for (epsilon, delta) releases such as objective perturbation
    # after zCDP releases have started (docs/privacy.md, section 6.3).
    run("budget", "set", "adult", "--epsilon", "8", "--delta", "1e-5", "--delta-reserve", "3e-6")

    heading("2. Releases: the only steps that spend budget")
    plan = [
        ("laplace", ["--workload", "all-1way", "--epsilon", "0.5"]),
        ("gaussian", ["--workload", "all-2way", "--epsilon", "1", "--delta", "1e-6", "--max-model-size", "4"]),
        ("mst", ["--epsilon", "1", "--delta", "1e-6"]),
        ("aim", ["--workload", "all-2way", "--epsilon", "2", "--delta", "1e-6"]),
    ]
    ids = {}
    for mechanism, args in plan:
        payload = run("release", "marginals", "adult", "--mechanism", mechanism, *args, as_json=True)
        ids[mechanism] = payload["release_id"]
    return ids


def compare_marginals(ids: dict[str, int]) -> None:
    heading("3. Answers from releases are free: any marginal, from any release")
    run("marginal", str(ids["aim"]), "sex", "income>50K")
    frame = pd.read_csv(ADULT / "adult_train.csv")
    sizes = json.loads((ADULT / "adult-domain.json").read_text())
    print("\nL1 error / N of each release (true counts from the steward's own file, not from the service):")
    print(f"{'marginal':<30}" + "".join(f"{m:>10}" for m in ids))
    for attrs in (["sex", "income>50K"], ["race", "sex"], ["relationship", "income>50K"], ["age", "hours-per-week"]):
        truth = true_marginal(frame, sizes, attrs)
        errors = []
        for release_id in ids.values():
            out = subprocess.run([MARGINALIA, "marginal", str(release_id), *attrs, "--json"], env=ENV,
                                 capture_output=True, text=True, check=True)
            errors.append(np.abs(np.asarray(json.loads(out.stdout)["counts"]) - truth).sum() / len(frame))
        print(f"{' x '.join(attrs):<30}" + "".join(f"{e:>10.4f}" for e in errors))
    run("synth", str(ids["aim"]), "--rows", "1000", "--out", str(OUT / "synthetic-adult.csv"), "--seed", "1")


def analyst_fits(ids: dict[str, int]) -> None:
    from estimators.metrics import auc, mse
    from estimators.reference import LogisticReference, OLSReference
    from service.api.server import background_server
    from service.client import Client

    heading("4. An analyst fits regressions in Python, through the HTTP API (never seeing a row)")
    analyst_key = run("keys", "create", "--role", "analyst", "--name", "ada", as_json=True)["key"]
    auditor_key = run("keys", "create", "--role", "auditor", "--name", "audrey", as_json=True)["key"]
    train = pd.read_csv(ADULT / "adult_train.csv")
    test = pd.read_csv(ADULT / "adult_test.csv")
    linear_features = [c for c in train.columns if c not in ("education", "education-num")]
    logistic_features = [c for c in train.columns if c not in ("education", "income>50K")]
    with background_server(f"sqlite:///{DB}", OUT / "server.log") as server:
        print(f"\nserver: {server.url} (log: {OUT / 'server.log'})")
        analyst, auditor = Client(server.url, analyst_key), Client(server.url, auditor_key)
        print("\n>>> auditor.ledger('adult')   # before")
        print(auditor.ledger("adult")[["entry_id", "entry", "release_id", "mechanism", "epsilon", "delta", "rho",
                                       "epsilon_spent_after"]].to_string(index=False))
        linear = [
            ("dd-ssp (AIM release)", analyst.fit_linear("adult", "education-num", linear_features,
                                                        release=ids["aim"])),
            ("adassp", analyst.fit_linear("adult", "education-num", linear_features, method="adassp",
                                          epsilon=0.5, delta=1e-6)),
        ]
        logistic = [
            ("dd-ssp (AIM release)", analyst.fit_logistic("adult", "income>50K", logistic_features,
                                                          release=ids["aim"])),
            ("objpert", analyst.fit_logistic("adult", "income>50K", logistic_features, method="objpert",
                                             epsilon=0.5, delta=1e-6)),
        ]
        reference_design = linear[0][1].design_
        X, y = reference_design.encode(train)
        linear.append(("non-private OLS (yardstick)", OLSReference().fit(X, y)))
        X, y = logistic[0][1].design_.encode(train)
        logistic.append(("non-private logistic (yardstick)", LogisticReference().fit(X, y)))

        print("\nlinear regression of education-num (scaled to [-1, 1]), test MSE on the 1,000-row split:")
        print(f"{'method':<34}{'release':>8}{'this call cost':>38}{'test MSE':>10}")
        X_test, y_test = reference_design.encode(test)
        for label, model in linear:
            cost = getattr(model, "cost", None)
            print(f"{label:<34}{getattr(model, 'release_id', '-')!s:>8}{_cost(cost):>38}"
                  f"{mse(y_test, model.predict(X_test)):>10.4f}")
        print("\nlogistic regression of income>50K, test AUC and mean predicted probability (positive rate "
              f"{(test['income>50K'] == 1).mean():.3f}):")
        print(f"{'method':<34}{'release':>8}{'this call cost':>38}{'AUC':>8}{'mean p':>8}")
        X_test, y_test = logistic[0][1].design_.encode(test)
        for label, model in logistic:
            cost = getattr(model, "cost", None)
            proba = model.predict_proba(X_test)[:, 1]
            print(f"{label:<34}{getattr(model, 'release_id', '-')!s:>8}{_cost(cost):>38}"
                  f"{auc(y_test, proba):>8.3f}{proba.mean():>8.3f}")
        again = analyst.fit_linear("adult", "education-num", linear_features, release=ids["aim"])
        print(f"\nthe same DD-SSP question again: release {again.release_id}, cost {again.cost} (free)")
        sample = analyst.synthetic(ids["aim"], rows=5)
        print("\n>>> analyst.synthetic(aim_release, rows=5)")
        print(sample.to_string(index=False))
        print("\n>>> auditor.ledger('adult')   # after")
        print(auditor.ledger("adult")[["entry_id", "entry", "release_id", "mechanism", "epsilon", "delta", "rho",
                                       "epsilon_spent_after"]].to_string(index=False))


def _cost(cost: dict[str, float] | None) -> str:
    if cost is None:
        return "(not a service answer)"
    parts = [f"{k}={v:.3g}" for k, v in cost.items() if v]
    return ", ".join(parts) or "0 (reused release)"


def audit() -> None:
    heading("5. The auditor recomputes the spend with plain SQL")
    run("budget", "show", "adult")
    query = ("SELECT dataset, epsilon_total, epsilon_spent, delta_spent, rho_spent, epsilon_remaining "
             "FROM budget_remaining")
    print(f"\nsqlite> {query};")
    with sqlite3.connect(DB) as connection:
        for row in connection.execute(query):
            print(row)
        sums = connection.execute("SELECT SUM(epsilon_units), SUM(delta_units), SUM(rho_units) "
                                  "FROM ledger_entries").fetchone()
    print(f"sums of the ledger in exact units (1e-12 for epsilon and rho, 1e-18 for delta): {sums}")
    print(f"\nDemo database: {DB}")


def main() -> None:
    if not ADULT.is_dir():
        raise SystemExit(f"the Adult table is not at {ADULT}; set MARGINALIA_SHARED_DATA")
    OUT.mkdir(exist_ok=True)
    for stale in OUT.glob("marginalia.db*"):
        stale.unlink()
    ids = steward_releases()
    compare_marginals(ids)
    analyst_fits(ids)
    audit()


if __name__ == "__main__":
    main()
