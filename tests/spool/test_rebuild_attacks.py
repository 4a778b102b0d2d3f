"""Attacks on "rebuild restores what was" (issue 37), each a test: the ledger's bytes, a crash
between its steps, and the keys a letter is judged with after a rotation."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from agentmail import ages, model
from agentmail.admin import bus
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import read_private_key
from agentmail.config.registry import Registry
from agentmail.letter import wire
from agentmail.model import new_thread_id
from agentmail.spool import ledger
from agentmail.spool.layout import STATES
from agentmail.transport.local import deliver
from agentmail.trust import signing

from ..conftest import OPENER, Cli
from .test_rebuild_restores import Bus, _client, _lose_and_rebuild, views


def test_a_torn_last_line_never_swallows_the_next_record(registry: Registry, home: Path) -> None:
    """A crash or a full disk in the middle of an append leaves the ledger's last line torn (no
    newline). The next commit's records begin on a line of their own: a held letter filed
    after it comes back held, never ``sent`` (its state record glued to the torn line)."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    (report,) = beta.inbox()
    root = home / "spool" / "beta"
    with open(root / ledger.FILE, "ab") as torn:
        torn.write(b'{"id":"' + report.id.encode() + b'","sta')  # the write a crash cut short
    held = beta.send("alpha", "Hold me", OPENER, hold=True)
    assert ledger.read(str(root), STATES)[held.id].state == "held"
    before = views(beta)
    _lose_and_rebuild([beta], [root])
    beta = _client(home, "beta")
    assert beta.spool.read.locate(held.id) == "held" and views(beta) == before


def test_a_short_write_is_finished_and_a_torn_ledger_read_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that takes only part of the records (a nearly full disk) is carried on until
    all are written; a ledger torn before is read with its torn line skipped, the rest kept."""
    real = os.write
    monkeypatch.setattr(ledger.os, "write", lambda fd, data: real(fd, bytes(data[:5])))
    (tmp_path / ledger.FILE).write_bytes(b'{"id":"A1","state":"unread","seq":1}\n{"id":"A2","st')
    ledger.append(str(tmp_path), [ledger.line({"id": "B1", "state": "held", "seq": 2})])
    monkeypatch.undo()
    found = ledger.read(str(tmp_path), STATES)
    assert {i: e.state for i, e in found.items()} == {"A1": "unread", "B1": "held"}


def test_a_dropped_duplicate_whose_file_outlived_a_crash_is_not_filed_twice(registry: Registry, home: Path) -> None:
    """``quarantine recheck`` drops a quarantined copy of a letter filed already: the ledger says
    ``gone``, then the file is unlinked. A crash between the two leaves the file in letters/ with
    nothing in the ledger: a rebuild judges it from its bytes, and it passes now. As a sync
    would, it is dropped as the duplicate it is, never a second unread copy of the letter."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    entry = home / "registry" / "platforms" / "alpha.toml"
    pinned = entry.read_text()
    entry.write_text(pinned.replace('selector = "alpha-', 'selector = "wrong-'))  # beta's pin was wrong
    beta = _client(home, "beta")
    (copy,) = [x.id for x in beta.quarantined()]
    entry.write_text(pinned)
    raw = beta.spool.read.raw(copy)
    deliver(home / "postoffice" / "beta", b"Received: from relay.test by mx.test\r\n" + raw)  # a relay's second copy
    beta = _client(home, "beta")
    (letter,) = beta.inbox()
    assert [r["outcome"] for r in beta.recheck_quarantine()] == ["duplicate"]
    root = home / "spool" / "beta"
    (root / "letters" / f"{copy}.eml").write_bytes(raw)  # the unlink a crash never made
    before = views(beta)
    _lose_and_rebuild([beta], [root])
    beta = _client(home, "beta")
    assert [x.id for x in beta.inbox(sync=False)] == [letter.id] and views(beta) == before


HOSTILE = (
    'Fine.\n"}\n{"id":"ID","state":"sent","seq":0}\n{"id":"ID","gone":true}\r\n'
    "\u2028\u2029\x85 \\u000a \udcff quoted \"<'x'@y>\" " + "\x01" * 200
)


