"""``make demo``'s local-DP part, part 6 of :mod:`service.tools.demo.story` (about a minute): a collection where no raw
value ever reaches the service.

1. a **steward**, on the command line, registers a public table (an earlier survey: the features and whether those
   households renewed), plans a campaign (``campaign plan``: the error and the AUC range expected at this epsilon and
   n, before any report, free) and creates it with the protocol's defaults (:data:`PROTOCOL`, the one place the
   protocol is named; nothing hand-tuned: with ``glm``, the recommended GLM protocol, each participant sends one
   PrivUnit2 report of ``(y - 1/2) z`` with ``z`` her features whitened by the public table's constants and mapped
   to the unit sphere; every link is the root of its own moment equation over the public rows, with an intercept);
2. one **participant** reports from "her phone" through the Python client (randomized on the device), and a
   population of simulated participants reports through the simulator (the real randomizer, the real batch path);
3. an **analyst**, through the HTTP client, fits four GLMs from that one collection (Remark 16), each free, beside the
   non-private logistic fit the demo computes from its own file (a yardstick only): the test AUC, which the links
   nearly share, and beside it what differs between models, the calibration (mean predicted probability
   against the base rate) and the log loss on held-out rows; when the noise dominates (the plan's relative error is 1
   or more) the demo says so;
4. an **auditor** reads the local spend with plain SQL.

The population is synthetic: four features with their own means and scales, labels from a logistic model. Nothing is
seeded.
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
#: the logistic model on the standardized features (intercept 0 on the standardized scale)
TRUE_W = np.array([0.8, -0.5, 0.4, 0.0])
PARTICIPANTS = 200_000
PUBLIC_ROWS = 10_000
MODELS = ("logistic", "probit", "linear", "poisson")
#: the campaign's protocol and local delta (0: its default randomizer is pure epsilon): the one place to switch the
#: demo to another protocol
PROTOCOL, DELTA = "glm", 0.0
EPSILON = 2.0
#: predicted probabilities are clipped to [CLIP, 1 - CLIP] for the log loss (a linear score can leave [0, 1])
CLIP = 1e-6


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


def campaign_arguments() -> list[str]:
    """The steward's ``campaign plan`` / ``campaign create`` arguments: the protocol's defaults, nothing hand-tuned."""
    return ["--protocol", PROTOCOL, "--features", ",".join(FEATURES), "--target", "renewed", "--public",
            "households", "--epsilon", f"{EPSILON:g}", *(["--delta", f"{DELTA:g}"] if DELTA else [])]


def plan_summary(plan: dict[str, Any]) -> str:
    """The plan in two lines: the expected error (what it measures), the AUC range and the planned standard errors."""
    auc = plan["auc"]
    return (f"expected relative error {plan['expected_relative_error']:.3g} (of {plan['metric']}); "
            f"AUC {auc['mean']:.3f} ({auc['low']:.3f} to {auc['high']:.3f})\nstandard errors "
            + ", ".join(f"{k} {v:.3g}" for k, v in plan["standard_errors"].items()))


def calibration(mean: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """``(mean predicted probability, log loss)`` of predicted means ``E[y | x]`` on held-out binary ``labels``: what
    differs between models that share an AUC (a link rescales the same score)."""
    p = np.clip(np.asarray(mean, dtype=float), CLIP, 1.0 - CLIP)
    y = np.asarray(labels, dtype=float)
    return float(p.mean()), float(-np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p)))


def verdict(plan: dict[str, Any]) -> str:
    """What the plan said before any report, and whether the noise dominates (a predicted relative error of 1 or more:
    the error is as large as the coefficients themselves)."""
    error, auc = plan["expected_relative_error"], plan["auc"]
    said = (f"the plan predicted a relative error of {error:.2f} and a test AUC of {auc['mean']:.2f} (5-95%: "
            f"{auc['low']:.2f} to {auc['high']:.2f}; the public sample's own fit {auc['reference']:.2f})")
    if error >= 1.0:
        return (f"Noise-dominated: {said}, before any report: at epsilon {EPSILON:g} with {PARTICIPANTS:,} "
                f"participants {PROTOCOL}'s defaults cannot tell the coefficients from the noise, as the fits show")
    return f"As planned: {said}"


def local_dp_collection(story: Any, heading: Any, client_class: Any) -> None:
    """The demo part (``story``: the demo's shared state and its server; the other arguments: the demo's helpers)."""
    from estimators.central.metrics import auc
    from service.client import Device, MarginaliaError

    heading("6. A local-DP collection: participants randomize on their side; one collection answers many GLMs")
    out: Path = story.out
    population(PUBLIC_ROWS, labels=True).to_csv(out / "public.csv", index=False)  # an earlier survey, public
    people = population(PARTICIPANTS, labels=True)
    people.iloc[1:].to_csv(out / "people.csv", index=False)
    story.run("public", "load", "households", "--csv", str(out / "public.csv"))
    plan = story.run("campaign", "plan", *campaign_arguments(), "--participants", str(PARTICIPANTS), "--option",
                     f"participants={PARTICIPANTS}", as_json=True, summary=plan_summary)  # the campaign created below
    story.run("campaign", "create", "renewals", *campaign_arguments(), "--participants", str(PARTICIPANTS))
    participant_key = story.run("keys", "create", "--role", "participant", "--name", "pat", as_json=True)["key"]
    analyst_key = story.run("keys", "create", "--role", "analyst", "--name", "ana", as_json=True)["key"]
    server = story.server()  # the demo's one server (part 4 started it)
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
    models: dict[str, Any] = {}
    for model in MODELS:  # a noise-dominated collection may leave a link without its constant: say which
        try:
            models[model] = analyst.campaign("renewals").fit(model)
        except MarginaliaError as error:
            models[model] = error
    from estimators.central.reference import LogisticReference

    labels = np.where(people["renewed"].to_numpy() == 1, 1.0, -1.0)
    yardstick = LogisticReference().fit(people[FEATURES].to_numpy(), labels)
    test = population(20_000, labels=True)
    x_test, y_test = test[FEATURES].to_numpy(), test["renewed"].to_numpy()
    truth = true_raw_coefficients()
    print(f"\n>>> analyst.campaign('renewals').fit(model)   # {len(MODELS)} models from one collection, each cost 0")
    print(verdict(plan))
    print(f"held-out rows: {len(y_test):,}, base rate {y_test.mean():.3f}; mean p = mean predicted probability "
          f"(clipped to [0, 1]), log loss with p clipped to [{CLIP:g}, 1 - {CLIP:g}]")
    print(f"{'model':<34}" + "".join(f"{name:>12}" for name in [*FEATURES, "(intercept)"])
          + f"{'test AUC':>10}{'mean p':>8}{'log loss':>10}")
    for model, fitted in models.items():
        if isinstance(fitted, Exception):
            print(f"{model + ' (local DP, cost 0)':<34}no answer: {fitted.code}: {fitted.message[:160]}")
            continue
        score = fitted.decision_function(x_test)
        mean_p, loss = calibration(np.clip(fitted.predict_mean(x_test), 0.0, 1.0), y_test)
        row = "".join(f"{fitted.answer['coefficients'][name]:>12.4f}" for name in [*FEATURES, "(intercept)"])
        print(f"{model + ' (local DP, cost 0)':<34}{row}{auc(y_test, score):>10.3f}{mean_p:>8.3f}{loss:>10.3f}")
    reference = [*np.ravel(yardstick.coef_).tolist(), float(np.ravel([yardstick.intercept_])[0])]
    mean_p, loss = calibration(yardstick.predict_proba(x_test)[:, 1], y_test)
    print(f"{'non-private logistic (yardstick)':<34}" + "".join(f"{v:>12.4f}" for v in reference)
          + f"{auc(y_test, yardstick.decision_function(x_test)):>10.3f}{mean_p:>8.3f}{loss:>10.3f}")
    print(f"{'the true logistic model':<34}" + "".join(f"{truth[n]:>12.4f}" for n in [*FEATURES, '(intercept)']))
    mean_p, loss = calibration(np.full(len(y_test), y_test.mean()), y_test)
    print(f"{'the base rate alone':<34}" + " " * 12 * (len(FEATURES) + 1) + f"{0.5:>10.3f}{mean_p:>8.3f}{loss:>10.3f}")
    print(f"(each link is the root of its own moment equation over the public rows, from the same reports: the "
          f"rankings (AUC) nearly agree, the calibration and log loss tell the links apart; {PROTOCOL} with its "
          f"defaults, epsilon {EPSILON:g})")
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
