"""The spool's two moves out of quarantine for `quarantine recheck` (issue 26): a letter that
passes now is released in place, once; a copy of a letter filed already is dropped, once."""

from __future__ import annotations

from agentmail.client.facade import AgentMail
from agentmail.model import Letter


def _quarantined(beta: AgentMail, **extra: str) -> tuple[str, Letter]:
    letter = Letter(
        message_id="<late.1@bus.test>",
        sender="alpha",
        sender_address="alpha@bus.test",
        to="beta",
        to_address="beta@bus.test",
        type="report",
        thread="thr-aaaaaaaaaa",
        subject="Quota",
        body="The quota endpoint returns 500.",
        date="Tue, 01 Dec 2026 09:00:00 +0000",
        extra=extra,
    )
    filed = beta.spool.write.store(
        "quarantine", letter.replace(reason="unauthenticated"), b"X: y\r\n\r\nquota\r\n", index=False
    )
    return filed.id, letter


def test_a_released_letter_is_unread_in_place_and_a_second_release_finds_nothing(beta: AgentMail) -> None:
    letter_id, letter = _quarantined(beta)
    assert beta.spool.write.release(letter_id, letter) is True
    assert beta.spool.read.locate(letter_id) == "unread" and [x.id for x in beta.inbox(sync=False)] == [letter_id]
    assert beta.spool.write.release(letter_id, letter) is False  # another recheck won: no second filing
    assert beta.spool.read.locate(letter_id) == "unread"


def test_a_released_persons_letter_keeps_what_shows_it_as_theirs(beta: AgentMail) -> None:
    letter_id, letter = _quarantined(beta, person="carol@people.test")
    assert beta.spool.write.release(letter_id, letter) is True
    assert beta.spool.read.annotations(letter_id)["person_letter"]["person"] == "carol@people.test"
    assert beta.show(letter_id).extra.get("person") == "carol@people.test"


def test_dropping_a_quarantined_copy_removes_it_once_and_nothing_else(beta: AgentMail) -> None:
    letter_id, _ = _quarantined(beta)
    assert beta.spool.write.drop_quarantined(letter_id) is True
    assert beta.spool.read.locate(letter_id) is None and beta.spool.read.file_of(letter_id) is None
    assert beta.spool.write.drop_quarantined(letter_id) is False