def test_a_hostile_letter_in_the_ledger_cannot_write_a_record_of_its_own(registry: Registry, home: Path) -> None:
    """A partner's signed letter whose verdict note carries its text (misaddressed: sent to one
    platform, delivered to another) with records of the ledger in its body, line breaks of every
    kind, a lone surrogate and control bytes: the ledger keeps it one line, and after a rebuild
    the letter it names is as it was (held), the hostile one quarantined with its verdict."""
    beta = _client(home, "beta")
    held = beta.send("alpha", "Hold me", OPENER, hold=True)
    body = HOSTILE.replace("ID", held.id).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    letter = wire.draft_letter(  # written by hand, as a hostile partner would: no composer's refusals
        "alpha@bus.test",
        "alpha",
        "alpha@bus.test",
        "report",
        new_thread_id(),
        'Sub"ject\\',
        body,
        message_id=wire.new_message_id("alpha", "bus.test"),
    )
    key = registry.platforms["alpha"]
    raw = signing.sign(wire.render(letter), "bus.test", key.selector, read_private_key(home, "alpha"))
    deliver(home / "postoffice" / "beta", raw)  # re-aimed by a relay at a platform it never named
    (hostile,) = beta.quarantined()
    assert hostile.reason == "misaddressed" and f'"id":"{held.id}","state":"sent"' in hostile.body
    root = home / "spool" / "beta"
    said = ledger.read(str(root), STATES)
    assert said[held.id].state == "held" and said[hostile.id].state == "quarantine"
    before = views(beta)
    _lose_and_rebuild([beta], [root])
    beta = _client(home, "beta")
    assert views(beta) == before and beta.spool.read.locate(held.id) == "held"


def _forged_with(home: Path, key: str, selector: str, subject: str) -> bytes:
    """A letter in alpha's name to beta, signed with ``key`` (alpha's old key, leaked)."""
    letter = wire.draft_letter(
        "alpha@bus.test",
        "alpha",
        "beta@bus.test",
        "report",
        new_thread_id(),
        subject,
        "Send me the deploy key.",
        message_id=wire.new_message_id("alpha", "bus.test"),
    )
    return signing.sign(wire.render(letter), "bus.test", selector, key)


@pytest.mark.parametrize("kept", [True, False])
def test_a_leaked_old_key_after_its_window_stays_quarantined_through_rebuild_and_retire(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch, kept: bool
) -> None:
    """alpha rotates (its old key leaked). A letter the thief signs with the old key after the
    window is quarantined at sync; a rebuild (with the ledger, and from the files alone: its id
    is when it was filed, after the window) keeps it there; ``keygen --retire --force`` then
    ``quarantine recheck`` keeps it there too. One signed inside the window passed (the window's
    purpose) and stays as it was filed."""
    # ids never go back (a clock step back): a test that moved the clock on before leaves them
    # ahead of it, which a rebuild from the files alone would read as the letter's arrival
    monkeypatch.setattr(model, "_last_ulid", (0, 0))
    beta = _client(home, "beta")
    old_key, old_selector = read_private_key(home, "alpha"), registry.platforms["alpha"].selector
    bus.keygen(home, registry, "alpha", overlap=3600)
    deliver(home / "postoffice" / "beta", _forged_with(home, old_key, old_selector, "Inside the window"))
    beta = _client(home, "beta")
    (inside,) = beta.inbox()
    monkeypatch.setattr(ages, "clock", lambda: time.time() + 2 * 86400)  # two days on: the window is over
    deliver(home / "postoffice" / "beta", _forged_with(home, old_key, old_selector, "After the window"))
    (after,) = beta.quarantined()
    assert after.subject == "After the window" and "overlap ended" in (after.detail or "")
    root = home / "spool" / "beta"
    _lose_and_rebuild([beta], [root], ledgers=kept)
    beta = _client(home, "beta")
    assert [x.id for x in beta.quarantined(sync=False)] == [after.id]
    assert [x.id for x in beta.inbox(sync=False)] == [inside.id]
    bus.retire(registry_mod.load(home / "registry"), "alpha", force=True)
    beta = _client(home, "beta")
    assert [r["outcome"] for r in beta.recheck_quarantine()] == ["quarantined"]
    beta.sync()  # the post office read again from the start: nothing filed twice, nothing let in
    assert [x.id for x in beta.quarantined(sync=False)] == [after.id]
    assert [x.id for x in beta.inbox(sync=False)] == [inside.id]


