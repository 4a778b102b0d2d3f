"""Exact answers of client/receiver.py:Receiver.rebuild (mutation group ``rebuild``): what an
intact spool answers, and that a quarantined letter is no filing of its Message-ID."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import NotFound
from agentmail.model import new_ulid
from agentmail.spool import ledger
from agentmail.transport.local import deliver

from ..client.test_quarantine_recheck import _forgery
from ..conftest import OPENER
from ..people.test_writing import MUTT_REPLY, an_agent_letter, client_letter, people, vouched  # noqa: F401
from ..stages.test_parties import box, three, written_into  # noqa: F401  (the fixture)
from .test_rebuild_restores import _set_until


def test_an_intact_spool_is_not_rebuilt_and_says_so(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Quota 500s", OPENER)
    assert len(beta.inbox()) == 1
    with pytest.raises(NotFound) as caught:
        beta.rebuild()
    assert str(caught.value) == f"{beta.spool.db.path} is in order: nothing to rebuild"
    assert len(beta.inbox(sync=False)) == 1


def lose(am: AgentMail, home: Path, *names: str) -> AgentMail:
    """``am``'s spool.db (and ``names`` beside it) gone: the mailbox opened again, not rebuilt yet."""
    root = am.spool.root
    am.close()
    am.spool.db.close()
    for name in ("spool.db", "spool.db-wal", "spool.db-shm", *names):
        (root / name).unlink(missing_ok=True)
    return AgentMail(am.registry, Identity(am.me.platform), home)


