"""Attacks on the waiting list (``awaiting-parent``): what a hostile partner can do with answers
that wait for the letter they answer (docs/threat/attacks-session6.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail import bounds
from agentmail.config.credentials import read_private_key
from agentmail.config.registry import Registry
from agentmail.letter import wire
from agentmail.model import new_thread_id
from agentmail.transport.local import deliver
from agentmail.trust import signing

from ..people.test_writing import vouched
from .test_addressed import signed_to
from .test_parties import box, carol_listed_twice, three, written_into  # noqa: F401  (the fixture)
from .test_preemption import ANSWER, _lose_the_database, _opener_and_answer


def _orphan(reg: Registry, home: Path, sender: str) -> bytes:
    """``sender``'s answer to a letter that never comes, into a thread of its own: it waits."""
    parent = ANSWER.replace(message_id=wire.new_message_id(sender, "bus.test"), thread=new_thread_id())
    return written_into(reg, home, sender, "beta", parent.replace(in_reply_to=None), "question")


def test_a_flood_of_one_partners_orphan_answers_does_not_hold_back_anothers_answer(
    three: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gamma fills the waiting window with answers to letters that never come; alpha's answer that
    overtook its opener still goes on in the sync that files the opener, not an hour later."""
    monkeypatch.setattr(bounds, "WAITING", 3)
    office = home / "postoffice" / "beta"
    for _ in range(5):
        deliver(office, _orphan(three, home, "gamma"))
    opener, answer, thread = _opener_and_answer(three, home)
    deliver(office, answer)
    beta = box(three, home, "beta")
    assert beta.inbox() == []
    deliver(office, opener)
    assert [x.thread for x in beta.inbox()] == [thread, thread]
    assert [q.reason for q in beta.quarantined(sync=False)] == ["awaiting-parent"] * 5


def test_an_outsider_who_opens_the_thread_before_its_opener_lands_does_not_take_it(three: Registry, home: Path) -> None:
    """gamma learnt the thread of alpha's opener to beta (a follower's copy) and, instead of answering
    it (which would wait), writes a fresh letter into that thread before the opener lands."""
    opener, _answer, thread = _opener_and_answer(three, home)
    office = home / "postoffice" / "beta"
    deliver(office, signed_to(three, home, "gamma", f"beta+{thread}@bus.test", thread=thread))
    beta = box(three, home, "beta")
    beta.sync()
    deliver(office, opener)
    assert "alpha" in {x.sender for x in beta.inbox()}


def test_a_platform_listing_a_person_cannot_use_up_her_letter_with_its_own_under_her_message_id(
    three: Registry, home: Path
) -> None:
    """carol writes for beta; alpha (hostile) lists her too and learnt the Message-ID of her letter
    to gamma. alpha's own letter under that Message-ID, landing first, does not make hers a duplicate."""
    reg, gamma, sent, report, answer = carol_listed_twice(three, home)
    me = reg.get("alpha")
    thread = new_thread_id()
    forged = wire.draft_letter(me.address, "", f"gamma+{thread}@bus.test", "report", thread, "Quota", "Body.\n",
                               message_id=str(answer["Message-ID"]))  # fmt: skip
    deliver(home / "postoffice" / "gamma", signing.sign(wire.render(forged), me.dkim_domain, me.selector,
                                                        read_private_key(home, "alpha")))  # fmt: skip
    deliver(home / "postoffice" / "gamma", vouched(answer))
    mine = [x for x in gamma.inbox() if x.extra.get("person")]
    assert [x.body.strip() for x in mine] == ["Any news?"] and mine[0].thread == report.thread
    _lose_the_database(gamma)
    gamma = box(reg, home, "gamma")
    gamma.rebuild()
    assert [x.body.strip() for x in gamma.inbox(sync=False) if x.extra.get("person")] == ["Any news?"]
