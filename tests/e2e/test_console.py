"""The operator console at /ui/ in a real browser (Debian's Chromium, driven by Playwright) against the router
running `make demo`'s real backends, plus one whose descriptions carry markup, with two keys: an operator
and a caller without the operator right.

Screenshots of each page go to a temporary folder; with MCP_ROUTER_SCREENSHOTS=docs/img they are written
there (docs/console.md shows them).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from mcp_router import examples
from router.security.identity import key_hash, new_api_key
from router.settings import RouterSettings
from router.settings.file import load_settings
from tests.conftest import ROOT, TEST_SERVERS, running_app, stdio

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
KEYS = {"ops": new_api_key(), "alice": new_api_key()}
DEMO = ("calculator", "knowledge-base", "time", "everything", "memory")
MARKUP = "<script>alert(1)</script>"
# Chromium logs each non-2xx answer the page asks for on purpose (a 409, a 403) as a console error.
EXPECTED = re.compile(r"^Failed to load resource: the server responded with a status of (401|403|404|409) ")


@pytest.fixture(scope="module")
def app(ray_local: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    demo = load_settings(examples.CONFIG).model_dump(mode="json")
    settings = RouterSettings.model_validate({
        **demo, "state_dir": str(tmp_path_factory.mktemp("console-state")),  # nothing learned before
        "backends": [*demo["backends"], stdio("hostile", TEST_SERVERS / "hostile.py")],
        "server": {"namespace": "mcp-router-test", "port": ray_local["port"], "auth": {"api_keys": [
            {"name": "ops", "sha256": key_hash(KEYS["ops"]), "policy": "operator"},
            {"name": "alice", "sha256": key_hash(KEYS["alice"]), "policy": "default"}]}},
    })
    with running_app(settings, ray_local["url"], healthy=False) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: `apt-get install chromium` (make setup does it where it can)")
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                      args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        yield launched
        launched.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    target = os.environ.get("MCP_ROUTER_SCREENSHOTS")
    return ROOT / target if target else tmp_path


def opened(browser: Browser, url: str, key: str) -> tuple[Page, list[str]]:
    """The console signed in with `key`; the list collects what the page did wrong (console errors other than
    the answers it asks for on purpose, page errors, dialogs, CSP violations)."""
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type == "error" and not EXPECTED.match(m.text) else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.add_init_script("document.addEventListener('securitypolicyviolation', "
                         "(e) => console.error('CSP ' + e.violatedDirective));")
    page.goto(f"{url}/ui/")
    expect(page.locator("#auth-banner")).to_contain_text("needs an API key")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Use key").click()
    return page, problems


def test_the_console_is_served_with_a_strict_policy(app: str) -> None:
    page = httpx.get(f"{app}/ui/")
    assert page.status_code == 200 and "console.js" in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe" not in policy and "frame-ancestors 'none'" in policy
    assert httpx.get(f"{app}/ui/console.js").headers["content-type"].startswith("text/javascript")
    assert httpx.get(f"{app}/ui/nothing.js").status_code == 404
    assert httpx.get(f"{app}/v1/whoami").status_code == 401  # the page is public, the data is not
    me = httpx.get(f"{app}/v1/whoami", headers={"Authorization": f"Bearer {KEYS['alice']}"}).json()
    assert me == {"principal": "alice", "policy": "default", "operator": False, "authenticated": True}


def test_an_operator_sees_the_backends_explains_a_question_and_corrects_a_409(
        app: str, browser: Browser, shots: Path) -> None:
    page, problems = opened(browser, app, KEYS["ops"])
    expect(page.locator("#whoami")).to_contain_text("ops")
    for name in DEMO:
        expect(page.locator(".card", has_text=name).first).to_be_visible()
    expect(page.locator(".card")).to_have_count(len(DEMO) + 1)
    page.screenshot(path=str(shots / "console-backends.png"), full_page=True)

    page.get_by_role("button", name="Route explorer").click()
    page.get_by_label("Question").fill("What time is it in Tokyo?")
    page.get_by_role("button", name="Explain").click()
    expect(page.locator(".verdict")).to_contain_text("route")
    expect(page.locator(".candidate").first).to_contain_text("time")
    expect(page.locator(".candidate").first).to_contain_text("get_current_time")
    would = 'call time/get_current_time with {"timezone":"Asia/Tokyo"}'  # what running it will call, and with what
    expect(page.locator("#explorer-result")).to_contain_text(would)
    page.screenshot(path=str(shots / "console-explorer.png"), full_page=True)
    # The question's values put the conversion first, and the card says so.
    page.get_by_label("Question").fill("What time is it in New York when it is 9am in London?")
    page.get_by_role("button", name="Explain").click()
    expect(page.locator(".candidate").first).to_contain_text("convert_time")
    expect(page.locator(".candidate .placed").first).to_contain_text("the question's values")
    # The unit converter fits best but takes no currencies: the card says why it would not be called.
    page.get_by_label("Question").fill("Convert 100 USD to EUR")
    page.get_by_role("button", name="Explain").click()
    expect(page.locator("#explorer-result")).to_contain_text("answer 404 no_relevant_backend")
    expect(page.locator(".candidate .ruled-out").first).to_contain_text("takes no currency value")

    # A description from an untrusted server is shown as text; nothing in it runs.
    page.get_by_label("Question").fill("look up customer records for Smith")
    page.get_by_role("button", name="Explain").click()
    expect(page.locator(".candidate").first).to_contain_text(MARKUP)
    assert page.locator("img").count() == 0 and page.locator("script").count() == 1

    # A 409: the router asks rather than acting. The operator says what it should have been, and the same
    # question is then answered by that tool.
    question = "How can I get more logs?"
    page.get_by_label("Question").fill(question)
    page.get_by_role("button", name="Explain").click()  # the dry run says what running it will answer
    expect(page.locator("#explorer-result")).to_contain_text("answer 409 ambiguous_route")
    page.get_by_role("button", name="Run it").click()
    expect(page.locator(".err-type")).to_have_text("ambiguous_route")
    page.get_by_role("button", name="Wrong, it should have been…").click()
    page.locator(".fb-wrong select").select_option("knowledge-base")
    page.locator(".fb-wrong input").fill("rag_query_with_chunks")
    page.get_by_role("button", name="Send correction").click()
    expect(page.locator(".fb-result")).to_contain_text("Stored")
    page.screenshot(path=str(shots / "console-feedback.png"), full_page=True)
    page.get_by_role("button", name="Run it").click()
    expect(page.locator("#explorer-result")).to_contain_text("knowledge-base", timeout=20_000)
    expect(page.locator(".answer-text")).to_be_visible()

    page.get_by_role("button", name="Recent decisions").click()
    expect(page.locator("table.decisions tbody tr").first).to_be_visible()
    expect(page.locator("table.decisions")).to_contain_text(question)
    page.screenshot(path=str(shots / "console-decisions.png"), full_page=True)
    assert not problems, problems


def test_a_load_test_report_is_drawn(app: str, browser: Browser, shots: Path) -> None:
    # The load tester sends its report to the router; a key without the operator right may not.
    def loadtest(key: str) -> str:
        done = subprocess.run([sys.executable, "-m", "mcp_router.cli.main", "loadtest", "--url", app, "--duration",
                               "3", "--concurrency", "4", "--api-key", key], capture_output=True, text=True,
                              timeout=120)
        return done.stdout + done.stderr

    assert "did not keep the report (403)" in loadtest(KEYS["alice"])
    assert "sent the report" in loadtest(KEYS["ops"])
    report = httpx.get(f"{app}/v1/loadtest", headers={"Authorization": f"Bearer {KEYS['ops']}"}).json()
    assert report["requests"] > 0 and report["timeline"]
    page, problems = opened(browser, app, KEYS["ops"])
    page.get_by_role("button", name="Load test").click()
    expect(page.locator("figure.chart-fig")).to_have_count(2)
    expect(page.locator("#loadtest-body")).to_contain_text(str(report["requests"]))
    page.screenshot(path=str(shots / "console-loadtest.png"), full_page=True)
    assert not problems, problems


def test_a_key_without_the_operator_right_sees_no_decisions(app: str, browser: Browser, shots: Path) -> None:
    page, problems = opened(browser, app, KEYS["alice"])
    expect(page.locator("#whoami")).to_contain_text("not operator")
    page.get_by_role("button", name="Recent decisions").click()
    expect(page.locator("#decisions-body")).to_contain_text("needs the operator right")
    assert httpx.get(f"{app}/v1/decisions", headers={"Authorization": f"Bearer {KEYS['alice']}"}).status_code == 403
    assert page.evaluate("localStorage.length") == 0 and KEYS["alice"] not in page.url
    page.screenshot(path=str(shots / "console-non-operator.png"), full_page=True)
    assert not problems, problems