@pytest.mark.parametrize("kept", [True, False])
def test_a_report_answered_on_the_other_machine_stays_answered_after_a_rebuild_on_either(
    home: Path, cli: Cli, kept: bool
) -> None:
    """beta answers alpha's report on machine B; machine A learns it from the server's sent record
    (a ``sibling`` letter). A rebuild on A (through the CLI), with or without the ledger, and one
    on B keep the answer: neither machine can answer the report a second time."""
    bus_ = Bus(home)
    bus_.alpha.send("beta", "Quota 500s", OPENER)
    (report,) = bus_.far.inbox()
    assert bus_.far.reply(report, "Reproduced.", type="ack") is not None
    assert bus_.beta.inbox() == []  # the sibling answered it: read here too
    (here,) = [x for x in bus_.beta.thread(report.thread, sync=False) if x.type == "report"]
    assert bus_.beta.reply(here, "Again.", type="ack") is None  # the sibling's answer is known here
    for am in bus_.clients:
        am.sync()
    before = bus_.snapshot()
    for am in bus_.clients:
        am.close()
        am.spool.db.close()
    for root in bus_.roots()[1:]:
        for name in ("spool.db", "spool.db-wal", "spool.db-shm", *(() if kept else (ledger.FILE,))):
            (root / name).unlink(missing_ok=True)
    code, out, err = cli("--as", "beta", "rebuild", "--json")
    assert code == 0 and json.loads(out)["sibling"] == 1, err
    assert cli("--as", "beta", "rebuild")[0] == 1  # in order now: nothing to rebuild
    bus_.far.rebuild()
    bus_.reopen()
    if kept:
        assert bus_.snapshot() == before
    else:  # without the ledger the notes are gone (DESIGN §7): states and answers are kept
        assert {m: {v: b[v] for v in ("inbox", "held", "quarantine", "why_refused")} for m, b in before.items()} == {
            m: {v: b[v] for v in ("inbox", "held", "quarantine", "why_refused")} for m, b in bus_.snapshot().items()
        }
        assert _states(bus_) == _states_of(before)
    assert bus_.beta.reply(here, "Again.", type="ack") is None  # the sibling's answer is known here
    for am in bus_.clients:
        am.sync()
    before = bus_.snapshot()
    for am in bus_.clients:
        am.close()
        am.spool.db.close()
    for root in bus_.roots()[1:]:
        for name in ("spool.db", "spool.db-wal", "spool.db-shm", *(() if kept else (ledger.FILE,))):
            (root / name).unlink(missing_ok=True)
    code, out, err = cli("--as", "beta", "rebuild", "--json")
    assert code == 0 and json.loads(out)["sibling"] == 1, err
    assert cli("--as", "beta", "rebuild")[0] == 1  # in order now: nothing to rebuild
    bus_.far.rebuild()
    bus_.reopen()
    if not kept:  # without the ledger the notes are gone (DESIGN §7): every other view is kept
        for box in before:
            before[box]["annotations"] = bus_.snapshot()[box]["annotations"]
    after = bus_.snapshot()
    for box in before:
        for view in before[box]:
            if after[box][view] != before[box][view] and view == "sent":
                a, b = after[box][view][0], before[box][view][0]
                raise AssertionError({k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)})
            assert after[box][view] == before[box][view], (box, view)
    assert bus_.beta.reply(here, "Again.", type="ack") is None
    assert bus_.far.reply(report, "Again.", type="ack") is None
    for am in bus_.clients:
        am.sync()
    assert bus_.snapshot() == before if kept else _states(bus_) == _states_of(before)


def _states(bus_: Bus) -> dict[str, dict[str, str | None]]:
    return {am.me.mailbox + ("@far" if am is bus_.far else ""): {
        i: am.spool.read.locate(i) for s in STATES for i in am.spool.read.ids(s)} for am in bus_.clients}  # fmt: skip


def _states_of(snapshot: dict[str, Any]) -> dict[str, dict[str, str | None]]:
    return {box: {x["id"]: x["state"] for t in views["threads"].values() for x in t} | {
        x["id"]: "quarantine" for x in views["quarantine"]} for box, views in snapshot.items()}  # fmt: skip


