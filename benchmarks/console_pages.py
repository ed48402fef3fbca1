"""Server time of the web console's pages on a busy service database (issue 32: p50 under 100 ms with 200 releases
and 2,000 ledger entries).

The database: the titanic table with a budget, 200 Laplace releases of one or two columns (each a ledger charge) and
1,800 budget changes (ledger rows too), 2,000 ledger entries in all; a steward, an analyst and an auditor key. Each
page is requested ``--requests`` times in-process (FastAPI's TestClient: the server's work plus the test client's
small overhead, no network) after one warm-up request; reported per page: p50 and p95 in milliseconds and the answer's
size. The quality view (which counts the table) and the job page are included; the POST actions (a preview, a
release) are timed too, the release's job left to run.

    .venv/bin/python -m benchmarks.console_pages [--requests 30] [--releases 200] [--entries 2000]

Writes benchmarks/results/console_pages.json.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

from benchmarks import harness
from benchmarks.harness import DATA

TARGET_MS = 100.0


def build(engine, releases: int, entries: int) -> dict[str, object]:  # noqa: ANN001
    from service.access import auth
    from service.accounting import accountant
    from service.data import datasets
    from service.releases import engine as release_engine

    folder = DATA / "titanic"
    datasets.load_coded_csv(engine, "titanic", folder / "titanic.csv", folder / "titanic-domain.json",
                            ("Sex", "Embarked"))
    accountant.set_budget(engine, "titanic", 1000.0, 1e-5)
    columns = ["Survived", "Pclass", "Sex", "SibSp", "Parch", "Embarked", "Cabin"]
    ids = []
    for i in range(releases):
        workload = [[columns[i % len(columns)]], [columns[(i + 1) % len(columns)], columns[(i + 3) % len(columns)]]]
        ids.append(release_engine.release_marginals(engine, "titanic", "laplace", workload, epsilon=0.01).release_id)
    for i in range(entries - releases - 1):
        accountant.set_budget(engine, "titanic", 1000.0 + (i % 7), 1e-5)
    keys = {role: auth.create_key(engine, role, f"bench {role}")[1] for role in ("steward", "analyst", "auditor")}
    return {"keys": keys, "release": ids[-1], "ledger": len(accountant.ledger_rows(engine, "titanic"))}


def sign_in(client, key: str) -> str:  # noqa: ANN001
    page = client.get("/console/sign-in")
    token = re.search(r'name="sign_in_token" value="([^"]+)"', page.text).group(1)
    client.post("/console/sign-in", data={"key": key, "sign_in_token": token}, follow_redirects=False)
    return re.search(r'name="csrf_token" value="([^"]+)"', client.get("/console/datasets").text).group(1)


def timed(call, requests: int) -> dict[str, float]:  # noqa: ANN001
    call()  # warm
    times, size = [], 0
    for _ in range(requests):
        start = time.perf_counter()
        answer = call()
        times.append(1000 * (time.perf_counter() - start))
        assert answer.status_code in (200, 303), (answer.status_code, answer.text[:300])
        size = len(answer.content)
    times.sort()
    return {"p50_ms": statistics.median(times), "p95_ms": times[int(0.95 * (len(times) - 1))], "bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--releases", type=int, default=200)
    parser.add_argument("--entries", type=int, default=2000)
    harness.add_outputs(parser, "console_pages")
    args = parser.parse_args()
    from fastapi.testclient import TestClient

    from service.api import create_app

    with harness.temporary_folder("marginalia-console-bench-") as folder:
        engine = harness.temporary_database(folder / "console.db")
        world = build(engine, args.releases, args.entries)
        app = create_app(engine, console_secret="a benchmark secret of forty characters!")
        release = world["release"]
        pages = {
            "steward": ["/console/datasets", "/console/datasets/titanic", "/console/releases",
                        f"/console/releases/{release}", "/console/datasets/titanic/ledger",
                        "/console/datasets/titanic/plan", f"/console/releases/{release}/quality?columns=Pclass"
                        "&columns=Survived", "/console/campaigns"],
            "analyst": ["/console/datasets", "/console/releases", f"/console/releases/{release}",
                        f"/console/releases/{release}/marginal?columns=Pclass&columns=Survived",
                        f"/console/releases/{release}/marginal.csv?columns=Pclass&columns=Survived",
                        "/console/datasets/titanic/fit"],
            "auditor": ["/console/datasets", "/console/datasets/titanic/ledger",
                        "/console/datasets/titanic/ledger.csv"],
        }
        results: dict[str, dict[str, float]] = {}
        for role, paths in pages.items():
            client = TestClient(app)
            token = sign_in(client, world["keys"][role])  # type: ignore[index]
            for path in paths:
                results[f"{role} GET {path}"] = timed(lambda p=path, c=client: c.get(p), args.requests)
                print(f"{role:8s} {path:70s} p50 {results[f'{role} GET {path}']['p50_ms']:7.1f} ms", flush=True)
            if role == "steward":
                form = {"csrf_token": token, "workload": "all-1way", "mechanism": "gaussian", "aim": "epsilon",
                        "epsilon": "0.5", "delta": "1e-7"}
                results["steward POST preview (gaussian, all 1-way)"] = timed(
                    lambda c=client, f=form: c.post("/console/datasets/titanic/plan", data=f), args.requests)
        engine.dispose()
    worst = max(r["p50_ms"] for r in results.values())
    payload = {"machine": harness.machine(), "releases": args.releases, "ledger_entries": world["ledger"],
               "requests_per_page": args.requests, "target_p50_ms": TARGET_MS, "worst_p50_ms": worst,
               "meets_target": worst < TARGET_MS, "pages": results}
    harness.write_json(args.json, payload)
    print(f"worst p50 {worst:.1f} ms (target {TARGET_MS:.0f} ms): {'met' if worst < TARGET_MS else 'MISSED'}; "
          f"wrote {args.json}")


if __name__ == "__main__":
    main()
