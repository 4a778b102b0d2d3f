"""Issue 25: one platform on several machines (each its own ``$AGENTMAIL_HOME``). The new-thread
quota counts what the server holds from every machine (the local post office's markers, the
IMAP sent folder), and ``note --to`` refuses an agent name no agent of the platform has used."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.cli.app import main
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import Refused
from agentmail.transport.base import opener_header, opener_id

from ..conftest import OPENER
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import USERS, make_bus


def _machine(home: Path, name: str) -> Path:
    """Another machine's home: the platform's secrets copied to it, nothing else."""
    other = home.parent / name
    other.mkdir()
    shutil.copytree(home / "secrets", other / "secrets")
    return other


def _second_home(home: Path) -> Path:
    """Another machine's home on the same post office (the post office is what they share)."""
    other = _machine(home, "home-b")
    (other / "postoffice").symlink_to(home / "postoffice", target_is_directory=True)
    return other


@pytest.fixture
def capped(registry: Registry, home: Path) -> Registry:
    bus.set_setting(home / "registry", "new_threads_per_hour", ["2"])
    return registry_mod.load(home / "registry")


def test_the_quota_counts_the_threads_every_home_opened_on_one_post_office(capped: Registry, home: Path) -> None:
    (home / "postoffice").mkdir(exist_ok=True)
    other = _second_home(home)
    on_a, on_b = AgentMail(capped, Identity("alpha"), home), AgentMail(capped, Identity("alpha"), other)
    assert on_a.send("beta", "One", OPENER).state == "sent"
    assert on_b.send("beta", "Two", OPENER).state == "sent"
    for machine in (on_a, on_b):  # each home filed one: 1 + 1 = the cap of 2 for the platform
        with pytest.raises(Refused, match=r"new-thread quota reached: alpha opened 2 threads"):
            machine.send("beta", "Three", OPENER)
    beta = AgentMail(capped, Identity("beta"), home)
    assert beta.send("alpha", "Theirs", OPENER).state == "sent"  # per platform
    assert {x.subject for x in beta.inbox()} == {"One", "Two"}
    (got,) = [x for x in beta.inbox() if x.subject == "One"]
    assert beta.reply(got, "Which plan?", type="question") is not None
    (question,) = [x for x in on_b.inbox() if x.type == "question"]
    assert on_b.reply(question, "The free plan.", type="question") is not None  # in a thread: not counted


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def test_the_quota_counts_the_sent_folder_of_one_imap_mailbox(home: Path, servers: MailServers) -> None:
    reg = make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=2)
    other = _machine(home, "home-b")
    with AgentMail(reg, Identity("alpha"), home) as on_a, AgentMail(reg, Identity("alpha"), other) as on_b:
        assert on_a.send("beta", "One", OPENER).state == "sent"
        assert on_b.send("beta", "Two", OPENER).state == "sent"
        assert len(servers.store.messages("alpha@bus.test", "Sent")) == 2
        with pytest.raises(Refused, match=r"alpha opened 2 threads"):
            on_a.send("beta", "Three", OPENER)
        fresh = _machine(home, "home-c")  # a new machine, empty spool: the server's count alone
        with AgentMail(reg, Identity("alpha"), fresh) as on_c, pytest.raises(Refused, match=r"opened 2 threads"):
            on_c.send("beta", "Three", OPENER)


def test_note_to_an_agent_no_one_has_used_is_refused_unless_new(
    registry: Registry, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alice = AgentMail(registry, Identity("alpha", "alice"), home)
    alice.note("Handover", "The quota fix is on branch fix-quota.", to_agent="bob")  # the library: as before
    args = ["--as", "alpha", "--agent", "alice", "note", "-s", "Handover", "-b", "The migration is half done."]
    assert main([*args, "--to", "bobb"]) == 2
    _out, err = capsys.readouterr()
    (line,) = err.strip().splitlines()
    assert "'bobb'" in line and "known: alice, bob" in line and "--new-agent" in line
    assert main([*args, "--to", "bob", "--json"]) == 0  # known: a note was addressed to it
    capsys.readouterr()
    assert main([*args, "--to", "carol", "--new-agent", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["to_agent"] == "carol"
    assert main([*args, "--to", "carol"]) == 0  # known now


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_an_opener_header_from_the_server_never_raises(header: bytes) -> None:
    found = opener_header(header)
    assert found is None or (isinstance(found[0], str) and isinstance(found[1], int))
    message_id = opener_id(header)
    assert message_id is None or (message_id.strip() == message_id and message_id)
    assert found is None or found[0] == message_id


def test_only_an_agentmail_letter_that_opens_a_thread_is_an_opener() -> None:
    base = b"Message-ID: <1@bus.test>\r\nDate: Wed, 02 Dec 2026 17:00:00 +0000\r\n"
    assert opener_header(base + b"X-Agentmail-Type: report\r\n") == ("<1@bus.test>", 1796230800000)
    assert opener_header(base + b"X-Agentmail-Type: note\r\n") is None
    assert opener_header(base + b"X-Agentmail-Type: ack\r\nIn-Reply-To: <0@bus.test>\r\n") is None
    assert opener_header(base) is None  # a person's letter
    folded = b"Message-ID:\r\n <2@bus.test>\r\nX-Agentmail-Type: report\r\nx-agentmail-type: note\r\n"
    assert opener_id(folded) == "<2@bus.test>"  # folded value joined; the first of a field counts


def test_the_post_office_markers_count_each_opener_once_and_skip_what_is_no_marker(
    capped: Registry, home: Path
) -> None:
    """A letter submitted again (a retried outbox) is one opener; in the marker folders a name
    that is no time, a marker older than the window, an empty one and a folder where a marker
    should be are passed over, never read as openers and never an error."""
    from agentmail.ages import now_ms
    from agentmail.transport.base import Envelope, Outgoing
    from agentmail.transport.local import LocalTransport

    alpha = AgentMail(capped, Identity("alpha"), home)
    sent = alpha.send("beta", "One", OPENER)
    transport = LocalTransport(home / "postoffice", "alpha", lambda address: "beta")
    again = Outgoing("again", alpha.raw(sent.id), Envelope(alpha.platform.address, ("beta@bus.test",)))
    assert transport.submit([again])[0].status == "sent"  # delivered twice, one marker
    cutoff = now_ms() - 3_600_000
    assert list(transport.openers_since(cutoff)) == [sent.message_id]
    folder = next((home / "postoffice" / ".opened" / "alpha").iterdir())
    (folder / "not-a-time").write_text("<x@bus.test>")
    (folder / f"{cutoff - 5}-old").write_text("<old@bus.test>")
    (folder / f"{now_ms()}-empty").write_bytes(b"")
    (folder / f"{now_ms()}-folder").mkdir()
    assert list(transport.openers_since(cutoff)) == [sent.message_id]
    reply = alpha.follow_up(sent.thread, "And one more detail.", type="report")
    assert reply.state == "sent" and list(transport.openers_since(cutoff)) == [sent.message_id]  # no opener
