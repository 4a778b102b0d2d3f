"""Routing a judged letter: one table, every row a rule of DESIGN §5/§7 (pure, no spool)."""

from __future__ import annotations

import pytest

from agentmail.model import Letter
from agentmail.stages.route import Facts, route
from agentmail.trust.authenticity import Verdict

LETTER = Letter(
    message_id="<01a.beta@bus.test>",
    sender="beta",
    sender_address="beta@bus.test",
    to="alpha",
    to_address="alpha@bus.test",
    type="question",
    thread="thr-aaaaaaaaaa",
    subject="s",
    body="b",
    date="",
    in_reply_to="<01p.alpha@bus.test>",
)
NOTE_FOR_TESTER = LETTER.replace(type="note", to_agent="tester", extra={})
ACCEPT = Verdict("accept", letter=LETTER)
BOUNCE = Verdict(
    "bounce",
    reason=None,
    detail="550 5.1.1 no such user",
    bounced_message_id="<01s.alpha@bus.test>",
    failed_recipients=("beta+thr-aaaaaaaaaa@bus.test",),
)
UNVOUCHED = BOUNCE.replace(unvouched="the local post office writes no delivery reports")
SENT_TO_BETA = Facts(bounced_id="01sent", bounced_to=("beta+thr-aaaaaaaaaa@bus.test",))
BAD = Verdict("quarantine", letter=LETTER, reason="bad-signature", detail="the signature does not verify")

# (what judging said, what the spool knows) -> (action, quarantine reason, letter id)
TABLE = [
    (None, Facts(bytes_filed=True), ("duplicate", None, None)),
    (BAD, Facts(bytes_filed=True), ("duplicate", None, None)),  # a refetch is never judged twice
    (ACCEPT, Facts(), ("file", None, None)),
    (ACCEPT, Facts(filed_as="01old"), ("duplicate", None, None)),
    (ACCEPT, Facts(parent_thread="thr-aaaaaaaaaa"), ("file", None, None)),
    (ACCEPT, Facts(parent_thread="thr-bbbbbbbbbb"), ("quarantine", "thread-mismatch", None)),
    (ACCEPT, Facts(filed_as="01old", parent_thread="thr-bbbbbbbbbb"), ("duplicate", None, None)),
    (BAD, Facts(), ("quarantine", "bad-signature", None)),
    (BOUNCE, SENT_TO_BETA, ("bounce", None, "01sent")),
    (BOUNCE, Facts(bounced_id="01sent", bounced_to=("beta@bus.test",)), ("bounce", None, "01sent")),  # a tag aside
    (BOUNCE, Facts(), ("quarantine", "automated", None)),  # a report about a letter not sent from here
    (BOUNCE, Facts(bounced_id="01sent", bounced_to=("gamma@bus.test",)), ("quarantine", "automated", None)),
    (UNVOUCHED, SENT_TO_BETA, ("quarantine", "automated", None)),  # nothing vouches for the report
    (Verdict("accept", letter=NOTE_FOR_TESTER), Facts(me_agent="tester"), ("file", None, None)),
    (Verdict("accept", letter=NOTE_FOR_TESTER), Facts(me_agent="fixer"), ("skip", None, None)),
    (Verdict("accept", letter=NOTE_FOR_TESTER), Facts(), ("skip", None, None)),  # the platform's own mailbox
]


@pytest.mark.parametrize(("verdict", "facts", "expected"), TABLE)
def test_route_table(verdict: Verdict | None, facts: Facts, expected: tuple[str, str | None, str | None]) -> None:
    filing = route(verdict, facts)
    reason = filing.verdict.reason if filing.action == "quarantine" and filing.verdict else None
    assert (filing.action, reason, filing.letter_id) == expected


def test_a_thread_mismatch_names_both_threads_and_keeps_the_letter() -> None:
    filing = route(ACCEPT, Facts(parent_thread="thr-bbbbbbbbbb"))
    assert filing.verdict is not None and filing.verdict.letter == LETTER
    assert filing.verdict.detail == "it answers a letter of thr-bbbbbbbbbb but is tagged thr-aaaaaaaaaa"


def test_a_doubted_delivery_report_says_why_it_is_not_believed() -> None:
    def said(verdict: Verdict, facts: Facts) -> str | None:
        filing = route(verdict, facts)
        return filing.verdict.detail if filing.verdict else None

    assert said(UNVOUCHED, SENT_TO_BETA) == (
        "a delivery report not believed: the local post office writes no delivery reports"
    )
    assert said(BOUNCE, Facts()) == "a delivery report about a letter this mailbox did not send"
    assert said(BOUNCE, Facts(bounced_id="01sent", bounced_to=("gamma@bus.test", "carol@people.test"))) == (
        "a delivery report not believed: the letter it names was not sent to beta+thr-aaaaaaaaaa@bus.test"
    )


def test_an_unjudged_letter_whose_bytes_are_new_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        route(None, Facts())
