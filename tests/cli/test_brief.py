"""A woken agent's budget (issue 41): `thread --brief` and MCP's thread brief give a thread within
a number of tokens (guide.tokens, the estimate test_mcp budgets the tool list with), and the
session-start hook lists 10 unread letters within 300."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.cli import brief, hooks, mcp_server
from agentmail.cli.guide import tokens
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.frame import MARK
from agentmail.model import Letter, new_ulid

from ..conftest import OPENER, Cli
from ..depth import examples, suppressed

SUBJECTS = [
    "Quota endpoint returns 500 for free plan",
    "Webhook retries double-charge invoices",
    "Timezone off by one hour in reports",
    "Search index misses accented names",
    "Rate limiter resets on deploy",
    "CSV export drops the last row",
    "Login redirect loops on Safari",
    "Refund API returns 404 for old orders",
    "Image upload fails over 5 MB",
    "Daily digest sent twice",
]
UNREAD_BUDGET = 300


def long_thread(alpha: AgentMail, beta: AgentMail, rounds: int = 9) -> list[Letter]:
    """A report, its ack, then fix-notice and still-broken verify-result ``rounds`` times: as deep
    as the depth cap lets a thread go (2 + 2 x 9 = 20 letters)."""
    report = alpha.send("beta", "Quota 500s", OPENER)
    [got] = beta.inbox()
    beta.reply(got, "Reproduced on 2.4.1; the plan lookup throws KeyError for free users. Fixing now.")
    for i in range(rounds):
        fix = f"Fix {i}: the plan lookup now defaults to 'free' when missing; released as 2.4.{i + 2}. Please verify."
        if i == 0:
            beta.send("alpha", "", fix, type="fix-notice", thread=report.thread)
        else:
            [verdict] = [x for x in beta.inbox() if x.type == "verify-result"]
            beta.reply(verdict, fix, type="fix-notice")
        [notice] = [x for x in alpha.inbox() if x.type == "fix-notice"]
        alpha.reply(notice, f"Still 500 on 2.4.{i + 2}: KeyError 'tier' from the same call.", outcome="still-broken")
    return beta.thread(report.thread)


def test_a_thread_brief_keeps_the_opener_the_last_letters_and_a_line_between(
    alpha: AgentMail, beta: AgentMail, cli: Cli
) -> None:
    letters = long_thread(alpha, beta)
    assert len(letters) == 20
    # 30 letters: the 20 a thread can hold, and ten of its middle again (the brief reads only letters).
    thirty = letters[:1] + [x.replace(id=new_ulid()) for x in letters[1:11]] + letters[1:]
    text = brief.of_thread(thirty)
    assert tokens(text) <= brief.BUDGET
    lines = text.splitlines()
    assert lines[0] == f'thread {letters[0].thread} "Quota 500s": 30 letter(s)'
    assert lines[1].startswith(f"{letters[0].id} report from alpha") and f"{MARK}I am the agent of alpha" in text
    assert lines[-2:] == [
        f"{letters[-1].id} verify-result (still-broken) from alpha, {letters[-1].date}",
        f"  {MARK}Still 500 on 2.4.10: KeyError 'tier' from the same call.",
    ]
    assert any(x.startswith('- fix-notice from beta: "Fix 7: the plan lookup') for x in lines)
    assert f"(all of it: agentmail thread {letters[0].thread})" in text
    code, out, _ = cli("--as", "beta", "thread", "--brief", "--no-sync", letters[0].thread)
    whole = cli("--as", "beta", "thread", "--no-sync", letters[0].thread)[1]
    assert code == 0 and out == brief.of_thread(letters) + "\n" and tokens(out) < tokens(whole)
    code, out, _ = cli("--as", "beta", "--json", "thread", "--brief", "--tokens", "200", letters[0].thread)
    assert code == 0 and tokens(json.loads(out)["brief"]) <= 200
    assert cli("--as", "beta", "thread", "--brief", "--tokens", "10", letters[0].thread)[0] == 2
    got = mcp_server.call(beta, "list", {"action": "thread", "thread": letters[0].thread, "brief": True, "tokens": 300})
    assert got == {"brief": brief.of_thread(letters, 300)} and tokens(got["brief"]) <= 300


def test_a_long_opener_is_cut_and_says_how_much_more(alpha: AgentMail, beta: AgentMail) -> None:
    report = alpha.send("beta", "Quota 500s", OPENER + "Trace line.\n" * 300)
    text = brief.of_thread(beta.thread(report.thread), 300)
    assert tokens(text) <= 300 and "more chars]" in text and text.count(MARK) >= 3


def test_a_short_thread_is_shown_whole(alpha: AgentMail, beta: AgentMail) -> None:
    report = alpha.send("beta", "Quota 500s", OPENER)
    text = brief.of_thread(beta.thread(report.thread))
    assert "…" not in text and text.count(MARK) == OPENER.count("\n")
    assert brief.of_thread([]) == "(no letters)"


def test_ten_unread_letters_cost_a_woken_agent_at_most_300_tokens(alpha: AgentMail, beta: AgentMail) -> None:
    for subject in SUBJECTS:
        alpha.send("beta", subject, OPENER, severity="high")
    text = hooks.session_start(beta)
    assert text is not None and len(text.splitlines()) == 11
    assert tokens(text) <= UNREAD_BUDGET, tokens(text)


_BODY = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)


@given(bodies=st.lists(_BODY, min_size=1, max_size=40), subject=st.text(max_size=300), budget=st.integers(50, 2000))
@settings(
    max_examples=examples(150), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
def test_any_thread_fits_its_budget_and_stays_in_the_frame(
    sample: Letter, bodies: list[str], subject: str, budget: int
) -> None:
    """Whatever the letters say, the brief is within its budget and nothing from a letter starts
    a line of its own: every line is agentmail's (the title, a header, '- ', '… ') or framed."""
    letters = [sample.replace(id=new_ulid(), body=text, subject=subject) for text in bodies]
    text = brief.of_thread(letters, budget)
    assert tokens(text) <= budget
    ids = {x.id for x in letters}
    for shown in text.splitlines()[1:]:
        assert shown.startswith(("- ", "… ", f"  {MARK.rstrip()}")) or shown.split(" ", 1)[0] in ids, shown


@pytest.fixture
def sample(registry: Any, home: Path) -> Letter:
    """A letter to vary (read only: every example builds its own thread from it)."""
    with AgentMail(registry, Identity("alpha"), home) as alpha:
        return alpha.send("beta", "Quota", OPENER)
