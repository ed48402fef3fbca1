"""``make demo``'s local-DP part, part 6 of :mod:`service.tools.demo.story` (under a minute): a collection where no raw
value ever reaches the service.

1. a **steward**, on the command line, registers a public unlabeled table and creates a ``stein-glm`` campaign with
   the defaults (participants send only ``y (1, x)`` through the pure-epsilon l2-ball randomizer; ``X^T X``, the
   standardization and the norm bound come from the public rows: Remark 11; the intercept is estimated);
2. one **participant** reports from "her phone" through the Python client (randomized on the device), and a
   population of simulated participants reports through the simulator (the real randomizer, the real batch path);
3. an **analyst**, through the HTTP client, fits five GLMs from that one collection (Remark 16), each free, beside the
   non-private logistic fit the demo computes from its own file (a yardstick only);
4. an **auditor** reads the local spend with plain SQL.

The population is synthetic (the Stein-lemma estimators assume Gaussian features): four features with their own
means and scales, labels from a logistic model. Nothing is seeded.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

FEATURES = ["income", "age", "hours", "commute"]
MEANS = np.array([50.0, 40.0, 38.0, 25.0])
SCALES = np.array([15.0, 12.0, 8.0, 10.0])
#: the logistic model on the standardized features (its intercept is 0, as Stein's lemma wants)
TRUE_W = np.array([0.8, -0.5, 0.4, 0.0])
PARTICIPANTS = 200_000
PUBLIC_ROWS = 10_000
MODELS = ("linear", "logistic", "probit", "poisson", "cubic")


def population(rows: int, labels: bool) -> pd.DataFrame:
    rng = np.random.default_rng()
    standardized = rng.normal(size=(rows, len(FEATURES)))
    frame = pd.DataFrame(standardized * SCALES + MEANS, columns=FEATURES)
    if labels:
        frame["renewed"] = (rng.random(rows) < 1.0 / (1.0 + np.exp(-standardized @ TRUE_W))).astype(int)
    return frame


def true_raw_coefficients() -> dict[str, float]:
    """The logistic model on the features' own scale (what a perfect fit would return)."""
    raw = TRUE_W / SCALES
    return {**dict(zip(FEATURES, raw.tolist(), strict=True)), "(intercept)": float(-(raw @ MEANS))}


def local_dp_collection(story: Any, heading: Any, background_server: Any, client_class: Any) -> None:
    """The demo part (``story``: the demo's shared state; the other arguments: the demo's helpers)."""
    from estimators.central.metrics import auc
    from service.client import Device

    heading("6. A local-DP collection: participants randomize on their side; one collection answers many GLMs")
    out: Path = story.out
    population(PUBLIC_ROWS, labels=False).to_csv(out / "public.csv", index=False)
    people = population(PARTICIPANTS, labels=True)
    people.iloc[1:].to_csv(out / "people.csv", index=False)
    story.run("public", "load", "households", "--csv", str(out / "public.csv"))
    story.run("campaign", "create", "renewals", "--protocol", "stein-glm", "--features", ",".join(FEATURES),
              "--target", "renewed", "--public", "households", "--epsilon", "8", "--participants",
              str(PARTICIPANTS))
    participant_key = story.run("keys", "create", "--role", "participant", "--name", "pat", as_json=True)["key"]
    analyst_key = story.run("keys", "create", "--role", "analyst", "--name", "ana", as_json=True)["key"]
    with background_server(f"sqlite:///{story.database}", out / "server-local.log") as server:
        # the phone's own ceilings (the defaults: epsilon 10, delta 1e-4 per report and in all); its spend in memory,
        # so that the demo writes nothing into the reader's ~/.marginalia
        phone = client_class(server.url, participant_key, device=Device(spend_file=None))
        first = people.iloc[0]
        print(f"\n>>> phone.campaign('renewals').submit(x={first[FEATURES].tolist()}, y={int(first['renewed'])})")
        print(phone.campaign("renewals").submit(first[FEATURES].to_numpy(dtype=float), float(first["renewed"])))
        print(">>> phone.campaign('renewals').state()['you']")
        print(phone.campaign("renewals").state()["you"])
        story.run("simulate", "renewals", "--csv", str(out / "people.csv"))
        analyst = client_class(server.url, analyst_key)
        models = {model: analyst.campaign("renewals").fit(model) for model in MODELS}
    from estimators.central.reference import LogisticReference

    labels = np.where(people["renewed"].to_numpy() == 1, 1.0, -1.0)
    yardstick = LogisticReference().fit(people[FEATURES].to_numpy(), labels)
    test = population(20_000, labels=True)
    x_test, y_test = test[FEATURES].to_numpy(), test["renewed"].to_numpy()
    truth = true_raw_coefficients()
    print("\n>>> analyst.campaign('renewals').fit(model)   # five models from one collection, each cost 0")
    print(f"{'model':<34}" + "".join(f"{name:>12}" for name in [*FEATURES, "(intercept)"]) + f"{'test AUC':>10}"
          + f"{'mean pred':>11}")
    for model, fitted in models.items():
        score = fitted.decision_function(x_test)
        row = "".join(f"{fitted.answer['coefficients'][name]:>12.4f}" for name in [*FEATURES, "(intercept)"])
        print(f"{model + ' (local DP, cost 0)':<34}{row}{auc(y_test, score):>10.3f}"
              f"{float(np.mean(fitted.predict_mean(x_test))):>11.3f}")
    reference = [*np.ravel(yardstick.coef_).tolist(), float(np.ravel([yardstick.intercept_])[0])]
    print(f"{'non-private logistic (yardstick)':<34}" + "".join(f"{v:>12.4f}" for v in reference)
          + f"{auc(y_test, yardstick.decision_function(x_test)):>10.3f}")
    print(f"{'the true logistic model':<34}" + "".join(f"{truth[n]:>12.4f}" for n in [*FEATURES, '(intercept)']))
    print(f"(linear is the private OLS; each link rescales it by its own constant and finds its own intercept over the "
          f"public rows; 'mean pred' is the mean predicted E[y] on test rows, base rate {float(np.mean(y_test)):.3f}: "
          "the AUC is shared by every rescaled link, the calibration is not)")
    queries = [
        "SELECT campaign, epsilon, delta, participants, reports, max_epsilon_spent FROM campaign_local_guarantee",
        "SELECT namespace, COUNT(*) AS participants, MAX(epsilon) AS most_spent, MIN(epsilon_remaining) "
        "FROM participant_local_spend GROUP BY namespace",
    ]
    with sqlite3.connect(story.database) as connection:
        for query in queries:
            print(f"\nsqlite> {query};")
            for row in connection.execute(query):
                print(row)
