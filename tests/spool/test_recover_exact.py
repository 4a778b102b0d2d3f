"""A rebuild files letters in the order they were filed, word for word (mutation group
``recover``, tests/MUTATION.md): ``spool/recover.py``'s filing order (the ledger's numbers first
known, then each thread's letters after the letters they answer) and its reading of the ledger."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentmail._fs import read_plain
from agentmail.client.facade import AgentMail
from agentmail.config.registry import Registry
from agentmail.model import Letter
from agentmail.spool import ledger, recover
from agentmail.spool.layout import STATES, _raw_key
from agentmail.spool.recover import _filing_order, _parents_first, _said

from ..conftest import OPENER
from .test_rebuild_restores import _client, _lose_and_rebuild, views


def _letter(message_id: str, in_reply_to: str | None = None) -> tuple[str, str, Letter]:
    letter = Letter(
        message_id=message_id,
        sender="alpha",
        sender_address="a@alpha.test",
        to="beta",
        to_address="b@beta.test",
        type="report",
        thread="t",
        subject="s",
        body="",
        date="",
        in_reply_to=in_reply_to,
    )
    return (f"id-{message_id}", "read", letter)


def _order(*items: tuple[str, str, Letter]) -> list[str]:
    return [letter.message_id for _, _, letter in _parents_first(list(items))]


def test_letters_in_order_already_are_filed_as_they_come() -> None:
    assert _order(_letter("p"), _letter("c", "p"), _letter("z")) == ["p", "c", "z"]
    assert _order(_letter("p"), _letter("z"), _letter("c", "p"), _letter("d", "c")) == ["p", "z", "c", "d"]


def test_a_reply_before_its_parent_waits_for_it_then_follows_it_at_once() -> None:
    assert _order(_letter("c", "p"), _letter("p"), _letter("z")) == ["p", "c", "z"]


def test_every_reply_waiting_for_one_parent_follows_it_in_their_order_and_theirs_after_them() -> None:
    items = (_letter("c1", "p"), _letter("g", "c1"), _letter("c2", "p"), _letter("p"), _letter("z"))
    assert _order(*items) == ["p", "c1", "c2", "g", "z"]


def test_a_letter_answering_no_letter_here_is_filed_in_its_place() -> None:
    """Its parent is elsewhere (or it answers nothing): it never waits, whatever ids are present."""
    assert _order(_letter("a"), _letter("b", "gone"), _letter("XXXX")) == ["a", "b", "XXXX"]


def test_the_filing_order_puts_the_letters_the_ledger_numbered_after_the_rest_by_number() -> None:
    assert _filing_order("b", None) == (0, 0, "b")
    assert _filing_order("b", ledger.Entry(state="read")) == (0, 0, "b")
    assert _filing_order("b", ledger.Entry(seq=-1)) == (0, 0, "b")
    assert _filing_order("b", ledger.Entry(seq=0)) == (1, 0, "b")
    assert _filing_order("b", ledger.Entry(seq=7)) == (1, 7, "b")


def test_the_ledger_said_how_a_letter_stood_only_with_a_state() -> None:
    was = {"a": ledger.Entry(state="sent"), "b": ledger.Entry(seq=3)}
    assert _said(was, "a") is True
    assert _said(was, "b") is False
    assert _said(was, "c") is False


def test_a_second_agents_sent_letter_whose_spool_name_was_lost_is_restored_as_its_own(
    registry: Registry, home: Path
) -> None:
    """The mailbox is ``alpha@two``, the letter's sender the platform ``alpha``: the rebuild
    restores the sent letter from the post office and keeps it (judged this platform's own)."""
    two = _client(home, "alpha", "two")
    letter = two.send("beta", "Quota 500s", OPENER)
    kept = two.send("beta", "Invoices doubled", OPENER)
    raw = two.raw(letter.id)
    root = two.spool.root
    (root / "letters" / f"{letter.id}.eml").unlink()
    _lose_and_rebuild([two], [root])
    two = _client(home, "alpha", "two")
    assert sorted(two.spool.read.ids("sent")) == sorted([letter.id, kept.id])
    assert two.raw(letter.id) == raw


def _rebuild(am: AgentMail, *, ledgers: bool = True) -> dict[str, Any]:
    root = am.spool.root
    am.close()
    am.spool.db.close()
    for name in ("spool.db", "spool.db-wal", "spool.db-shm", *(() if ledgers else (ledger.FILE,))):
        (root / name).unlink(missing_ok=True)
    return am.rebuild()


def _counts(**said: int) -> dict[str, int]:
    return {**{state: 0 for state in STATES}, "left": 0, **said}


def test_a_rebuild_without_its_ledger_counts_each_letter_once_and_an_answered_one_read(
    registry: Registry, home: Path
) -> None:
    """No ledger: beta's letter it answered reads as read (its reply is sent), the other stays
    unread; the counts say each state once, and ``spool.db``'s new ledger says the change."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    first = alpha.send("beta", "Quota 500s", OPENER)
    second = alpha.send("beta", "Invoices doubled", OPENER)
    beta.sync()
    mine = {x.message_id: x.id for x in beta.inbox(sync=False)}
    reply = beta.reply(mine[first.message_id], "Fixed in 2.4.1")
    counts = _rebuild(beta, ledgers=False)
    assert {k: v for k, v in counts.items() if k != "kept_aside"} == _counts(unread=1, read=1, sent=1)
    beta = _client(home, "beta")
    states = {i: s for s in STATES for i in beta.spool.read.ids(s)}
    assert states == {mine[first.message_id]: "read", mine[second.message_id]: "unread", reply.id: "sent"}
    assert ledger.read(str(beta.spool.root), STATES)[mine[first.message_id]].state == "read"


def test_a_rebuild_keeps_the_state_the_ledger_said_and_its_notes_whole(registry: Registry, home: Path) -> None:
    """With the ledger: each letter as it stood, an answered letter the ledger last said was
    unread (marked unread again) still unread; each note as it was; each letter counted once."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    first = alpha.send("beta", "Quota 500s", OPENER)
    alpha.send("beta", "Invoices doubled", OPENER)
    beta.sync()
    mine = {x.message_id: x.id for x in beta.inbox(sync=False)}
    reply = beta.reply(mine[first.message_id], "Fixed in 2.4.1")
    before = {i: s for s in STATES for i in beta.spool.read.ids(s)}
    notes = {i: beta.spool.read.annotations(i) for i in before}
    assert notes[reply.id]["copy_by"] == "beta" and before[mine[first.message_id]] == "read"
    ledger.append(str(beta.spool.root), [ledger.line({"id": mine[first.message_id], "state": "unread"})])
    written = len((beta.spool.root / ledger.FILE).read_bytes())
    counts = _rebuild(beta)
    said = ledger.parse((beta.spool.root / ledger.FILE).read_bytes()[written:], STATES)  # the rebuild's own lines
    assert {i: said[i].notes for i in before} == notes
    assert {k: v for k, v in counts.items() if k != "kept_aside"} == _counts(unread=2, sent=1)
    beta = _client(home, "beta")
    assert {i: s for s in STATES for i in beta.spool.read.ids(s)} == {**before, mine[first.message_id]: "unread"}
    assert {i: beta.spool.read.annotations(i) for i in before} == notes


def test_a_letter_file_in_tmp_the_ledger_never_said_was_committed_is_not_filed(registry: Registry, home: Path) -> None:
    """tmp/ holds a whole letter (a copy of one filed here) under an id the ledger never named: it
    may be a letter never committed, so the rebuild files it nowhere."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    root = beta.spool.root
    stray = "01jzzzzzzzzzzzzzzzzzzzzzzz"
    (root / "tmp" / f"{stray}.eml").write_bytes(beta.raw(letter.id))
    counts = _rebuild(beta)
    assert {k: v for k, v in counts.items() if k != "kept_aside"} == _counts(unread=1)
    beta = _client(home, "beta")
    assert beta.spool.read.locate(stray) is None
    assert beta.spool.read.ids("unread") == [letter.id]


def _lie(root: Path, letter_id: str, state: str, source: Path, mailbox: str) -> None:
    """A ledger line saying ``letter_id`` stood in ``state``, its bytes those of ``source``."""
    raw = source.read_bytes()
    notes = {
        "copy": os.path.relpath(source, root),
        "copy_key": _raw_key(raw),
        "copy_size": len(raw),
        "copies": [],
        "copy_by": mailbox,
    }
    ledger.append(
        str(root),
        [ledger.line({"id": letter_id, "state": state, "seq": 99}), ledger.line({"id": letter_id, "set": notes})],
    )


def test_only_a_letter_the_ledger_says_was_sent_is_fetched_from_the_post_office(registry: Registry, home: Path) -> None:
    """A line says a letter was received here (not sent), its notes naming a post-office file:
    nothing is fetched for it, so nothing is left over either (``left`` stays 0)."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    beta.send("alpha", "Quota 500s", OPENER)
    (mine,) = alpha.inbox()
    root = alpha.spool.root
    (theirs,) = [p for p in (home / "postoffice" / "alpha" / "cur").iterdir() if p.is_file()]
    forged = "01jzzzzzzzzzzzzzzzzzzzzzzz"
    _lie(root, forged, "unread", theirs, alpha.spool.read.mailbox)
    counts = _rebuild(alpha)
    assert {k: v for k, v in counts.items() if k != "kept_aside"} == _counts(unread=1)
    assert f"{forged}.eml" not in os.listdir(root / "letters") + os.listdir(root / "tmp")


def test_a_whole_letter_file_is_never_fetched_again_over_whatever_the_ledger_says(
    registry: Registry, home: Path
) -> None:
    """A line says alpha's received letter was sent by alpha, its bytes another post-office
    file: its file is whole, so nothing is fetched over it; it is filed as it was."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    beta.send("alpha", "Quota 500s", OPENER)
    beta.send("alpha", "Invoices doubled", OPENER)
    first, second = sorted(alpha.inbox(), key=lambda x: x.id)
    root = alpha.spool.root
    raw = alpha.raw(first.id)
    other = next(p for p in (home / "postoffice" / "alpha" / "cur").iterdir() if p.read_bytes() != raw)
    _lie(root, first.id, "sent", other, alpha.spool.read.mailbox)
    _rebuild(alpha)
    alpha = _client(home, "alpha")
    assert alpha.raw(first.id) == raw
    assert alpha.spool.read.locate(first.id) is not None


def test_letter_files_a_cut_left_empty_are_each_counted_left_and_the_rest_filed(registry: Registry, home: Path) -> None:
    """Two received copies left empty (fetched again by the next sync), a sent one left empty
    (restored from the post office): two left, the others filed, the sent one byte for byte."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    for subject in ("Quota 500s", "Invoices doubled", "Login loops"):
        alpha.send("beta", subject, OPENER)
    first, second, third = sorted(beta.inbox(), key=lambda x: x.id)
    sent = beta.send("alpha", "Webhooks late", OPENER)
    raw = beta.raw(sent.id)
    root = beta.spool.root
    for letter_id in (first.id, second.id, sent.id):
        (root / "letters" / f"{letter_id}.eml").unlink()  # a new empty file: never the post office's copy
        (root / "letters" / f"{letter_id}.eml").write_bytes(b"")
    counts = _rebuild(beta)
    assert {k: v for k, v in counts.items() if k != "kept_aside"} == _counts(unread=1, sent=1, left=2)
    beta = _client(home, "beta")
    assert beta.spool.read.ids("unread") == [third.id]
    assert beta.raw(sent.id) == raw


def test_a_letter_file_gone_between_its_judging_and_its_filing_is_counted_left_only(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A co-tenant removes two letter files after the rebuild judged them: each is counted left,
    neither filed, and the letter after them still is."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    for subject in ("Quota 500s", "Invoices doubled", "Login loops"):
        alpha.send("beta", subject, OPENER)
    first, second, third = sorted(beta.inbox(), key=lambda x: x.id)
    gone = {f"{first.id}.eml", f"{second.id}.eml"}
    reads: dict[str, int] = {}

    def read_then_gone(path: Path) -> tuple[bytes | None, os.stat_result]:
        reads[path.name] = reads.get(path.name, 0) + 1
        if path.name in gone and reads[path.name] > 1:
            raise FileNotFoundError(path)
        return read_plain(path)

    monkeypatch.setattr(recover, "read_plain", read_then_gone)
    counts = _rebuild(beta)
    assert {k: v for k, v in counts.items() if k != "kept_aside"} == _counts(unread=1, left=2)
    monkeypatch.undo()
    beta = _client(home, "beta")
    assert beta.spool.read.ids("unread") == [third.id]


def test_a_rebuild_restores_every_view_of_a_mailbox_that_sent_read_and_answered(registry: Registry, home: Path) -> None:
    """Each view (inbox, sent, threads with each letter's depth, search, notes) is as it was."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    first = alpha.send("beta", "Quota 500s", OPENER)
    alpha.send("beta", "Invoices doubled", OPENER)
    mine = {x.message_id: x.id for x in beta.inbox()}
    beta.reply(mine[first.message_id], "Fixed in 2.4.1, quota answer")
    alpha.sync()
    for am in (alpha, beta):
        before = views(am)
        _lose_and_rebuild([am], [am.spool.root])
        assert views(_client(home, am.me.platform)) == before


def test_a_rebuild_without_its_ledger_reads_each_answered_letter_and_writes_the_ledger_again(
    registry: Registry, home: Path
) -> None:
    """Four letters, two answered: two read, two unread, two sent; the rebuild's own ledger lines
    say each state."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    sent = [alpha.send("beta", subject, OPENER) for subject in ("Quota 500s", "Invoices", "Login", "Webhooks")]
    mine = {x.message_id: x.id for x in beta.inbox()}
    for letter in sent[:2]:
        beta.reply(mine[letter.message_id], "Fixed in 2.4.1")
    counts = _rebuild(beta, ledgers=False)
    assert {k: v for k, v in counts.items() if k != "kept_aside"} == _counts(unread=2, read=2, sent=2)
    said = ledger.read(str(beta.spool.root), STATES)
    assert {i: said[i].state for i in mine.values()} == {
        **{mine[x.message_id]: "read" for x in sent[:2]},
        **{mine[x.message_id]: "unread" for x in sent[2:]},
    }


def test_an_answered_letter_the_ledger_says_nothing_of_is_read_after_one_it_said_unread(
    registry: Registry, home: Path
) -> None:
    """The ledger says the first letter stood unread (no filing number) and nothing of the second,
    which beta answered: the first stays unread, the second after it is read."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    first = alpha.send("beta", "Quota 500s", OPENER)
    second = alpha.send("beta", "Invoices doubled", OPENER)
    mine = {x.message_id: x.id for x in beta.inbox()}
    beta.reply(mine[second.message_id], "Fixed in 2.4.1")
    path = beta.spool.root / ledger.FILE
    kept = [json.loads(x) for x in path.read_bytes().splitlines()]
    kept = [{k: v for k, v in r.items() if k != "seq"} for r in kept if r.get("id") != mine[second.message_id]]
    path.write_bytes(b"".join(ledger.line(r) for r in kept))
    assert ledger.read(str(beta.spool.root), STATES)[mine[first.message_id]].state == "unread"
    counts = _rebuild(beta)
    assert {k: v for k, v in counts.items() if k != "kept_aside"} == _counts(unread=1, read=1, sent=1)
    beta = _client(home, "beta")
    assert beta.spool.read.ids("unread") == [mine[first.message_id]]
    assert beta.spool.read.ids("read") == [mine[second.message_id]]


def test_a_quarantined_letter_is_rebuilt_quarantined_out_of_every_other_view(registry: Registry, home: Path) -> None:
    """beta's pin of alpha's key is wrong: alpha's letter is quarantined, and after a rebuild it is
    still only in the quarantine's views (not in a thread, not found by an ordinary search)."""
    alpha = _client(home, "alpha")
    alpha.send("beta", "Quota 500s", OPENER)
    entry = home / "registry" / "platforms" / "alpha.toml"
    entry.write_text(entry.read_text().replace('selector = "alpha-', 'selector = "wrong-'))
    beta = _client(home, "beta")
    (copy,) = beta.quarantined()
    before = views(beta)
    assert before["search_quarantine"] and not before["search"]["quota"]
    _lose_and_rebuild([beta], [beta.spool.root])
    assert views(_client(home, "beta")) == before
