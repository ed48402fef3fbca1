"""What the console's pages show and do, through the pages as a person uses them: the planner's preview is the
charge the release makes; the auditor's SQL figures are the accountant's; a marginal's chart has an interval per
cell and its CSV every cell; bad input is a page naming the field, with nothing stored."""

from __future__ import annotations

import csv
import io
import re
import time

from fastapi.testclient import TestClient

from service.accounting import accountant
from service.api import create_app
from service.api.console import formats
from service.data import datasets
from service.releases import planning
from tests.support.apihelpers import World, table_counts
from tests.support.console import SECRET, csrf_of, form_value, sign_in


def signed_in(world: World, role: str) -> TestClient:
    client = TestClient(create_app(world.engine, console_secret=SECRET), raise_server_exceptions=False)
    assert sign_in(client, world.keys[role]) == 303
    return client


def finished(client: TestClient, job_page: str) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = client.get(job_page + "/progress").json()
        if state["state"] != "running":
            return client.get(job_page).text
        time.sleep(0.05)
    raise AssertionError("the release job did not end")


def test_the_preview_is_the_charge_the_release_makes(world: World) -> None:
    """Plan -> preview -> release -> its job -> the ledger: the charge previewed (the page's figure and the dry run's
    exact one) is the ledger's, to the last unit."""
    client = signed_in(world, "steward")
    form = {"csrf_token": csrf_of(client), "workload": "columns", "columns": ["Pclass", "Sex"], "mechanism": "gaussian",
            "aim": "epsilon", "epsilon": "0.3", "delta": "1e-7"}
    preview = client.post(f"/console/datasets/{world.dataset}/plan", data=form)
    assert preview.status_code == 200, preview.text
    shown = re.search(r"Release: charge epsilon ([0-9.e-]+)", preview.text).group(1)
    exact = planning.plan_marginals(world.engine, world.dataset, "gaussian", [["Pclass", "Sex"]], epsilon="0.3",
                                    delta="1e-7")
    assert shown == formats.epsilon(exact.to_json()["epsilon_charged"])
    before = accountant.ledger_rows(world.engine, world.dataset)
    confirm = {name: form_value(preview.text.split('action="/console/datasets/titanic/release"')[1], name)
               for name in ("workload", "mechanism", "epsilon", "delta", "csrf_token")}
    started = client.post(f"/console/datasets/{world.dataset}/release", data={**confirm, "columns": ["Pclass", "Sex"]},
                          follow_redirects=False)
    assert started.status_code == 303 and started.headers["location"].startswith("/console/jobs/")
    page = finished(client, started.headers["location"])
    assert 'id="job-done">Done' in page
    after = accountant.ledger_rows(world.engine, world.dataset)
    charge = after[len(before):]
    assert [row["entry"] for row in charge] == ["charge"]
    spent = charge[0]["epsilon_spent_after"] - before[-1]["epsilon_spent_after"]
    assert abs(spent - exact.to_json()["epsilon_charged"]) < 1e-12
    release_id = charge[0]["release_id"]
    assert f"/console/releases/{release_id}" in page
    assert f"epsilon spent {formats.epsilon(before[-1]['epsilon_spent_after'])} → " \
           f"{formats.epsilon(charge[0]['epsilon_spent_after'])}" in page


def test_a_target_error_is_solved_for_and_released_at_that_epsilon(world: World) -> None:
    client = signed_in(world, "steward")
    form = {"csrf_token": csrf_of(client), "workload": "columns", "columns": ["Sex"], "mechanism": "laplace",
            "aim": "target", "epsilon": "", "target_error": "0.05"}
    preview = client.post(f"/console/datasets/{world.dataset}/plan", data=form)
    solved = planning.plan_marginals(world.engine, world.dataset, "laplace", [["Sex"]], target_error="0.05")
    epsilon = f"{float(solved.target.epsilon):g}"
    assert "the smallest epsilon that meets it" in preview.text
    confirm = preview.text.split('action="/console/datasets/titanic/release"')[1]
    assert form_value(confirm, "epsilon") == epsilon and form_value(confirm, "aim") == "epsilon"


def test_bad_input_is_a_page_naming_the_field_and_nothing_is_stored(world: World) -> None:
    client = signed_in(world, "steward")
    before = table_counts(world.engine)
    bad = [({"epsilon": "lots"}, "epsilon"), ({"workload": "columns", "columns": []}, "columns"),
           ({"workload": "columns", "columns": ["Nope"]}, "Nope"), ({"mechanism": "magic"}, "mechanism")]
    for change, named in bad:
        form = {"csrf_token": csrf_of(client), "workload": "all-1way", "mechanism": "laplace", "aim": "epsilon",
                "epsilon": "0.1", **change}
        for action in ("plan", "release"):
            answer = client.post(f"/console/datasets/{world.dataset}/{action}", data=form, follow_redirects=False)
            assert answer.status_code in (400, 404, 422) and named in answer.text, (action, change, answer.text[-600:])
    assert table_counts(world.engine) == before


