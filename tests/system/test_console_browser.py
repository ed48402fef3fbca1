"""The console as a person uses it, in a real browser: Debian's chromium, headless, driven by Playwright against a
real server (tests/support/browser.py).

Signed in as each role, every page of that role is opened, screenshotted (``MARGINALIA_SCREENSHOTS``, default
``test-output/console/``), checked by axe-core for serious and critical violations (labels, contrast, names,
landmarks) and for the keyboard (the first Tab reaches the skip link, every control is reachable); no page holds a
key or a canary of the canary table. Then the flows: a steward plans, previews, releases, follows the job, reads the
answer with its intervals and finds the step in the ledger with the previewed charge; an auditor's SQL figure is
what ``marginalia budget show`` says; an analyst fits a regression; and the refusals (wrong role, wrong scope, no
session, an expired one, a form without its CSRF token).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.accounting import accountant
from service.api import create_app
from service.api.console import formats
from service.cli import app as cli_app
from service.data import datasets
from service.releases import engine as release_engine
from tests.support.apihelpers import World, build_world
from tests.support.browser import CHROMIUM_FLAGS, accessibility_violations, chromium_path, serving
from tests.support.canaries import Canaries
from tests.support.canary_tables import SPEC, canary_frame
from tests.support.console import SECRET
from tests.support.paths import REPO

playwright_api = pytest.importorskip("playwright.sync_api")

SHOTS = Path(os.environ.get("MARGINALIA_SCREENSHOTS", REPO / "test-output" / "console"))
CANARY_DATASET = "patients"


@dataclass
class Site:
    world: World
    url: str
    app: object
    canaries: Canaries
    canary_release: int
    browser: object


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("console-browser")
    world = build_world(f"sqlite:///{folder / 'console.db'}", data_dir, folder=folder / "lake")
    canaries = Canaries()
    canary_frame(canaries).to_csv(folder / "patients.csv", index=False)
    (folder / "spec.json").write_text(json.dumps(SPEC))
    datasets.load_raw_csv(world.engine, CANARY_DATASET, [folder / "patients.csv"], folder / "spec.json")
    accountant.set_budget(world.engine, CANARY_DATASET, 5.0, 1e-6)
    canary_release = release_engine.release_marginals(world.engine, CANARY_DATASET, "gaussian", "all-2way",
                                                      epsilon=1, delta=1e-7).release_id
    app = create_app(world.engine, console_secret=SECRET)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with serving(app) as url, playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium_path(), headless=True, args=list(CHROMIUM_FLAGS))
        yield Site(world, url, app, canaries, canary_release, browser)
        browser.close()
    world.engine.dispose()


def new_page(site: Site, *, bypass_csp: bool = False):  # noqa: ANN201 - a Playwright page
    context = site.browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=bypass_csp)
    page = context.new_page()
    page.set_default_timeout(30_000)
    return page


def sign_in(site: Site, page, role: str) -> None:  # noqa: ANN001
    page.goto(f"{site.url}/console")
    assert "/console/sign-in" in page.url
    page.get_by_label("API key").fill(site.world.keys[role])
    page.keyboard.press("Enter")
    page.wait_for_url(f"{site.url}/console/datasets")


def opened(site: Site, role: str, path: str):  # noqa: ANN201 - a Playwright page
    """A new page signed in as ``role``, at ``path``."""
    page = new_page(site)
    sign_in(site, page, role)
    page.goto(site.url + path)
    return page


def pages_of(site: Site, role: str) -> dict[str, str]:
    """Every page of ``role``, by the name of its screenshot."""
    release, dataset = site.world.release_id, site.world.dataset
    found = {"datasets": "/console/datasets", "dataset": f"/console/datasets/{dataset}",
             "releases": "/console/releases", "release": f"/console/releases/{release}",
             "canary-dataset": f"/console/datasets/{CANARY_DATASET}", "campaigns": "/console/campaigns",
             "campaign": f"/console/campaigns/{site.world.campaign}",
             "marginals-campaign": f"/console/campaigns/{site.world.marginals_campaign}"}
    if role in ("steward", "analyst"):
        found["campaign-fit"] = f"/console/campaigns/{site.world.campaign}/fit?model=mean"
        found["campaign-marginal"] = f"/console/campaigns/{site.world.marginals_campaign}/marginal?columns=a&columns=b"
        found["marginal"] = f"/console/releases/{release}/marginal?columns=Pclass&columns=Survived"
        found["canary-marginal"] = f"/console/releases/{site.canary_release}/marginal?columns=age&columns=sex"
    if role in ("steward", "auditor"):
        found["ledger"] = f"/console/datasets/{dataset}/ledger"
        found["canary-ledger"] = f"/console/datasets/{CANARY_DATASET}/ledger"
    if role == "steward":
        found["quality"] = f"/console/releases/{release}/quality?columns=Pclass&columns=Survived"
        found["plan"] = f"/console/datasets/{dataset}/plan"
        found["job"] = f"/console/jobs/{site.world.job_id}"
    if role == "analyst":
        found["fit"] = f"/console/datasets/{dataset}/fit"
    return found


def tab_reaches_everything(page) -> list[str]:  # noqa: ANN001
    """Tab through the page: the skip link first, then every visible link, button and control once; the ones that
    were never reached."""
    controls = page.evaluate("""() => Array.from(document.querySelectorAll(
        'a[href], button, input:not([type=hidden]), select, textarea')).filter(e => e.offsetParent !== null
        && !e.disabled).length""")
    page.locator("body").focus()
    page.keyboard.press("Tab")
    first = page.evaluate("() => document.activeElement.textContent.trim()")
    reached = 1
    seen = set()
    for _ in range(controls + 40):
        page.keyboard.press("Tab")
        marker = page.evaluate("""() => { const e = document.activeElement; if (!e || e === document.body) return '';
            if (!e.dataset.seen) e.dataset.seen = String(Math.random()); return e.dataset.seen; }""")
        if not marker or marker in seen:
            break
        seen.add(marker)
        reached += 1
    problems = [] if first == "Skip to the content" else [f"the first Tab reached {first!r}, not the skip link"]
    # radio groups take one Tab stop for the group: count each group once
    groups = page.evaluate("""() => { const r = Array.from(document.querySelectorAll('input[type=radio]'));
        return r.length - new Set(r.map(e => e.name)).size; }""")
    if reached < controls - groups:
        problems.append(f"Tab reached {reached} of {controls - groups} controls")
    return problems


@pytest.mark.parametrize("role", ["steward", "analyst", "auditor"])
def test_every_page_of_every_role(site: Site, role: str) -> None:
    page = new_page(site, bypass_csp=True)  # axe-core is injected as a script: the console's CSP would refuse it
    sign_in(site, page, role)
    problems: list[str] = []
    for name, path in pages_of(site, role).items():
        answer = page.goto(site.url + path)
        assert answer is not None and answer.status == 200, (role, path, answer and answer.status)
        page.screenshot(path=str(SHOTS / f"{role}-{name}.png"), full_page=True)
        html = page.content()
        for key in site.world.keys.values():
            if key in html:
                problems.append(f"{path}: a key is in the page")
        problems += [f"{path}: canary {leak.canary.label}: {leak.excerpt}" for leak in site.canaries.find(html)]
        problems += [f"{path}: {v}" for v in accessibility_violations(page)]
        problems += [f"{path}: {p}" for p in tab_reaches_everything(page)]
    page.context.close()
    assert not problems, "\n".join(problems)


def test_a_stewards_whole_flow(site: Site) -> None:
    """Plan -> preview -> release -> the job's live page -> the answer with intervals -> the ledger's step, with the
    charge the preview said."""
    page = new_page(site)
    sign_in(site, page, "steward")
    page.get_by_role("link", name=site.world.dataset, exact=True).click()
    page.get_by_role("link", name="Plan a release").click()
    page.get_by_label("one marginal of the columns chosen below").check()
    page.get_by_role("group", name="Columns of one marginal").get_by_label("Embarked").check()
    page.get_by_role("group", name="Columns of one marginal").get_by_label("Sex").check()
    page.get_by_label("Mechanism", exact=True).select_option("gaussian")
    page.get_by_label("Epsilon", exact=True).fill("0.4")
    page.get_by_label("Delta (zCDP mechanisms turn epsilon and delta into rho)").fill("1e-7")
    page.get_by_role("button", name="Preview (spends nothing)").click()
    release_button = page.get_by_role("button", name=re.compile(r"^Release: charge epsilon"))
    previewed = release_button.text_content().split()[-1]
    before = accountant.ledger_rows(site.world.engine, site.world.dataset)[-1]["epsilon_spent_after"]
    page.screenshot(path=str(SHOTS / "steward-preview.png"), full_page=True)
    release_button.click()
    page.wait_for_url(re.compile(r".*/console/jobs/\d+$"))
    page.locator("#job-done").wait_for()  # the page's script follows the job and shows the end
    page.screenshot(path=str(SHOTS / "steward-job-done.png"), full_page=True)
    after = accountant.ledger_rows(site.world.engine, site.world.dataset)[-1]
    assert formats.epsilon(after["epsilon_spent_after"] - before) == previewed
    page.locator("#job-release").click()
    answers = page.get_by_role("group", name="Any marginal of this release (free: post-processing)")
    answers.get_by_label("Embarked").check()
    answers.get_by_label("Sex").check()
    answers.get_by_role("button", name="Show the marginal").click()
    chart = page.get_by_role("img", name=re.compile("Counts of the marginal over"))
    assert chart.locator("line.whisker").count() == 3 * 6  # Embarked x Sex: 6 cells, each with its interval
    page.screenshot(path=str(SHOTS / "steward-answer.png"), full_page=True)
    page.goto(f"{site.url}/console/datasets/{site.world.dataset}/ledger")
    last = page.locator("table").last.locator("tbody tr").last
    assert last.locator("td").nth(6).text_content() == formats.epsilon(after["rho"])
    assert last.locator("td").nth(7).text_content() == formats.epsilon(after["epsilon_spent_after"])
    page.context.close()


def test_an_auditors_sql_figure_is_budget_show(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    page = opened(site, "auditor", f"/console/datasets/{site.world.dataset}/ledger")
    figure = page.locator("figure.sql").first
    units = int(figure.locator("table.result tbody td").first.text_content())
    assert "SELECT epsilon_spent_units FROM budget_remaining" in figure.locator("pre").text_content()
    monkeypatch.setenv("MARGINALIA_DATABASE_URL", site.world.url)
    shown = CliRunner().invoke(cli_app, ["budget", "show", site.world.dataset, "--json"])
    assert shown.exit_code == 0, shown.output
    assert units / 1e12 == json.loads(shown.output)["epsilon_spent"]
    page.context.close()


def test_an_analysts_fit(site: Site) -> None:
    """An analyst fits a linear regression from the stored release (free, and said so), and reads the coefficients
    with their intervals as a chart."""
    page = opened(site, "analyst", f"/console/datasets/{site.world.dataset}/fit")
    page.get_by_label("Target").select_option("Survived")
    page.get_by_role("group", name="Features").get_by_label("Pclass").check()
    page.get_by_label("From the stored release").select_option(str(site.world.release_id))
    page.get_by_role("button", name="Preview (spends nothing)").click()
    page.get_by_text("free: it reuses release").wait_for()
    page.get_by_role("button", name=re.compile("^Fit")).click()
    chart = page.get_by_role("img", name=re.compile("Coefficients"))
    chart.wait_for()
    assert chart.locator("circle.point").count() >= 1
    page.screenshot(path=str(SHOTS / "analyst-fit.png"), full_page=True)
    page.context.close()


def test_refusals(site: Site) -> None:
    page = new_page(site)
    page.goto(f"{site.url}/console/datasets/{site.world.dataset}/ledger")
    assert "/console/sign-in?next=" in page.url  # no session: the sign-in page, then back
    page.get_by_label("API key").fill("mgl_not_a_key")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").text_content() == "That API key is unknown or has been revoked."
    page.get_by_label("API key").fill(site.world.keys["participant"])
    page.get_by_role("button", name="Sign in").click()
    assert "for steward, analyst and auditor keys" in page.get_by_role("alert").text_content()
    page.get_by_label("API key").fill(site.world.keys["analyst"])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r".*/ledger$"))
    assert page.get_by_role("heading", level=1).text_content() == "Not allowed"  # the ledger is not the analyst's
    page.context.close()
    page = new_page(site)
    sign_in(site, page, "scoped_steward")
    answer = page.goto(f"{site.url}/console/datasets/{site.world.dataset}/plan")
    assert answer.status == 403 and "scoped to the datasets" in page.content()
    page.context.close()
    page = opened(site, "steward", f"/console/datasets/{site.world.dataset}/plan")
    page.evaluate("() => document.querySelectorAll('input[name=csrf_token]').forEach(e => e.remove())")
    page.get_by_role("button", name="Preview (spends nothing)").click()
    assert "CSRF token" in page.get_by_role("alert").text_content()
    sessions = site.app.state.console_sessions
    clock = sessions.clock
    sessions.clock = lambda: clock() + sessions.lifetime + 1  # eight hours later
    try:
        page.goto(f"{site.url}/console/releases")
        assert "/console/sign-in" in page.url
    finally:
        sessions.clock = clock
    page.context.close()


def test_a_steward_cancels_a_running_release(site: Site) -> None:
    """An AIM release started from the planner is cancelled from its job page: the page follows it to its end,
    which says what the ledger kept."""
    page = opened(site, "steward", f"/console/datasets/{site.world.dataset}/plan")
    page.get_by_label("Mechanism", exact=True).select_option("aim")
    page.get_by_label("Epsilon", exact=True).fill("0.3")
    page.get_by_label("Delta (zCDP mechanisms turn epsilon and delta into rho)").fill("1e-7")
    page.get_by_role("button", name="Preview (spends nothing)").click()
    page.get_by_role("button", name=re.compile(r"^Release: charge epsilon")).click()
    page.wait_for_url(re.compile(r".*/console/jobs/\d+$"))
    page.get_by_role("button", name="Cancel the release").click()
    page.locator("#job-failed").wait_for(timeout=300_000)
    assert "a Cancel from the console" in page.locator("#job-failed").text_content()
    page.screenshot(path=str(SHOTS / "steward-job-cancelled.png"), full_page=True)
    page.context.close()
