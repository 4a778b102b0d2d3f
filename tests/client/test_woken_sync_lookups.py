"""A woken sync of one letter asks the spool for its (sender, Message-ID) once: the duplicate
check's look-up is handed to the facts (``Receiver._seen``), which asked it again, and what
they find is what asking again finds."""

from __future__ import annotations

from agentmail.client.facade import AgentMail
from agentmail.stages.facts import gather

from ..conftest import OPENER


def _traced(mail: AgentMail, run: object) -> list[str]:
    said: list[str] = []
    db = mail.receiver.spool.read.sql()
    db.set_trace_callback(said.append)
    try:
        assert callable(run)
        run()
    finally:
        db.set_trace_callback(None)
    return said


def test_a_woken_sync_looks_the_letters_message_id_up_once(alpha: AgentMail, beta: AgentMail) -> None:
    beta.receiver.sync(woken=True)  # the spool made, nothing to fetch
    sent = alpha.send("beta", "One", OPENER)
    said = _traced(beta, lambda: beta.receiver.sync(woken=True))
    # one statement asks by (sender, Message-ID) and by the bytes' hash
    assert sum(s.startswith("SELECT") and ("msgkey" in s or "rawkey" in s) for s in said) == 1
    (letter,) = beta.inbox()
    assert letter.message_id == sent.message_id


def test_the_facts_from_the_look_up_made_once_are_those_asked_afresh(alpha: AgentMail, beta: AgentMail) -> None:
    receiver = beta.receiver
    sent = alpha.send("beta", "One", OPENER)
    fresh = alpha.receiver.spool.read.raw(alpha.receiver.spool.read.known("alpha", sent.message_id) or "")
    assert receiver._seen(fresh) == (("alpha", sent.message_id, None), False)  # not filed here yet
    verdict, facts = receiver._judged(fresh)
    assert verdict is not None and verdict.route == "accept"
    spool, me = receiver.spool.read, receiver.me
    assert facts == gather(spool, receiver.registry, me, receiver.platform.address, verdict)
    receiver.sync()
    (filed,) = beta.inbox()
    # Filed now: the bytes are a duplicate, and the facts of a letter judged under a filed
    # (sender, Message-ID) name the letter filed, as asking afresh does.
    assert receiver._seen(fresh) == (("alpha", sent.message_id, filed.id), False)
    assert receiver._judged(fresh)[0] is None
    again = gather(spool, receiver.registry, me, receiver.platform.address, verdict, seen=receiver._seen(fresh)[0])
    assert again == gather(spool, receiver.registry, me, receiver.platform.address, verdict)
    assert again.filed_as == filed.id
    # A look-up of another (sender, Message-ID) is not taken for this letter's.
    other = gather(spool, receiver.registry, me, receiver.platform.address, verdict, seen=("alpha", "<x@y>", "zz"))
    assert other.filed_as == filed.id


def test_a_letter_whose_from_names_no_platform_is_found_by_its_bytes(beta: AgentMail) -> None:
    raw = b"From: someone@elsewhere.test\r\nMessage-ID: <1@elsewhere.test>\r\n\r\nhello\r\n"
    assert beta.receiver._seen(raw) == (None, None)
    assert beta.receiver.spool.read.holds_bytes(raw, None) is False
