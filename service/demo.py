"""``make demo``: the main job, end to end, on the embedded SQLite default.

It drives the real ``marginalia`` command line (each command is printed before it runs), on a
fresh database in ``demo-output/``:

1. a steward loads the Adult table and sets a budget;
2. releases marginals with each mechanism (laplace, gaussian, mst, aim);
3. answers marginals from the releases (free) and compares them with the true counts, which only
   the steward's own copy of the file can show;
4. draws synthetic rows, and prints the budget and the ledger an auditor would read.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "demo-output"
DATA = Path(os.environ.get("MARGINALIA_SHARED_DATA", REPO.parent / "shared" / "data"))
ADULT = DATA / "adult"
CATEGORICAL = "workclass,education,marital-status,occupation,relationship,race,sex,native-country,income>50K"
MARGINALIA = str(Path(sys.executable).with_name("marginalia"))


def run(*args: str, capture_json: bool = False) -> object:
    """Run one CLI command against the demo database, echoing it like a terminal session."""
    print(f"\n$ marginalia {' '.join(shlex.quote(a) for a in args)}", flush=True)
    env = {**os.environ, "MARGINALIA_DATABASE_URL": f"sqlite:///{OUT / 'marginalia.db'}"}
    if capture_json:
        result = subprocess.run([MARGINALIA, *args, "--json"], env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            sys.stderr.write(result.stderr + result.stdout)
            raise SystemExit(f"demo step failed: marginalia {' '.join(args)}")
        sys.stderr.write(result.stderr)
        payload = json.loads(result.stdout)
        print(json.dumps(payload, indent=2)[:1500])
        return payload
    subprocess.run([MARGINALIA, *args], env=env, check=True)
    return None


def true_marginal(frame: pd.DataFrame, sizes: dict[str, int], attrs: list[str]) -> np.ndarray:
    counts = np.zeros([sizes[a] for a in attrs])
    np.add.at(counts, tuple(frame[a].to_numpy() for a in attrs), 1)
    return counts


def main() -> None:
    if not ADULT.is_dir():
        raise SystemExit(f"the Adult table is not at {ADULT}; set MARGINALIA_SHARED_DATA")
    OUT.mkdir(exist_ok=True)
    for stale in OUT.glob("marginalia.db*"):
        stale.unlink()

    print("== 1. The steward loads a sensitive table and sets its budget")
    run("init")
    run("dataset", "load", "adult", "--csv", str(ADULT / "adult.csv"), "--domain", str(ADULT / "adult-domain.json"),
        "--categorical", CATEGORICAL)
    run("dataset", "show", "adult")
    run("budget", "set", "adult", "--epsilon", "6", "--delta", "1e-5")

    print("\n== 2. Releases: the only steps that spend budget")
    releases = {}
    plan = [
        ("laplace", ["--workload", "all-1way", "--epsilon", "0.5"]),
        ("gaussian", ["--workload", "all-2way", "--epsilon", "1", "--delta", "1e-6"]),
        ("mst", ["--epsilon", "1", "--delta", "1e-6"]),
        ("aim", ["--workload", "target:income>50K", "--epsilon", "1", "--delta", "1e-6", "--max-model-size", "20"]),
    ]
    for mechanism, args in plan:
        payload = run("release", "marginals", "adult", "--mechanism", mechanism, *args, "--seed", "7", "--quiet",
                      capture_json=True)
        releases[mechanism] = payload["release_id"]

    print("\n== 3. Answers from releases are free: any marginal, from any release")
    frame = pd.read_csv(ADULT / "adult.csv")
    sizes = json.loads((ADULT / "adult-domain.json").read_text())
    questions = [["sex", "income>50K"], ["race", "sex"], ["relationship", "income>50K"], ["age"]]
    run("marginal", str(releases["aim"]), "sex", "income>50K")
    print("\nL1 error / N of each release on a few marginals (true counts from the steward's own file):")
    header = f"{'marginal':<28}" + "".join(f"{m:>10}" for m in releases)
    print(header)
    env = {**os.environ, "MARGINALIA_DATABASE_URL": f"sqlite:///{OUT / 'marginalia.db'}"}
    for attrs in questions:
        truth = true_marginal(frame, sizes, attrs)
        errors = []
        for release_id in releases.values():
            out = subprocess.run([MARGINALIA, "marginal", str(release_id), *attrs, "--json"], env=env,
                                 capture_output=True, text=True, check=True)
            answer = np.asarray(json.loads(out.stdout)["counts"])
            errors.append(np.abs(answer - truth).sum() / len(frame))
        print(f"{' x '.join(attrs):<28}" + "".join(f"{e:>10.4f}" for e in errors))

    print("\n== 4. Synthetic rows, the budget, and the ledger an auditor reads")
    run("synth", str(releases["aim"]), "--rows", "1000", "--out", str(OUT / "synthetic-adult.csv"), "--seed", "1")
    run("budget", "show", "adult")
    run("ledger", "adult")
    print(f"\nDemo database: {OUT / 'marginalia.db'} (open it with sqlite3 and SELECT * FROM budget_remaining)")


if __name__ == "__main__":
    main()
