"""Round trips the smtp+imap transport no longer spends (issue 28 target 3), on the in-process
servers: counted by the server, so a command added back fails here. And the one reuse it makes,
a sync's fetch taking the look ``pending`` just took, never hides a letter; nor does an SMTP
session reused without a NOOP while its replies are fresh."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.transport import smtpimap
from agentmail.transport.smtpimap import SmtpImapTransport

from ..conftest import OPENER, eventually
from ..mailservers import MailServers
from .test_transport_smtpimap import USERS, make_bus


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def test_copies_to_sent_look_for_the_folder_once_not_per_letter(home: Path, servers: MailServers) -> None:
    reg = make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=0)
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        alpha.send("beta", "First", OPENER)
        assert alpha.copy_sent() == 1
        lists = servers.store.counts["imap.LIST"]
        for n in range(3):
            assert alpha.send("beta", f"Next {n}", OPENER).state == "sent"
            assert alpha.copy_sent() == 1
        assert servers.store.counts["imap.LIST"] == lists  # no LIST before each APPEND
        servers.store.refuse_appends(1)
        refused = alpha.send("beta", "Refused copy", OPENER)
        assert alpha.copy_sent() == 0
        assert "sent_copy_failed" in alpha.show(refused.id).extra
        again = alpha.send("beta", "After the refusal", OPENER)  # looks for the folder again, copies
        assert alpha.copy_sent() == 1
        assert "sent_copy_failed" not in alpha.show(again.id).extra
        assert servers.store.counts["imap.LIST"] == lists + 1
    assert len(servers.store.messages("alpha@bus.test", "Sent")) == 5


def _transport(home: Path, servers: MailServers) -> tuple[SmtpImapTransport, AgentMail]:
    reg = make_bus(home, servers, sent_folder="", new_threads_per_hour=0)
    return SmtpImapTransport.from_registry(reg, "beta", home), AgentMail(reg, Identity("alpha"), home)


def _letters(transport: SmtpImapTransport, checkpoint: str) -> list[bytes]:
    return [item.raw or b"" for batch in transport.fetch(checkpoint, 10_000_000) for item in batch]


def test_a_fetch_right_after_pending_saw_letters_takes_its_look(home: Path, servers: MailServers) -> None:
    beta, alpha = _transport(home, servers)
    try:
        start = beta.tip()
        sent = alpha.send("beta", "Waiting", OPENER)
        assert eventually(lambda: beta.pending(start))
        looks = servers.store.counts["imap.EXAMINE"] + servers.store.counts["imap.SELECT"]
        assert beta.pending(start)
        (raw,) = _letters(beta, start)
        assert sent.message_id.encode() in raw
        assert servers.store.counts["imap.EXAMINE"] + servers.store.counts["imap.SELECT"] == looks + 1
    finally:
        beta.close()
        alpha.close()


def test_a_look_that_saw_nothing_or_was_followed_by_a_command_is_taken_again(home: Path, servers: MailServers) -> None:
    beta, alpha = _transport(home, servers)
    try:
        start = beta.tip()
        assert not beta.pending(start)  # nothing yet: this look must not stand for the fetch
        sent = alpha.send("beta", "Arrives after the look", OPENER)
        assert eventually(lambda: bool(servers.store.messages("beta@bus.test")))
        (raw,) = _letters(beta, start)  # looks again, finds it
        assert sent.message_id.encode() in raw
        later = alpha.send("beta", "Second", OPENER)
        assert eventually(lambda: len(servers.store.messages("beta@bus.test")) == 2)
        assert beta.pending(start)
        beta._connect().noop()  # a command since the look: the selection may have changed
        looks = servers.store.counts["imap.EXAMINE"]
        got = _letters(beta, start)
        assert servers.store.counts["imap.EXAMINE"] == looks + 1
        assert any(later.message_id.encode() in r for r in got)
    finally:
        beta.close()
        alpha.close()


def test_a_burst_of_sends_reuses_the_session_without_a_noop_a_quiet_one_is_checked(
    home: Path, servers: MailServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = make_bus(home, servers, sent_folder="", new_threads_per_hour=0)
    monkeypatch.setattr(smtpimap, "SESSION_TRUSTED", float("inf"))  # however slow the machine
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        for n in range(4):
            assert alpha.send("beta", f"Burst {n}", OPENER).state == "sent"
        assert servers.store.counts["smtp.auth"] == 1
        assert servers.store.counts["smtp.NOOP"] == 0  # fresh replies vouch for the session
        monkeypatch.setattr(smtpimap, "SESSION_TRUSTED", 0.0)  # as if it had been quiet for long
        assert alpha.send("beta", "After a pause", OPENER).state == "sent"
        assert servers.store.counts["smtp.NOOP"] == 1
        assert servers.store.counts["smtp.auth"] == 1  # the NOOP vouched; no second login


def test_the_sent_record_looks_for_its_folder_once_and_takes_a_deletion_in_its_stride(
    home: Path, servers: MailServers
) -> None:
    reg = make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=0)
    second = home.parent / "second"  # another machine of alpha: the registry, keys and logins
    shutil.copytree(home, second, ignore=shutil.ignore_patterns("spool"))
    with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("alpha"), second) as other:
        alpha.send("beta", "First", OPENER)
        alpha.copy_sent()
        other.sync()  # reads alpha's copy from Sent: one LIST finds the folder
        lists = servers.store.counts["imap.LIST"]
        for n in range(3):
            alpha.send("beta", f"Next {n}", OPENER)
            alpha.copy_sent()
            other.sync()
        assert servers.store.counts["imap.LIST"] == lists  # not one per sync
        assert len([x for x in other.sent() if x.subject.startswith(("First", "Next"))]) == 4
        servers.store.delete_folder("alpha@bus.test", "Sent")  # by a person, in a mail client
        other.sync()  # nothing to read there now: not an error
        refused = alpha.send("beta", "Right after the deletion", OPENER)
        assert alpha.copy_sent() == 0  # the APPEND is refused, and said (as before this change)
        assert "sent_copy_failed" in alpha.show(refused.id).extra
        later = alpha.send("beta", "After the deletion", OPENER)
        assert alpha.copy_sent() == 1  # this copy looked again and made the folder
        other.sync()
        assert any(x.message_id == later.message_id for x in other.sent())


def test_a_look_at_the_sent_folder_between_pending_and_the_fetch_keeps_the_inbox_look(
    home: Path, servers: MailServers
) -> None:
    reg = make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=0)
    beta = SmtpImapTransport.from_registry(reg, "beta", home)
    servers.store.create_folder("beta@bus.test", "Sent")
    try:
        with AgentMail(reg, Identity("alpha"), home) as alpha:
            start = beta.tip()
            sent = alpha.send("beta", "Waiting", OPENER)
            assert eventually(lambda: bool(servers.store.messages("beta@bus.test")))
            assert beta.pending(start)
            looks = servers.store.counts["imap.EXAMINE"] + servers.store.counts["imap.SELECT"]
            statuses = servers.store.counts["imap.STATUS"]
            beta.sent_pending(None)  # one STATUS of Sent, whatever it finds
            assert servers.store.counts["imap.STATUS"] == statuses + 1
            (raw,) = _letters(beta, start)
            assert sent.message_id.encode() in raw
            assert servers.store.counts["imap.EXAMINE"] + servers.store.counts["imap.SELECT"] == looks
    finally:
        beta.close()
