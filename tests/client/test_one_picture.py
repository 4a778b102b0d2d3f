"""One picture per platform (issue 25): every mailbox of a platform, in this home or on another
machine, sees the letters the others sent — from the server's sent record (the IMAP sent folder,
the post office's ``.sent/<platform>/``) — filed as ``sibling``: in ``status``, ``thread`` and
``sent``, never in the inbox, never answered, never sent again, counted once by the quota."""

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
from agentmail.transport.local import deliver

from ..conftest import OPENER
from ..depth import examples
from ..mailservers import MailServers
from ..people.test_writing import client_letter, people, vouched  # noqa: F401  (the fixture)
from ..transport.test_transport_smtpimap import USERS, make_bus


def _machine(home: Path, name: str, *, share_postoffice: bool) -> Path:
    """Another machine's home: the platforms' secrets (and the registry) copied, no spool."""
    other = home.parent / name
    shutil.copytree(home, other, ignore=shutil.ignore_patterns("spool", "postoffice"))
    if share_postoffice:
        (home / "postoffice").mkdir(exist_ok=True)
        (other / "postoffice").symlink_to(home / "postoffice", target_is_directory=True)
    return other


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def _acked_on_a(reg: Registry, home: Path, on_b: Path | None = None) -> tuple[str, str]:
    """alpha reports to beta; unnamed ``beta`` on ``on_b`` reads it ("reported, move: me"), then
    ``beta@laptop`` on home A acks it. (thread, the ack's Message-ID)."""
    for where, who in ((home, Identity("beta", "laptop")), (on_b, Identity("beta"))):
        if where is not None:  # both mailboxes read before: a new one starts at the platform's position
            with AgentMail(reg, who, where) as mailbox:
                mailbox.sync()
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        report = alpha.send("beta", "Quota 500s", OPENER)
    with AgentMail(reg, Identity("beta", "laptop"), home) as laptop:
        (got,) = laptop.inbox()
        if on_b is not None:
            with AgentMail(reg, Identity("beta"), on_b) as beta:
                (row,) = beta.status()
                assert (row.state, row.whose_move) == ("reported", "me")
        ack = laptop.reply(got, "Reproduced; fixing.", type="ack")
    assert ack is not None and ack.state == "sent"
    return report.thread, ack.message_id


def _sees_the_ack(beta: AgentMail, thread: str, ack_mid: str) -> None:
    assert beta.inbox() == []  # answered by the platform: nothing to answer here
    (row,) = beta.status()
    assert (row.thread, row.state, row.last_type) == (thread, "acknowledged", "ack")
    assert [(x.type, x.state) for x in beta.thread(thread)] == [("report", "read"), ("ack", "sibling")]
    (mine,) = beta.sent()
    assert (mine.message_id, mine.state) == (ack_mid, "sibling")
    report = beta.thread(thread)[0]
    assert beta.reply(report, "Again.", type="ack") is None  # the platform answered it already
    assert "already answered" in (beta.why_refused(report) or "")
    with pytest.raises(Refused, match="one this platform sent"):
        beta.reply(beta.thread(thread)[1], "To my own ack?", type="question", raise_refused=True)


@pytest.mark.parametrize("where", ["same home", "another home"])
def test_on_the_post_office_b_sees_the_ack_a_sent(registry: Registry, home: Path, where: str) -> None:
    on_b = home if where == "same home" else _machine(home, "home-b", share_postoffice=True)
    thread, ack_mid = _acked_on_a(registry, home, on_b)
    with AgentMail(registry, Identity("beta"), on_b) as beta:
        _sees_the_ack(beta, thread, ack_mid)
        assert beta.sync().siblings == 0  # read once: the next sync files nothing again


def test_on_imap_a_second_machine_sees_the_ack_from_the_sent_folder(home: Path, servers: MailServers) -> None:
    reg = make_bus(home, servers, sent_folder="Sent")
    other = _machine(home, "machine-b", share_postoffice=False)
    thread, ack_mid = _acked_on_a(reg, home, other)
    with AgentMail(reg, Identity("beta"), other) as beta:
        _sees_the_ack(beta, thread, ack_mid)
    beta_mail = [m for m in servers.store.accepted if m.login == "beta@bus.test"]
    assert len(beta_mail) == 1  # the ack, once: a sibling's letter is never sent again


