"""Part 7 of the demo: the web console of the running server, seen by a steward in Debian's chromium (headless,
driven by Playwright): the release planner's preview and the ledger, written to ``demo-output/console-*.png``.
Without chromium (``apt-get install chromium``; ``.ci/run`` installs it) the part says where the console is and how
to get the screenshots, and the demo goes on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.tools.browser import CHROMIUM_FLAGS, chromium_path

DATASET = "adult"


def console_screenshots(story: Any, heading: Callable[[str], None]) -> None:
    heading("7. The web console (a steward in a browser)")
    server = story.server()
    print(f"the console: {server.url}/console (sign in with a steward, analyst or auditor key)")
    browser_path = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # the test extra is not installed
        sync_playwright = None
    if browser_path is None or sync_playwright is None:
        print("no screenshot: this machine has no chromium or no playwright (apt-get install chromium; "
              "make install installs playwright)")
        return
    key = story.run("keys", "create", "--role", "steward", "--name", "demo console", as_json=True,
                    summary=lambda answer: f"a steward key (id {answer['id']}) for the console")["key"]
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=browser_path, headless=True, args=list(CHROMIUM_FLAGS))
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.goto(f"{server.url}/console")
        page.get_by_label("API key").fill(key)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{server.url}/console/datasets")
        page.goto(f"{server.url}/console/datasets/{DATASET}/plan")
        page.get_by_label("Mechanism", exact=True).select_option("gaussian")
        page.get_by_label("Epsilon", exact=True).fill("0.5")
        page.get_by_role("button", name="Preview (spends nothing)").click()
        page.get_by_role("heading", name="Preview").wait_for()
        written = [story.out / "console-plan.png", story.out / "console-ledger.png"]
        page.screenshot(path=str(written[0]), full_page=True)
        page.goto(f"{server.url}/console/datasets/{DATASET}/ledger")
        page.screenshot(path=str(written[1]), full_page=False)
        browser.close()
    for path in written:
        print(f"wrote {path}")