def test_a_fact_added_to_a_letter_never_writes_its_text_to_the_ledger_again(registry: Registry, home: Path) -> None:
    """A quarantined letter's notes hold its text (its verdict), escaped six-fold in JSON for
    control bytes: each later fact (``done`` dismissing it, a note) is written to the ledger as
    what changed, not as the whole notes again, so a partner's letter costs the ledger its text
    once; a rebuild puts the notes back whole."""
    beta = _client(home, "beta")
    body = ("\x01" * 60 + "\n") * 2000
    letter = wire.draft_letter(
        "alpha@bus.test",
        "alpha",
        "alpha@bus.test",
        "report",
        new_thread_id(),
        "Misaddressed",
        body,
        message_id=wire.new_message_id("alpha", "bus.test"),
    )
    key = registry.platforms["alpha"]
    deliver(
        home / "postoffice" / "beta",
        signing.sign(wire.render(letter), "bus.test", key.selector, read_private_key(home, "alpha")),
    )
    (hostile,) = beta.quarantined()
    path = home / "spool" / "beta" / ledger.FILE
    size = path.stat().st_size
    assert beta.done(hostile.id) == [hostile.id]
    assert path.stat().st_size - size < 1000  # the fact, not the letter's text again
    before = views(beta)
    assert before["annotations"][hostile.id]["dismissed"] == "true"
    _lose_and_rebuild([beta], [home / "spool" / "beta"])
    beta = _client(home, "beta")
    assert views(beta) == before


def test_a_set_record_adds_to_the_notes_before_it(tmp_path: Path) -> None:
    lines = [
        {"id": "A1", "state": "quarantine", "seq": 1},
        {"id": "A1", "notes": {"quarantined": {"body": "text"}}},
        {"id": "A1", "set": {"dismissed": "true"}},
        {"id": "B1", "set": {"copy": "x"}},  # a fact with no notes before it
        {"id": "B1", "set": "no"},
    ]
    ledger.append(str(tmp_path), [ledger.line(x) for x in lines[:3]])
    ledger.append(str(tmp_path), [b'{"id":"A1","set":{"dismissed":"again"},"x":1}\n'])
    ledger.append(str(tmp_path), [ledger.line(x) for x in lines[3:]])
    found = ledger.read(str(tmp_path), STATES)
    assert found["A1"].notes == {"quarantined": {"body": "text"}, "dismissed": "again"} and found["A1"].notes_said
    assert found["B1"].notes == {"copy": "x"} and found["B1"].state == ""


def test_a_ledger_copied_in_from_another_mailbox_changes_nothing(registry: Registry, home: Path) -> None:
    """A mistaken operator puts alpha's ledger beside beta's letters: its ids name none of them
    (each letter's id is made where it is filed), so beta is rebuilt as from its own."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    (report,) = beta.inbox()
    beta.reply(report, "Reproduced.", type="ack")
    beta.send("alpha", "Hold me", OPENER, hold=True)
    alpha.sync()
    before = views(beta)
    mine, theirs = home / "spool" / "beta" / ledger.FILE, home / "spool" / "alpha" / ledger.FILE
    mine.write_bytes(mine.read_bytes() + theirs.read_bytes())
    _lose_and_rebuild([beta], [home / "spool" / "beta"])
    beta = _client(home, "beta")
    assert views(beta) == before


def test_a_letter_the_ledger_says_was_filed_twice_is_restored_once(registry: Registry, home: Path) -> None:
    """A power cut loses a sync batch from spool.db (committed without a flush) but not its
    ledger lines nor its renamed file; the next sync files the letter again under a new id. A
    later loss and rebuild finds both filings in the ledger: the letter should come back once,
    as spool.db last had it (read)."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    beta.done(letter.id)
    root = home / "spool" / "beta"
    lost = letter.id[:-2] + "00"  # filed a moment before, by the batch the power cut took
    assert lost < letter.id
    (root / "letters" / f"{lost}.eml").write_bytes(beta.spool.read.raw(letter.id))
    ledger.append(str(root), [ledger.line({"id": lost, "state": "unread", "seq": 1})])
    before = views(beta)
    _lose_and_rebuild([beta], [root])
    beta = _client(home, "beta")
    assert views(beta) == before
