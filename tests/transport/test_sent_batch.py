"""Sent-folder copies batched across sends (issue 28 target 3): a letter no other machine needs
to see at once is copied with the others at the next sync, wait, flush or close, in one
MULTIAPPEND; replies and openers under the new-thread quota are copied as they go; copies a
killed process left due are made once. Counted by the in-process IMAP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail.cli.app import main
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity

from ..conftest import OPENER
from ..mailservers import MailServers
from .test_transport_smtpimap import USERS, make_bus


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def _copies(servers: MailServers) -> list[bytes]:
    return [m.data for m in servers.store.messages("alpha@bus.test", "Sent")]


def _once_each(servers: MailServers, message_ids: list[str]) -> bool:
    copies = _copies(servers)
    return len(copies) == len(message_ids) and all(sum(mid.encode() in c for c in copies) == 1 for mid in message_ids)


def test_sends_are_copied_in_one_command_at_the_next_sync(home: Path, servers: MailServers) -> None:
    reg = make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=0)
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        appends = servers.store.counts["imap.APPEND"]
        sent = [alpha.send("beta", f"Batch {n}", OPENER) for n in range(5)]
        assert [x.state for x in sent] == ["sent"] * 5
        assert servers.store.counts["imap.APPEND"] == appends and _copies(servers) == []  # not yet
        alpha.sync()
        assert servers.store.counts["imap.APPEND"] == appends + 1  # one MULTIAPPEND for the five
        assert _once_each(servers, [x.message_id for x in sent])
        alpha.sync()  # nothing due: nothing copied again
        assert servers.store.counts["imap.APPEND"] == appends + 1


@pytest.mark.parametrize("how", ["close", "flush", "wait"])
def test_close_flush_and_wait_copy_what_is_due(home: Path, servers: MailServers, how: str) -> None:
    from agentmail.errors import Timeout

    reg = make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=0)
    alpha = AgentMail(reg, Identity("alpha"), home)
    sent = [alpha.send("beta", f"Due {n}", OPENER) for n in range(3)]
    if how == "close":
        alpha.close()
    elif how == "flush":
        alpha.flush()
    else:
        with pytest.raises(Timeout):
            alpha.wait(timeout=0.01)
    assert _once_each(servers, [x.message_id for x in sent])
    alpha.close()
    assert _once_each(servers, [x.message_id for x in sent])


def test_a_reply_and_an_opener_under_the_quota_are_copied_as_they_go(home: Path, servers: MailServers) -> None:
    reg = make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=20)
    with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
        opener = alpha.send("beta", "Counted", OPENER)  # the quota on other machines counts its copy
        assert _once_each(servers, [opener.message_id])
        (got,) = beta.inbox()
        answer = beta.reply(got, "Reproduced it; fixing.", type="ack")  # tells beta's other machines
        assert answer is not None
        (copy,) = servers.store.messages("beta@bus.test", "Sent")
        assert answer.message_id.encode() in copy.data


def test_copies_a_killed_process_left_due_are_made_once(home: Path, servers: MailServers) -> None:
    reg = make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=0)
    first = AgentMail(reg, Identity("alpha"), home)
    sent = [first.send("beta", f"Before the kill {n}", OPENER) for n in range(3)]
    # Killed after its copy of the first letter reached the server, before it noted that: the
    # server holds one copy, the spool still lists all three as due.
    servers.store.inject("alpha@bus.test", first.spool.read.path("sent", sent[0].id).read_bytes(), "Sent")
    first.box.close()  # its connections go; the process never copies what it left due
    with AgentMail(reg, Identity("alpha"), home) as again:
        again.sync()
        assert _once_each(servers, [x.message_id for x in sent])
        later = again.send("beta", "After the restart", OPENER)
    assert _once_each(servers, [*(x.message_id for x in sent), later.message_id])


def test_the_cli_copies_each_letter_as_it_sends_it(home: Path, servers: MailServers) -> None:
    make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=0)
    for n in range(2):
        appends = servers.store.counts["imap.APPEND"]
        assert main(["--as", "alpha", "send", "beta", "-s", f"From the CLI {n}", "-b", OPENER]) == 0
        assert servers.store.counts["imap.APPEND"] == appends + 1
    assert len(_copies(servers)) == 2


def test_without_a_sent_folder_nothing_is_due(home: Path, servers: MailServers) -> None:
    reg = make_bus(home, servers, sent_folder="", new_threads_per_hour=0)
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        alpha.send("beta", "Nowhere", OPENER)
        assert alpha.spool.read.copies_due() == []
        assert alpha.copy_sent() == 0
    assert servers.store.counts["imap.APPEND"] == 0


def test_copies_wait_for_a_server_that_cannot_be_reached_and_are_made_once_after(
    home: Path, servers: MailServers
) -> None:
    reg = make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=0)
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        sent = [alpha.send("beta", f"Through an outage {n}", OPENER) for n in range(3)]
        servers.stop_imap()
        assert alpha.copy_sent() == 0  # not a failure of the copies: the server is away
        assert all("sent_copy_failed" not in alpha.show(x.id).extra for x in sent)
        assert sorted(alpha.spool.read.copies_due()) == sorted(x.id for x in sent)
        servers.start_imap()
        # The connection may have broken after one APPEND went through: that one is there.
        servers.store.append("alpha@bus.test", "Sent", alpha.spool.read.path("sent", sent[0].id).read_bytes())
        searches = servers.store.counts["imap.UID SEARCH"] + servers.store.counts["imap.SEARCH"]
        assert alpha.copy_sent() == 3  # all three in Sent now, the one already there not appended again
        assert servers.store.counts["imap.UID SEARCH"] + servers.store.counts["imap.SEARCH"] > searches  # it looked
        assert not alpha.spool.read.copies_due()
    assert _once_each(servers, [x.message_id for x in sent])