def test_a_quarantined_letter_is_no_filing_of_a_later_copy(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    """Without the ledger, an answer whose letter is gone waits (quarantined, awaiting-parent);
    a second file of the same answer is judged as the first, not dropped as a copy of a letter
    filed before it: a quarantined letter is no filing."""
    report = alpha.send("beta", "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    assert beta.reply(letter, "Looking at it now; I will write back with the fix.", type="ack") is not None
    (answer,) = alpha.inbox()
    root = alpha.spool.root
    (root / "letters" / f"{report.id}.eml").unlink()
    copy = new_ulid()
    shutil.copyfile(root / "letters" / f"{answer.id}.eml", root / "letters" / f"{copy}.eml")
    alpha = lose(alpha, home, ledger.FILE)
    counts = alpha.rebuild()
    assert counts["quarantine"] == 2 and counts["unread"] == 0, counts
    waiting = alpha.quarantined(sync=False)
    assert sorted(x.id for x in waiting) == sorted((answer.id, copy))
    assert {x.reason for x in waiting} == {"awaiting-parent"}


def test_a_fan_out_letter_is_restored_with_every_platform_it_went_to(home: Path) -> None:
    """The parties of a restored thread are read off each letter with the registry: a fan-out's
    recipients are platforms of it."""
    three = bus.init(home, home / "registry", ["alpha", "beta", "gamma"], domain="bus.test")
    alpha = AgentMail(three, Identity("alpha"), home)
    beta = AgentMail(three, Identity("beta"), home)
    alpha.send(["beta", "gamma"], "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    assert letter.recipients == ("beta@bus.test", "gamma@bus.test")
    beta = lose(beta, home)
    assert beta.rebuild()["unread"] == 1
    (again,) = beta.inbox(sync=False)
    assert (again.id, again.recipients) == (letter.id, letter.recipients)
    assert beta.reply(again, "Reproduced; looking at it.", type="ack") is not None
    alpha.close()


@pytest.mark.parametrize("ledgered", [True, False])
def test_a_placeholder_comes_back_quarantined_with_what_it_says(
    alpha: AgentMail, beta: AgentMail, home: Path, ledgered: bool
) -> None:
    """A letter never downloaded (too large) or an entry that was no letter: its placeholder file
    says which, and nothing more is left of its note."""
    alpha.send("beta", "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    letters = beta.spool.root / "letters"
    large, unread = new_ulid(), new_ulid()
    (letters / f"{large}.eml").write_bytes(b"X-Agentmail-Not-Downloaded: 9000 bytes (local 1)\r\n\r\n")
    (letters / f"{unread}.eml").write_bytes(b"X-Agentmail-Not-Read: no letter (local 2)\r\n\r\n")
    if ledgered:  # the ledger says they were quarantined, and no more
        lines = [ledger.line({"id": i, "state": "quarantine"}) for i in (large, unread)]
        ledger.append(str(beta.spool.root), lines)
    beta = lose(beta, home, *(() if ledgered else (ledger.FILE,)))
    counts = beta.rebuild()
    assert (counts["quarantine"], counts["unread"]) == (2, 1), counts
    lost = "not read when it arrived; the rest of its note was in the spool.db that was lost"
    held = {q.id: (q.reason, q.detail, q.sender) for q in beta.quarantined(sync=False)}
    assert held == {large: ("too-large", lost, ""), unread: ("malformed", lost, "")}
    assert [x.id for x in beta.inbox(sync=False)] == [letter.id]


def test_a_letter_the_ledger_says_was_quarantined_stays_so_with_what_is_left_of_its_verdict(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    """Today the letter passes; the ledger says it was quarantined and its verdict's note is lost:
    quarantined again, malformed, saying so, with the letter as it reads."""
    alpha.send("beta", "Quota 500s", OPENER)
    (first,) = beta.inbox()
    ledger.append(str(beta.spool.root), [ledger.line({"id": first.id, "state": "quarantine"})])
    beta = lose(beta, home)
    counts = beta.rebuild()
    assert (counts["quarantine"], counts["unread"]) == (1, 0), counts
    (held,) = beta.quarantined(sync=False)
    assert (held.id, held.reason) == (first.id, "malformed")
    assert held.detail == "quarantined when it arrived; its verdict was in the spool.db that was lost"
    assert beta.inbox(sync=False) == []


def test_a_letter_quarantined_then_and_now_keeps_todays_verdict_when_its_note_is_lost(
    registry: Registry, alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    """The ledger says quarantined and keeps no note of why; today's verdict quarantines it too:
    today's reason and detail, not the lost-verdict words."""
    real = alpha.send("beta", "Quota 500s", OPENER)
    deliver(home / "postoffice" / "beta", _forgery(registry, real.message_id))
    beta.sync()
    (held,) = beta.quarantined(sync=False)
    assert held.reason == "unauthenticated"
    ledger.append(str(beta.spool.root), [ledger.line({"id": held.id, "notes": {}})])
    beta = lose(beta, home)
    counts = beta.rebuild()
    assert (counts["quarantine"], counts["unread"]) == (1, 1), counts
    (again,) = beta.quarantined(sync=False)
    assert (again.id, again.reason, again.detail) == (held.id, held.reason, held.detail)


def test_a_persons_letter_read_before_stays_read_when_its_note_is_lost(people: Registry, home: Path) -> None:
    """The ledger says read and lost the person's letter's note: today's accepting verdict carries
    the letter (a person is no platform: it cannot be read back as one), restored read."""
    alpha = AgentMail(people, Identity("alpha"), home)
    _thread, mid = an_agent_letter(alpha)
    deliver(home / "postoffice" / "alpha", vouched(client_letter("alpha@bus.test", MUTT_REPLY, in_reply_to=mid)))
    (got,) = alpha.inbox()
    assert alpha.done(got.id) == [got.id]
    ledger.append(str(alpha.spool.root), [ledger.line({"id": got.id, "notes": {}})])
    alpha = lose(alpha, home)
    alpha.rebuild()
    assert alpha.spool.read.locate(got.id) == "read"
    assert alpha.inbox(sync=False) == []


def test_an_answer_restored_before_its_letter_is_filed_by_the_settle_and_counted_once(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    """Without the ledger, an answer whose file sorts before its letter's is judged first and waits
    (awaiting-parent); the settle after the restore files it: the counts say so, word for word."""
    report = alpha.send("beta", "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    assert beta.reply(letter, "Looking at it now; I will write back with the fix.", type="ack") is not None
    (answer,) = alpha.inbox()
    letters = alpha.spool.root / "letters"
    early = report.id[:10] + "0" * 16  # the report's millisecond, sorting before it
    assert early < report.id
    (letters / f"{answer.id}.eml").rename(letters / f"{early}.eml")
    alpha = lose(alpha, home, ledger.FILE)
    counts = alpha.rebuild()
    restored = {"unread": 1, "read": 0, "sent": 1, "outbox": 0, "held": 0, "failed": 0, "quarantine": 0}
    assert counts == {**restored, "sibling": 0, "left": 0, "kept_aside": []}
    assert [x.id for x in alpha.inbox(sync=False)] == [early]
    assert alpha.quarantined(sync=False) == []


def test_a_settle_that_keeps_an_answer_quarantined_counts_it_so(three: Registry, home: Path) -> None:
    """The settle judges again each answer restored as waiting: a party's is filed (one more
    unread beside a letter restored unread), an outsider's stays quarantined (not-a-party) and is
    counted quarantined still."""
    alpha, beta = box(three, home, "alpha"), box(three, home, "beta")
    report = alpha.send("beta", "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    assert beta.reply(letter, "Looking at it now; I will write back with the fix.", type="ack") is not None
    deliver(home / "postoffice" / "alpha", written_into(three, home, "gamma", "alpha", letter, "question"))
    beta.send("alpha", "Disk full", OPENER)
    ((ack,), (outsider,)) = alpha.inbox()[:1], alpha.quarantined(sync=False)
    assert (ack.sender, outsider.sender, outsider.reason) == ("beta", "gamma", "not-a-party")
    letters = alpha.spool.root / "letters"
    early = {x.id: report.id[:10] + f"{n:016d}" for n, x in enumerate((ack, outsider))}  # before the report
    for was, now in early.items():
        (letters / f"{was}.eml").rename(letters / f"{now}.eml")
    alpha = lose(alpha, home, ledger.FILE)
    counts = alpha.rebuild()
    restored = {"unread": 2, "read": 0, "sent": 1, "outbox": 0, "held": 0, "failed": 0, "quarantine": 1}
    assert counts == {**restored, "sibling": 0, "left": 0, "kept_aside": []}
    (held,) = alpha.quarantined(sync=False)
    assert (held.id, held.reason) == (early[outsider.id], "not-a-party")
    assert sorted(x.id for x in alpha.inbox(sync=False))[0] == early[ack.id]
    beta.close()


@pytest.mark.parametrize(
    ("name", "state"),
    [("0000000000", "unread"), ("uuuuuuuuuu", "quarantine")],
    ids=["the-epoch", "no-time"],
)
def test_a_letter_file_is_judged_at_the_time_its_name_says_or_now_when_it_says_none(
    registry: Registry, alpha: AgentMail, beta: AgentMail, home: Path, name: str, state: str
) -> None:
    """The sender's key rotated and the old key's window is over: a letter signed with it is
    judged at the time its file's id says it was filed (the epoch's first millisecond is a time,
    inside the window), or now when the id is no ULID (the window is over: quarantined)."""
    alpha.send("beta", "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    bus.keygen(home, registry, "alpha", overlap=3600)
    _set_until(home, "alpha", "2000-01-01T00:00:00Z")  # the window is over
    letters = beta.spool.root / "letters"
    renamed = name + letter.id[10:]
    (letters / f"{letter.id}.eml").rename(letters / f"{renamed}.eml")
    beta = lose(beta, home, ledger.FILE)
    beta.close()
    beta = AgentMail(registry_mod.load(home / "registry"), Identity("beta"), home)
    counts = beta.rebuild()
    assert (counts["unread"], counts["quarantine"]) == (state == "unread", state == "quarantine"), counts
    assert beta.spool.read.locate(renamed) == state
    held = [(q.reason, "whose overlap ended at 2000-01-01T00:00:00Z" in (q.detail or "")) for q in beta.quarantined()]
    assert held == ([("unauthenticated", True)] if state == "quarantine" else [])


def test_a_read_letter_filed_again_after_a_power_cut_is_restored_once(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    """The ledger says the letter was read, and a later filing of the same letter (a power cut
    took the first from spool.db only, the sync filed it again) is unread: the later is restored,
    the read one is that letter's earlier filing, left."""
    alpha.send("beta", "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    assert beta.done(letter.id) == [letter.id]
    letters = beta.spool.root / "letters"
    again = new_ulid()
    shutil.copyfile(letters / f"{letter.id}.eml", letters / f"{again}.eml")
    ledger.append(str(beta.spool.root), [ledger.line({"id": again, "state": "unread"})])
    beta = lose(beta, home)
    counts = beta.rebuild()
    assert (counts["unread"], counts["read"], counts["left"]) == (1, 0, 1), counts
    assert [x.id for x in beta.inbox(sync=False)] == [again]
    assert beta.spool.read.locate(letter.id) is None


def test_a_second_file_of_a_letter_i_sent_to_others_is_not_restored_as_sent_again(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    """The first file of a letter of mine to others is my sent copy; a later file of it (a copy
    delivered here) is judged as a sync judges it, not restored as a second sent letter."""
    sent = alpha.send("beta", "Quota 500s", OPENER)
    letters = alpha.spool.root / "letters"
    copy = new_ulid()
    shutil.copyfile(letters / f"{sent.id}.eml", letters / f"{copy}.eml")
    alpha = lose(alpha, home, ledger.FILE)
    counts = alpha.rebuild()
    assert (counts["sent"], counts["quarantine"]) == (1, 1), counts
    assert [x.id for x in alpha.sent()] == [sent.id]
    (held,) = alpha.quarantined(sync=False)
    assert (held.id, held.reason) == (copy, "misaddressed")
