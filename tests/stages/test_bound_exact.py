"""Exact answers of the bound-thread rule (stages/route.py ``_not_its_opener``) where the
property tests of test_bound_threads.py do not reach: a note between one platform's agents into
a bound thread whose opener is not filed here."""

from __future__ import annotations

from agentmail.model import bound_thread_id, is_bound
from agentmail.stages.facts import Facts
from agentmail.stages.route import route
from agentmail.trust.authenticity import Verdict

from .test_preemption import ANSWER

BOUND = bound_thread_id("alpha@bus.test", "<01m.alpha@bus.test>")


def test_a_note_into_a_bound_thread_new_here_is_filed_not_held_for_its_opener() -> None:
    # one agent's handover to a sibling of its platform: a note opens no thread for an outsider
    note = ANSWER.replace(type="note", sender="beta", sender_address="beta@bus.test", to_agent="bob",
                          message_id="<03m.beta@bus.test>", thread=BOUND, in_reply_to=None)  # fmt: skip
    facts = Facts(me_agent="bob", me_address="beta@bus.test", opener_due=True)
    filing = route(Verdict("accept", letter=note, addressed=("beta@bus.test",)), facts)
    assert filing.action == "file" and filing.verdict is not None and filing.verdict.letter == note


def test_the_same_letter_as_a_question_waits_for_its_opener() -> None:
    question = ANSWER.replace(sender="beta", sender_address="beta@bus.test", to_agent="bob",
                              message_id="<03m.beta@bus.test>", thread=BOUND, in_reply_to=None)  # fmt: skip
    facts = Facts(me_agent="bob", me_address="beta@bus.test", opener_due=True)
    filing = route(Verdict("accept", letter=question, addressed=("beta@bus.test",)), facts)
    assert filing.action == "quarantine"
    assert filing.verdict == Verdict(
        "quarantine",
        letter=question,
        reason="awaiting-parent",
        detail=f"it writes into {BOUND}, whose opener is not filed here yet: it waits for it "
        "(a thread is its opener's, never its first answer's)",
    )


def test_a_message_id_holding_a_lone_surrogate_still_binds_a_thread() -> None:
    # a header's undecodable byte reaches the id as a lone surrogate (surrogateescape): no crash,
    # and the id is bound to that byte
    thread = bound_thread_id("alpha@bus.test", "<01m.\udcff@bus.test>")
    assert is_bound(thread) and thread != bound_thread_id("alpha@bus.test", "<01m.\udcfe@bus.test>")
    assert thread == bound_thread_id("ALPHA@bus.test ", " <01m.\udcff@bus.test>")
