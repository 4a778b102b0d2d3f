"""A send returns the letter it filed, moved to ``sent``, rather than reading it back
(client/outbox.py ``send_now``): the same letter, ``extra`` and all, as reading it back gives."""

from __future__ import annotations

from typing import Any

import pytest

from agentmail.client.facade import AgentMail
from agentmail.letter import attach
from agentmail.model import Letter
from agentmail.spool import SpoolReader

from ..conftest import OPENER


def _whole(letter: Letter) -> dict[str, Any]:
    """Everything a caller sees (``extra`` is left out of a Letter's equality)."""
    return {**letter.to_json(), "extra": letter.extra}


def _read_back(mail: AgentMail, letter: Letter) -> Letter:
    return mail.sender.box.show(letter.id)


def test_each_kind_of_send_returns_what_reading_it_back_gives(alpha: AgentMail, beta: AgentMail) -> None:
    opened = alpha.send("beta", "Quota", OPENER, severity="high", ref="billing-7")
    question = alpha.send("beta", "One thing", "Which version?", type="question")
    (got, _) = beta.inbox()
    reply = beta.reply(got, "We run 2.4.1 since Monday; it returns 500 for every invoice.", type="ack")
    follow = alpha.send("beta", "", "One more detail: it started at 09:00 UTC.", thread=opened.thread)
    note = alpha.note("For my sibling", "Watch the quota thread.")
    log = attach.Attachment("run.log", "text/x-log", b"ERROR boom\n")
    attached = alpha.send("beta", "With a log", OPENER, attachments=(log,))
    assert reply is not None
    for sent, mail in ((opened, alpha), (question, alpha), (reply, beta), (follow, alpha), (note, alpha),
                       (attached, alpha)):  # fmt: skip
        assert sent.state == "sent"
        assert _whole(sent) == _whole(_read_back(mail, sent))
    assert attached.extra["attachments"] and "sha256" in attached.extra  # noted when filed: read back


def test_a_plain_send_reads_no_letter_back(alpha: AgentMail, monkeypatch: pytest.MonkeyPatch) -> None:
    alpha.send("beta", "Warm", OPENER)  # the mailbox made, the transport opened
    read: list[str] = []
    real = SpoolReader.meta

    def recording(self: SpoolReader, letter_id: str, state: str | None = None) -> dict[str, Any]:
        read.append(letter_id)
        return real(self, letter_id, state)

    monkeypatch.setattr(SpoolReader, "meta", recording)
    sent = alpha.send("beta", "Quota", OPENER)
    assert sent.state == "sent" and sent.id not in read