def test_the_cli_shows_the_siblings_ack_in_status_thread_and_sent(
    registry: Registry, home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _machine(home, "home-b", share_postoffice=True)
    thread, ack_mid = _acked_on_a(registry, home, other)
    monkeypatch.setenv("AGENTMAIL_HOME", str(other))
    capsys.readouterr()
    assert main(["--json", "--as", "beta", "status"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["state"], row["whose_move"]) == ("acknowledged", "me")
    assert main(["--as", "beta", "thread", thread]) == 0
    assert "(sent by another mailbox of this platform)" in capsys.readouterr().out
    assert main(["--json", "--as", "beta", "sent"]) == 0
    (sent,) = json.loads(capsys.readouterr().out)
    assert (sent["message_id"], sent["state"]) == (ack_mid, "sibling")


@pytest.mark.parametrize("transport", ["imap", "post office"])
def test_a_fresh_home_sees_the_open_threads_and_answers_nothing_another_machine_answered(
    home: Path, registry: Registry, servers: MailServers, transport: str
) -> None:
    reg = make_bus(home, servers, sent_folder="Sent") if transport == "imap" else registry
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        first = alpha.send("beta", "Answered on A", OPENER)
        second = alpha.send("beta", "Open, unanswered", OPENER)
    with AgentMail(reg, Identity("beta"), home) as on_a:
        got = {x.subject: x for x in on_a.inbox()}
        assert on_a.reply(got["Answered on A"], "On it.", type="ack") is not None
    fresh = _machine(home, "fresh", share_postoffice=transport == "post office")
    with AgentMail(reg, Identity("beta"), fresh) as beta:
        assert [x.subject for x in beta.inbox()] == ["Open, unanswered"]
        rows = {r.thread: r for r in beta.status()}
        assert set(rows) == {first.thread, second.thread}
        assert (rows[first.thread].state, rows[second.thread].state) == ("acknowledged", "reported")
        # the ack was read from the record before the report from the INBOX: filed after it all the same
        assert [(x.type, x.state) for x in beta.thread(first.thread)] == [("report", "read"), ("ack", "sibling")]
        (answered,) = [x for x in beta.thread(first.thread) if x.type == "report"]
        with pytest.raises(Refused, match="already answered"):
            beta.reply(answered, "Twice?", type="ack", raise_refused=True)


@pytest.mark.parametrize("where", ["same home", "another home"])
def test_a_persons_untagged_answer_to_a_siblings_letter_lands_in_its_thread(
    people: Registry,  # noqa: F811  (the fixture)
    home: Path,
    where: str,
) -> None:
    on_b = home if where == "same home" else _machine(home, "home-b", share_postoffice=True)
    with AgentMail(people, Identity("beta", "laptop"), home) as laptop:
        letter = laptop.send("alpha", "Quota 500s", OPENER)
    # carol answers beta's letter from her client, to beta's plain address (no thread tag)
    raw = vouched(client_letter("Beta <beta@bus.test>", "Is this still open?", in_reply_to=letter.message_id))
    deliver(home / "postoffice" / "beta", raw)
    with AgentMail(people, Identity("beta"), on_b) as beta:  # the unnamed mailbox reads it first
        (got,) = beta.inbox()
        assert (got.type, got.thread) == ("human", letter.thread)
        assert [x.type for x in beta.thread(letter.thread)] == ["report", "human"]


def test_the_quota_counts_a_siblings_opener_once(registry: Registry, home: Path) -> None:
    bus.set_setting(home / "registry", "new_threads_per_hour", ["2"])
    capped = registry_mod.load(home / "registry")
    with AgentMail(capped, Identity("alpha", "laptop"), home) as laptop:
        laptop.send("beta", "One", OPENER)
    with AgentMail(capped, Identity("alpha"), home) as alpha:
        alpha.sync()
        assert [x.state for x in alpha.sent()] == ["sibling"]
        alpha.send("beta", "Two", OPENER)  # 1 + 1: the sibling's opener counted once, not twice
        with pytest.raises(Refused, match="opened 2 threads"):
            alpha.send("beta", "Three", OPENER)


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.one_of(st.integers(1, 7), st.just(0)), min_size=1, max_size=12), st.integers(1, 4))
def test_the_post_office_sent_record_hands_every_letter_to_a_reader_once(steps: list[int], batch: int) -> None:
    """Letters recorded (n > 0) and reads (0) in any order, read in batches of any size with the
    checkpoint each batch returns: every recorded letter is read exactly once, in order."""
    import tempfile

    from agentmail.transport import sent_record
    from agentmail.transport.local import Mailbox

    with tempfile.TemporaryDirectory() as where:
        box = Mailbox(Path(where) / ".sent" / "beta")
        recorded: list[bytes] = []
        read: list[bytes] = []
        checkpoint: str | None = None
        old, sent_record.BATCH = sent_record.BATCH, batch
        try:
            for n in [*steps, 0]:
                for _ in range(n):
                    recorded.append(f"Message-ID: <{len(recorded)}@bus.test>\r\n\r\nbody\r\n".encode())
                    sent_record.record(box.dir, recorded[-1], None)
                if n == 0:
                    for items, after in sent_record.local_copies(box, checkpoint, 10_000):
                        read += [item.raw or b"" for item in items]
                        checkpoint = after
                    assert not sent_record.local_pending(box, checkpoint)
        finally:
            sent_record.BATCH = old
        assert read == recorded


@pytest.mark.parametrize("transport", ["imap", "post office"])
def test_a_note_from_another_machine_is_read_from_the_inbox_never_from_the_sent_record(
    home: Path, registry: Registry, servers: MailServers, transport: str
) -> None:
    reg = make_bus(home, servers, sent_folder="Sent") if transport == "imap" else registry
    other = _machine(home, "ci", share_postoffice=transport == "post office")
    with AgentMail(reg, Identity("beta", "laptop"), home) as laptop:
        laptop.note("Handover", "The quota fix is on branch fix-quota.", to_agent="ci")
    with AgentMail(reg, Identity("beta", "ci"), other) as ci:
        (note,) = ci.notes()
        assert (note.subject, note.state, note.to_agent) == ("Handover", "unread", "ci")
        assert ci.sent() == [] and ci.sync().siblings == 0


def test_rebuild_files_a_siblings_letter_as_a_siblings_again(registry: Registry, home: Path) -> None:
    other = _machine(home, "home-b", share_postoffice=True)
    thread, ack_mid = _acked_on_a(registry, home, other)
    with AgentMail(registry, Identity("beta"), other) as beta:
        before = [(x.id, x.type, x.state) for x in beta.thread(thread)]
        root = beta.spool.root
    for name in ("spool.db", "spool.db-wal", "spool.db-shm"):
        (root / name).unlink(missing_ok=True)
    with AgentMail(registry, Identity("beta"), other) as beta:
        counts = beta.rebuild()
        assert counts["sibling"] == 1
        assert [(x.id, x.type, x.state) for x in beta.thread(thread, sync=False)] == before
        assert beta.sync().siblings == 0  # the record read again from the start: nothing new
        assert [x.message_id for x in beta.sent()] == [ack_mid]
