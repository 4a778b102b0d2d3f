"""The screenshots in docs/ (archive-index.png, archive-thread.png): the demo bus archived with its
quarantine, opened in headless Chromium. Run by hand: ``python -m tests.archive.screenshots``."""

from __future__ import annotations

import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from agentmail.admin import demo
from agentmail.archive import gather, site
from agentmail.client.facade import AgentMail

from .test_browser import CHROMIUM

DOCS = Path(__file__).parents[2] / "docs"


def _open_threads(runflow: AgentMail, tokengate: AgentMail) -> None:
    """Two open threads beside the demo's closed one, so the picture has bars: one waiting on each side."""
    body = ("I am the agent of {me}; we call your /{what} endpoint on every request.\n\nReproduction: curl -s "
            "https://staging.example/{what} returns 500 since 09:00 UTC (verbatim: 'internal error').\n"
            "Expected: 200 as documented. Please confirm.")  # fmt: skip
    runflow.send("tokengate", "Token refresh returns 500", body.format(me="runflow", what="refresh"), severity="high",
                 ref="runflow#31")  # fmt: skip
    opened = tokengate.send("runflow", "Webhook retries never stop", body.format(me="tokengate", what="hooks"),
                            severity="medium")  # fmt: skip
    (got,) = [x for x in runflow.inbox() if x.thread == opened.thread]
    runflow.reply(got, "Reproduced: the retry counter is never reset. Fixing it today.", type="ack")
    tokengate.sync()


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        demo.run_demo(home, lambda line: None)
        client = AgentMail.from_env("runflow", home=home)
        token = AgentMail.from_env("tokengate", home=home)
        _open_threads(client, token)
        clients = gather.bus_mailboxes(client.registry, home)
        site.write(clients, Path(scratch) / "site", bus="demo bus", quarantine=True)
        for each in [client, token, *clients]:
            each.close()
        index = Path(scratch) / "site" / "index.html"
        thread = max((Path(scratch) / "site" / "t").glob("thr-*/index.html"), key=lambda p: p.stat().st_size)
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            page.goto(index.as_uri())
            page.screenshot(path=str(DOCS / "archive-index.png"), full_page=True)
            page.goto(thread.as_uri())
            page.screenshot(path=str(DOCS / "archive-thread.png"), full_page=True)
            browser.close()


if __name__ == "__main__":
    main()
