"""The client's routing stage (sync: fetch, judge, route, file), exactly: what a quarantined
letter is filed as when judging could not read it, and what each filing does to the report
and the spool. Letters are delivered as bytes into the local post office and synced in-process."""

from __future__ import annotations

import pytest

from agentmail.client.facade import AgentMail
from agentmail.transport import local

from ..client.test_recovery import _disk_full_on_write
from ..conftest import OPENER
from ..trust.test_authenticity import letter_bytes


def deliver(to: AgentMail, raw: bytes) -> None:
    local.deliver(to.home / "postoffice" / (to.me.agent or to.me.platform), raw)


def test_an_unreadable_letter_is_filed_under_what_its_headers_said(beta: AgentMail) -> None:
    raw = (
        b"From: a@bus.test\r\nFrom: b@bus.test\r\nTo: beta@bus.test\r\nSubject: Two senders\r\n"
        b"Message-ID: <2f.x@bus.test>\r\nDate: Tue, 01 Dec 2026 00:00:00 +0000\r\n\r\nHello\r\n"
    )
    deliver(beta, raw)
    (held,) = beta.sync().quarantined
    expected = dict(
        state="quarantine",
        reason="malformed",
        detail="the letter has 2 From headers; exactly one is allowed",
        message_id="<2f.x@bus.test>",
        sender="",
        sender_address="a@bus.test",
        to=beta.me.platform,
        to_address=beta.platform.address,
        type="",
        thread="",
        subject="Two senders",
        body="",
        date="Tue, 01 Dec 2026 00:00:00 +0000",
    )
    assert held.id
    for letter in (held, *beta.quarantined(sync=False)):
        assert {k: getattr(letter, k) for k in expected} == expected
        assert letter.id == held.id
    assert beta.raw(held.id) == raw


def test_a_letter_too_large_to_download_is_filed_with_nothing_read_from_it(beta: AgentMail) -> None:
    big = letter_bytes(body="x" * 1_100_000)
    deliver(beta, big)
    (held,) = beta.sync().quarantined
    nothing = dict(message_id="", sender="", sender_address="", subject="", date="", type="", thread="", body="")
    assert {k: getattr(held, k) for k in nothing} == nothing
    assert (held.to, held.to_address, held.reason) == (beta.me.platform, beta.platform.address, "too-large")
    placeholder = beta.raw(held.id)  # names the mailbox slot: a refetch of it is a duplicate
    assert placeholder.startswith(f"X-Agentmail-Not-Downloaded: {len(big)} bytes (local ".encode())
    assert placeholder.endswith(b")\r\n\r\n")


def test_a_quarantined_letter_is_part_of_its_batch(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that fails half way (a full disk) takes its quarantined letters with it: none is
    filed before the batch commits, so the refetch quarantines each once, never twice."""
    deliver(beta, b"From: a@bus.test\r\nFrom: b@bus.test\r\nMessage-ID: <2f.x@bus.test>\r\n\r\nHello\r\n")
    alpha.send("beta", "After the odd one", OPENER)
    _disk_full_on_write(beta.spool, monkeypatch, nth=2)
    with pytest.raises(OSError, match="No space"):
        beta.sync()
    assert beta.quarantined(sync=False) == []
    monkeypatch.undo()
    monkeypatch.setenv("AGENTMAIL_HOME", str(beta.home))  # undo() also undid the autouse home fixture's env
    report = beta.sync()
    assert (len(report.quarantined), len(report.accepted), report.duplicates) == (1, 1, 0)
    assert len(beta.quarantined(sync=False)) == 1