def test_the_auditors_sql_figures_are_the_accountants(world: World) -> None:
    """Every figure of the ledger page's SQL ran as shown; the composed epsilon it gives is `budget show`'s, and the
    recomputation agrees."""
    page = signed_in(world, "auditor").get(f"/console/datasets/{world.dataset}/ledger").text
    results = re.findall(r'<table class="result">.*?<tbody>(.*?)</tbody>', page, re.S)
    cells = [re.findall(r"<td>(.*?)</td>", result) for result in results]
    status = accountant.budget_status(world.engine, world.dataset).to_json()
    assert int(cells[0][0]) / 1e12 == status["epsilon_spent"]
    assert cells[1][0] == cells[1][1] == cells[0][0] and cells[1][2] == "1"
    assert "SELECT epsilon_spent_units FROM budget_remaining WHERE dataset = &#39;titanic&#39;" in page
    entries = accountant.ledger_rows(world.engine, world.dataset)
    # one point of the timeline per entry of a release, each opening it
    assert page.count('class="point"') == len([e for e in entries if e["release_id"] is not None]) >= 1
    assert page.count('<a href="/console/releases/') >= page.count('class="point"')


def test_a_marginal_has_an_interval_per_cell_and_its_csv_every_cell(world: World) -> None:
    client = signed_in(world, "analyst")
    page = client.get(f"/console/releases/{world.release_id}/marginal", params={"columns": ["Pclass", "Survived"]})
    assert page.status_code == 200
    bars, whiskers = page.text.count('class="bar"'), page.text.count('class="whisker"')
    assert bars == 9 and whiskers == 3 * 9 and "95 % interval" in page.text
    table = client.get(f"/console/releases/{world.release_id}/marginal.csv", params={"columns": ["Pclass", "Survived"]})
    rows = list(csv.DictReader(io.StringIO(table.text)))
    assert len(rows) == 9 and set(rows[0]) == {"Pclass", "Survived", "count", "standard_error", "ci95_low", "ci95_high"}
    low, count, high = (float(rows[0][k]) for k in ("ci95_low", "count", "ci95_high"))
    assert low < count < high and "attachment" in table.headers["content-disposition"]
    synthetic = client.get(f"/console/releases/{world.release_id}/synthetic.csv", params={"rows": 7})
    assert len(list(csv.reader(io.StringIO(synthetic.text)))) == 8


def test_a_steward_sees_the_row_count_and_an_analyst_does_not(world: World) -> None:
    rows = f"{datasets.get_dataset(world.engine, world.dataset).rows:,} rows"
    assert rows in signed_in(world, "steward").get(f"/console/datasets/{world.dataset}").text
    assert rows not in signed_in(world, "analyst").get(f"/console/datasets/{world.dataset}").text


def test_the_quality_view_shows_exact_counts_to_stewards_and_records_each_look(world: World) -> None:
    """A steward's look at the exact marginal is recorded before it is shown; the auditor's ledger page lists it;
    the exact counts are the table's."""
    from service.access import exact_views
    from service.data.oracle import TableCountOracle

    before = len(exact_views.looks(world.engine, world.dataset))
    page = signed_in(world, "steward").get(f"/console/releases/{world.release_id}/quality",
                                           params={"columns": ["Sex"]})
    assert page.status_code == 200
    with TableCountOracle(world.engine, datasets.get_dataset(world.engine, world.dataset)) as oracle:
        exact = oracle.counts(("Sex",))
    cells = re.findall(r"<tr><td>(\d)</td><td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td></tr>", page.text)
    assert [float(value.replace(",", "")) for _, value in cells] == [float(v) for v in exact]
    looks = exact_views.looks(world.engine, world.dataset)
    assert len(looks) == before + 1 and looks[-1].attributes == ("Sex",) and looks[-1].release_id == world.release_id
    assert looks[-1].principal.startswith("steward:test steward")
    ledger = signed_in(world, "auditor").get(f"/console/datasets/{world.dataset}/ledger").text
    assert "FROM exact_views" in ledger and '[&#34;Sex&#34;]' in ledger
    refused = signed_in(world, "analyst").get(f"/console/releases/{world.release_id}/quality",
                                              params={"columns": ["Sex"]})
    assert refused.status_code == 403 and len(exact_views.looks(world.engine, world.dataset)) == before + 1


def test_a_campaign_fit_shows_its_coefficients_errors_and_verdict(world: World) -> None:
    from service.campaigns import estimates

    page = signed_in(world, "analyst").get(f"/console/campaigns/{world.campaign}/fit", params={"model": "mean"})
    fit = estimates.fit_campaign(world.engine, world.campaign, "mean", None, False).to_json()
    assert page.status_code == 200 and f"Verdict: <strong>{fit['quality']['verdict']}</strong>" in page.text
    assert formats.number(fit["coefficients"]["value"]) in page.text
    assert formats.number(fit["standard_errors"]["value"]) in page.text and 'class="whisker"' in page.text
    wrong = signed_in(world, "analyst").get(f"/console/campaigns/{world.campaign}/fit", params={"model": "glm"})
    assert wrong.status_code == 422 and "model must be one of" in wrong.text


def test_a_campaigns_page_shows_its_plan_at_the_reports_received(world: World) -> None:
    from service.campaigns import campaigns, planning

    reports = campaigns.get_campaign(world.engine, world.campaign).to_json()["reports"]
    plan = planning.plan_stored(world.engine, world.campaign, reports).to_json()
    page = signed_in(world, "auditor").get(f"/console/campaigns/{world.campaign}").text
    assert f"At {reports} participants (the reports received)" in page
    assert f"<strong>{formats.number(plan['expected_error'])}</strong>" in page
