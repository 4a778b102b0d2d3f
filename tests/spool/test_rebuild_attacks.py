"""Attacks on "rebuild restores what was" (issue 37), each a test: the ledger's bytes, a crash
between its steps, and the keys a letter is judged with after a rotation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.config.registry import Registry
from agentmail.config.credentials import read_private_key
from agentmail.letter import wire
from agentmail.model import new_thread_id
from agentmail.spool import ledger
from agentmail.spool.layout import STATES
from agentmail.transport.local import deliver
from agentmail.trust import signing

from ..conftest import OPENER
from .test_rebuild_restores import _client, _lose_and_rebuild, views


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
    assert beta.spool.locate(held.id) == "held" and views(beta) == before


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
    raw = beta.spool.raw(copy)
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
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
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
    assert views(beta) == before and beta.spool.locate(held.id) == "held"
