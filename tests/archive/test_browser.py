"""The archive and the live view in a real browser: headless Chromium (Debian's ``chromium``)
driven by Playwright for Python. The index lists the threads, a thread page shows every letter and
its authentication, a permalink lands on its letter, search finds a letter, a hostile letter's
script never runs, and the pages' own content raises no Content-Security-Policy violation.

CI installs the browser (.ci/run) and sets CI=true: there a missing browser fails these tests;
elsewhere they are skipped, saying why."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmail.archive import site
from agentmail.client.facade import AgentMail

from ..conftest import OPENER
from .live import served

CHROMIUM = os.environ.get("AGENTMAIL_CHROMIUM", "/usr/bin/chromium")
HOSTILE_SUBJECT = "Quota <script>window.pwned=1</script>"
HOSTILE_BODY = OPENER + '\n<img src=x onerror="window.pwned=2"> <a href="javascript:window.pwned=3">click</a>\n'


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install -e '.[test]')"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = _missing()
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the browser tests must run in CI: {missing}")
        pytest.skip("no browser: apt-get install -y chromium, and pip install -e '.[test]' for Playwright")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


class _Page:
    """A page of the browser with every console message and page error it raised kept."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.console: list[str] = []
        self.page.on("console", lambda message: self.console.append(message.text))
        self.page.on("pageerror", lambda error: self.console.append(str(error)))

    def csp_violations(self) -> list[str]:
        return [line for line in self.console if "Content Security Policy" in line]

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab(browser: Any) -> Iterator[_Page]:
    page = _Page(browser)
    try:
        yield page
    finally:
        page.close()


def _thread(alpha: AgentMail, beta: AgentMail) -> str:
    opened = alpha.send("beta", HOSTILE_SUBJECT, HOSTILE_BODY)
    (got,) = beta.inbox()
    beta.reply(got, "Reproduced with zanzibar; fixing it.", type="ack")
    alpha.sync()
    return opened.thread


def test_the_static_archive_in_a_browser(alpha: AgentMail, beta: AgentMail, tab: _Page, tmp_path: Path) -> None:
    thread = _thread(alpha, beta)
    other = alpha.send("beta", "Second thread", OPENER).thread
    site.write([alpha], tmp_path / "site", bus="bus.test")
    page = tab.page
    page.goto((tmp_path / "site" / "index.html").as_uri())
    rows = page.locator("#threads tr.thread")
    assert rows.count() == 2 and {thread, other} <= set(page.locator("#threads").inner_text().split())
    page.locator(f"a[href$='{thread}/index.html']").click()
    page.wait_for_url(f"**/t/{thread}/index.html")
    letters = page.locator("section.letter")
    assert letters.count() == 2
    assert letters.nth(0).locator(".badge").inner_text() == "sent"
    assert letters.nth(1).locator(".badge").inner_text() == "verified"
    assert "verified against the key pinned in the registry for beta" in letters.nth(1).inner_text()
    assert "<script>window.pwned=1</script>" in page.locator("h1").inner_text()  # shown, as text
    assert page.locator("a[href^='javascript']").count() == 0
    assert page.evaluate("typeof window.pwned") == "undefined"
    (first, _) = alpha.thread(thread)
    page.goto((tmp_path / "site" / "m" / first.message_id.strip("<>") / "index.html").as_uri())
    page.wait_for_url(f"**/t/{thread}/index.html#{first.message_id.strip('<>')}")
    assert page.evaluate("location.hash") == f"#{first.message_id.strip('<>')}"
    assert page.locator(":target .badge").inner_text() == "sent"  # the letter itself is the target
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert tab.csp_violations() == [], tab.console


def test_the_live_view_in_a_browser_searches_and_stays_inert(alpha: AgentMail, beta: AgentMail, tab: _Page,
                                                              home: Path) -> None:  # fmt: skip
    thread = _thread(alpha, beta)
    with served(home, "--as", "alpha") as url:
        page = tab.page
        page.goto(url)
        assert thread in page.locator("#threads").inner_text()
        page.locator("nav a:text('search')").click()
        page.locator("input[name=q]").fill("zanzibar")
        page.locator("button[type=submit]").click()
        page.wait_for_url("**/search?q=zanzibar")
        hits = page.locator("tr.hit")
        assert hits.count() == 1 and "ack" in hits.inner_text()
        hits.locator("a").click()
        page.wait_for_url(f"**/t/{thread}/index.html#*")
        assert page.locator("section.letter").count() == 2
        assert page.evaluate("typeof window.pwned") == "undefined"
        (first, _) = alpha.thread(thread)
        page.goto(f"{url}m/{first.message_id}")  # a Message-ID as a mail client shows it
        assert page.url.endswith(f"/t/{thread}/index.html#{first.message_id.strip('<>')}")
    assert tab.csp_violations() == [], tab.console


def test_a_script_the_pages_did_not_write_is_refused_by_their_policy(alpha: AgentMail, beta: AgentMail, tab: _Page,
                                                                      tmp_path: Path) -> None:  # fmt: skip
    """The policy is live, not decoration: a script slipped into a page (as if the escaping had
    failed) is blocked, and Chromium says so on the console."""
    thread = _thread(alpha, beta)
    site.write([alpha], tmp_path / "site", bus="bus.test")
    path = tmp_path / "site" / "t" / thread / "index.html"
    path.write_text(path.read_text().replace("</h1>", "</h1><script>window.pwned=4</script>", 1))
    tab.page.goto(path.as_uri())
    assert tab.page.evaluate("typeof window.pwned") == "undefined"
    assert tab.csp_violations(), tab.console
