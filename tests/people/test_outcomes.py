"""Outcomes and the reporter's follow-up after an ack (issue 26), end to end on the local post
office with real dkimpy signatures.

A verify-result says ``confirmed`` or ``still-broken`` in its front matter; ``status`` shows it,
and still-broken is the fixer's move again. After the other side's ack of its report, the
reporter may add evidence (``report``) or withdraw (``close``): the letter continues the
acknowledged report (In-Reply-To), never answers the ack, and the ack counts toward the depth
cap. The property: no sequence of letters between two platforms exceeds the cap or answers an
ack of the other side (or a close): a platform continues only its own ack.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import BadInput, Refused
from agentmail.letter import wire
from agentmail.model import TERMINAL_TYPES
from agentmail.stages.guards import MAX_DEPTH
from agentmail.transport.local import deliver
from agentmail.trust import signing

from ..conftest import OPENER, Cli
from ..depth import suppressed


def _fixed(alpha: AgentMail, beta: AgentMail) -> tuple[str, str]:
    """alpha reports, beta acks and announces a fix: (the thread, the fix-notice's id at alpha)."""
    report = alpha.send("beta", "Quota 500s", OPENER)
    (got,) = beta.inbox()
    beta.reply(got, "Reproduced.", type="ack", raise_refused=True)
    beta.follow_up(report.thread, "Fixed in 2.4.2.", type="fix-notice")
    fix = [x for x in alpha.inbox() if x.type == "fix-notice"][0]
    return report.thread, fix.id


def _row(am: AgentMail, thread: str) -> dict[str, object]:
    (row,) = [r.to_json() for r in am.status() if r.thread == thread]
    return row


def test_still_broken_puts_the_move_back_on_the_fixer_and_confirmed_reads_verified(
    alpha: AgentMail, beta: AgentMail
) -> None:
    thread, fix = _fixed(alpha, beta)
    verdict = alpha.reply(fix, "Still 500 on 2.4.2 for free plans.", type="verify-result", outcome="still-broken")
    assert verdict is not None and verdict.outcome == "still-broken"
    assert "outcome: still-broken" in beta.spool.read.raw(beta.inbox()[-1].id).decode()  # in the front matter
    received = [x for x in beta.inbox() if x.type == "verify-result"][0]
    assert received.outcome == "still-broken" and received.to_json()["outcome"] == "still-broken"
    assert (
        _row(beta, thread).items() >= {"state": "still broken", "whose_move": "me", "outcome": "still-broken"}.items()
    )
    assert (
        _row(alpha, thread).items()
        >= {"state": "still broken", "whose_move": "beta", "outcome": "still-broken"}.items()
    )

    again = beta.reply(received, "Now really fixed in 2.4.3.", type="fix-notice", raise_refused=True)
    assert again is not None
    fix2 = [x for x in alpha.inbox() if x.type == "fix-notice" and x.id != fix][0]
    alpha.reply(fix2, "Confirmed on 2.4.3.", type="verify-result", outcome="confirmed", raise_refused=True)
    assert _row(beta, thread).items() >= {"state": "verified", "whose_move": "me", "outcome": "confirmed"}.items()


def test_an_unstated_outcome_reads_verified_as_before(alpha: AgentMail, beta: AgentMail) -> None:
    thread, fix = _fixed(alpha, beta)
    letter = alpha.reply(fix, "Looks fine.", raise_refused=True)  # the default type: verify-result
    assert letter is not None and letter.type == "verify-result" and letter.outcome is None
    assert "outcome" not in letter.to_json()
    assert "outcome:" not in alpha.spool.read.raw(letter.id).decode()
    assert _row(beta, thread).items() >= {"state": "verified", "outcome": ""}.items()


def test_an_outcome_is_validated_on_the_way_out(alpha: AgentMail, beta: AgentMail) -> None:
    thread, fix = _fixed(alpha, beta)
    with pytest.raises(BadInput, match="unknown outcome 'fixed'"):
        alpha.reply(fix, "x", type="verify-result", outcome="fixed")
    with pytest.raises(BadInput, match="for a verify-result, not a question"):
        alpha.reply(fix, "x", type="question", outcome="confirmed")
    with pytest.raises(BadInput, match="for a verify-result, not a report"):
        alpha.send("beta", "New", OPENER, outcome="confirmed")
    assert alpha.why_refused(fix) is None  # nothing went: the fix-notice is still answerable


@pytest.mark.parametrize(
    ("kind", "line", "why"),
    [
        ("verify-result", "outcome: fixed", "unknown outcome 'fixed'"),
        ("report", "outcome: confirmed", "an outcome is for a verify-result, not a report"),
        ("verify-result", "outcome: [1, 2]", "plain 'key: value' lines"),
    ],
)
def test_a_hostile_outcome_in_a_letter_is_quarantined_malformed(
    registry: Registry, home: Path, beta: AgentMail, kind: str, line: str, why: str
) -> None:
    """Signed with alpha's real key: authentic, but its block says what no verify-result may."""
    letter = wire.draft_letter(
        "alpha@bus.test", "Alpha", "beta@bus.test", kind, "thr-abc123def0", "Hm", "text",
        message_id="<01hostile.alpha@bus.test>",
    )  # fmt: skip
    raw = wire.render(letter).replace(b"thread: thr-abc123def0", b"thread: thr-abc123def0\r\n" + line.encode())
    key = (home / "secrets" / "alpha.key").read_text().strip()
    deliver(home / "postoffice" / "beta", signing.sign(raw, "bus.test", registry.platforms["alpha"].selector, key))
    (held,) = beta.quarantined()
    assert held.reason == "malformed" and why in (held.detail or "")
    assert beta.inbox() == []


def test_the_reporter_may_add_evidence_or_withdraw_after_the_ack_and_nothing_else(
    alpha: AgentMail, beta: AgentMail
) -> None:
    report = alpha.send("beta", "Quota 500s", OPENER)
    (got,) = beta.inbox()
    ack = beta.reply(got, "Seen; on it.", type="ack", raise_refused=True)
    assert ack is not None
    with pytest.raises(Refused, match="add evidence .* or withdraw"):
        alpha.follow_up(report.thread, "Any news?", type="question")
    with pytest.raises(Refused, match="never answered"):
        alpha.reply(alpha.inbox()[0], "Thanks", type="question", raise_refused=True)
    evidence = alpha.follow_up(report.thread, "It also fails for id=8: status 500.", type="report")
    assert evidence.in_reply_to == report.message_id  # continues the report, never answers the ack
    assert ack.message_id in evidence.references and evidence.depth == 2  # the ack counts toward the cap
    assert _row(beta, report.thread).items() >= {"state": "reported", "whose_move": "me"}.items()
    # beta acks the evidence too; alpha withdraws the report.
    (more,) = [x for x in beta.inbox() if x.id != got.id]
    beta.reply(more, "Seen that too.", type="ack", raise_refused=True)
    withdrawn = alpha.follow_up(report.thread, "Withdrawn: our proxy caused it.", type="close")
    assert withdrawn.in_reply_to == evidence.message_id
    assert [r.thread for r in beta.status()] == [] and [r.thread for r in alpha.status()] == []


def test_the_cli_sends_and_shows_an_outcome(alpha: AgentMail, beta: AgentMail, cli: Cli) -> None:
    thread, fix = _fixed(alpha, beta)
    code, _, err = cli("--as", "alpha", "reply", fix, "-b", "x", "-t", "verify-result", "--outcome", "nope")
    assert code == 2 and "unknown outcome" in err and len(err.splitlines()) == 1
    code, _, err = cli("--as", "alpha", "send", "beta", "--thread", thread, "-b", "Still 500.",
                       "-t", "verify-result", "--outcome", "still-broken")  # fmt: skip
    assert code == 4 and "fix-notice" in err  # the thread ends with beta's fix-notice: answered with reply
    code, _, err = cli("--as", "alpha", "reply", fix, "-b", "Still 500.", "-t", "verify-result",
                       "--outcome", "still-broken")  # fmt: skip
    assert code == 0, err
    code, out, _ = cli("--as", "beta", "--json", "status")
    (row,) = json.loads(out)
    assert (row["state"], row["whose_move"], row["outcome"]) == ("still broken", "me", "still-broken")
    code, out, _ = cli("--as", "beta", "status")
    assert "still broken" in out and "outcome: still-broken" in out


# --- the property: no sequence exceeds the cap or answers an ack -------------------------------------

_STEP = st.tuples(
    st.sampled_from(["alpha", "beta"]),
    st.sampled_from(["reply", "follow"]),
    st.sampled_from(["report", "question", "fix-notice", "verify-result", "ack", "close"]),
    st.sampled_from([None, "confirmed", "still-broken"]),
)


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=suppressed(HealthCheck.too_slow))
@given(st.lists(_STEP, min_size=1, max_size=45), st.sampled_from(["report", "question"]))
def test_no_sequence_of_letters_exceeds_the_depth_cap_or_answers_an_ack(
    steps: list[tuple[str, str, str, str | None]], opener: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        reg = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test",
                       endpoints={"new_threads_per_hour": 0})  # fmt: skip
        sides = {name: AgentMail(reg, Identity(name), home) for name in ("alpha", "beta")}
        try:
            thread = sides["alpha"].send("beta", "Loop?", OPENER, type=opener).thread
            for who, how, kind, outcome in steps:
                am = sides[who]
                if outcome is not None and kind != "verify-result":
                    outcome = None  # validated elsewhere; here the sequences
                try:
                    if how == "reply":
                        unread = [x for x in am.inbox() if x.thread == thread]
                        if unread:
                            am.reply(unread[-1], f"{kind} step", type=kind, outcome=outcome, raise_refused=True)
                    else:
                        am.follow_up(thread, f"{kind} step", type=kind, outcome=outcome)
                except Refused:
                    pass
            for am in sides.values():
                am.sync()
                letters = am.thread(thread, sync=False)
                by_id = {x.message_id: x for x in letters}
                for letter in letters:
                    assert letter.depth < MAX_DEPTH, (letter.type, letter.depth)
                    parent = by_id.get(letter.in_reply_to or "")
                    if parent is not None and parent.type in TERMINAL_TYPES:
                        # Only a platform's own ack is continued (its fix-notice after it); never
                        # the other side's ack, never a close.
                        assert (parent.type, parent.sender) == ("ack", letter.sender), (parent.type, letter.type)
        finally:
            for am in sides.values():
                am.close()


def test_evidence_and_acks_in_turn_stop_at_the_depth_cap(alpha: AgentMail, beta: AgentMail) -> None:
    """The evidence rule opens no loop: report, ack, evidence, ack... each counts toward the cap,
    and the letter that would reach it is refused ("it needs a human")."""
    thread = alpha.send("beta", "Quota 500s", OPENER).thread
    sent = 1
    while True:
        (latest,) = [x for x in beta.inbox() if x.thread == thread]
        beta.reply(latest, "Seen.", type="ack", raise_refused=True)
        sent += 1
        try:
            alpha.follow_up(thread, f"More evidence #{sent}: status 500 again.", type="report")
        except Refused as refused:
            assert "needs a human" in str(refused)
            break
        sent += 1
    depths = [x.depth for x in beta.thread(thread)]
    assert max(depths) == MAX_DEPTH - 1 and len(depths) == sent == MAX_DEPTH
