"""The statements a filing costs, exactly (issue 40: CPU per letter): a filed letter's notes are
written in one statement with no read first, and a depth finds a letter, its state and its
record in one statement; both give what the statement-per-question code gave (the notes and the ledger's
copy of them; the depth, differentially over random histories against that code, kept here)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.model import Letter
from agentmail.spool import STATES, Spool, ledger
from agentmail.spool.layout import _raw_key

from ..depth import examples
from .test_spool import _letter, _spool


@contextmanager
def _statements(spool: Spool) -> Iterator[list[str]]:
    """Every statement the spool's connection runs inside the block."""
    conn = spool.db.conn()
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def _notes(spool: Spool, letter_id: str) -> Any:
    row = spool.db.conn().execute("SELECT data FROM notes WHERE id=?", (letter_id,)).fetchone()
    return None if row is None else json.loads(row[0])


def _post_office_copy(tmp_path: Path, raw: bytes) -> tuple[str, int, int]:
    path = tmp_path / "postoffice" / "beta" / "cur" / "000000000001:2,"
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    st_ = os.lstat(path)
    return str(path), st_.st_dev, st_.st_ino


def test_a_synced_letters_notes_are_written_in_one_statement_and_the_ledger_says_the_same(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    letter, raw = _letter(1)
    copy = _post_office_copy(tmp_path, raw)
    spool.write.begin_filing()
    with _statements(spool) as seen:
        filed = spool.write.store("unread", letter, raw, defer=True, copy=copy)
    spool.write.commit()
    on_notes = [s for s in seen if " notes" in s]
    assert len(on_notes) == 1 and on_notes[0].startswith("INSERT OR IGNORE INTO notes")  # no read first
    noted = {"copy": os.path.relpath(copy[0], spool.root), "copy_key": _raw_key(raw)}
    assert _notes(spool, filed.id) == noted
    assert ledger.read(str(spool.root), STATES)[filed.id].notes == noted


def test_a_quarantined_copy_has_its_verdict_and_its_copy_noted_together(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    letter, raw = _letter(1)
    copy = _post_office_copy(tmp_path, raw)
    spool.write.begin_filing()
    with _statements(spool) as seen:
        filed = spool.write.store(
            "quarantine", letter.replace(reason="unsigned"), raw, index=False, defer=True, copy=copy
        )
    spool.write.commit()
    assert len([s for s in seen if " notes" in s]) == 1
    notes = _notes(spool, filed.id)
    assert list(notes) == ["quarantined", "copy", "copy_key"]  # the verdict first, as it was written
    assert notes["quarantined"]["reason"] == "unsigned" and notes["copy_key"] == _raw_key(raw)
    assert ledger.read(str(spool.root), STATES)[filed.id].notes == notes


def test_notes_already_under_a_new_letters_id_are_kept_beside_its_own(tmp_path: Path) -> None:
    """No spool leaves them, but the merge stays what it was: the old notes and the new."""
    spool = _spool(tmp_path)
    letter, raw = _letter(1)
    with spool.db.write() as tx:
        tx.execute("INSERT INTO notes(id, data) VALUES(?, ?)", ("01aaaaaaaaaaaaaaaaaaaaaaaa", '{"left": "x"}'))
    filed = spool.write.store("quarantine", letter.replace(id="01aaaaaaaaaaaaaaaaaaaaaaaa", reason="unsigned"), raw,
                              index=False)  # fmt: skip
    notes = _notes(spool, filed.id)
    assert notes["left"] == "x" and notes["quarantined"]["reason"] == "unsigned"
    assert ledger.read(str(spool.root), STATES)[filed.id].notes["quarantined"]["reason"] == "unsigned"


def test_filing_makes_one_copy_of_the_letter(tmp_path: Path, monkeypatch: Any) -> None:
    spool = _spool(tmp_path)
    spool.write.store("unread", *_letter(1))
    answer, answer_raw = _letter(2, in_reply_to="<1.alpha@bus.test>")
    letter, raw = _letter(3)
    letter = letter.replace(reason="unsigned", depth=5)
    copies: list[dict[str, Any]] = []
    real = Letter.replace

    def counted(self: Letter, **changes: Any) -> Letter:
        copies.append(changes)
        return real(self, **changes)

    monkeypatch.setattr(Letter, "replace", counted)
    reply = spool.write.store("unread", answer, answer_raw)
    held = spool.write.store("quarantine", letter, raw, index=False)
    assert len(copies) == 2  # one for each filing: its id, state and depth set together
    assert (reply.state, reply.depth, held.state, held.depth) == ("unread", 1, "quarantine", 5)
    assert reply.id and held.id and spool.read.locate(held.id) == "quarantine"


# --- depth: one statement a letter found --------------------------------------------------------


def test_a_replys_depth_reads_each_letter_it_finds_in_the_statement_that_finds_it(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    first = spool.write.store("unread", *_letter(1))
    second = spool.write.store("unread", *_letter(2, in_reply_to="<1.alpha@bus.test>"))
    letter, raw = _letter(3, in_reply_to="<2.alpha@bus.test>", references=("<1.alpha@bus.test>", "<2.alpha@bus.test>"))
    with _statements(spool) as seen:
        third = spool.write.store("unread", letter, raw)
    assert (first.depth, second.depth, third.depth) == (0, 1, 2)
    asked = [s for s in seen if s.startswith("SELECT") and "FROM letters" in s]
    # beta's own letters first (none), then alpha's: the parent, then each reference; the
    # letter's id, state and record in the one statement that finds it
    assert len(asked) == 6 and all(s.startswith("SELECT id, state, meta FROM letters WHERE msgkey=") for s in asked)


def _old_depth(spool: Spool, letter_id: str, letter: Letter) -> int:
    """The depth as it was computed before: a statement for each side, then the found letter's
    state, then its record (spool/depth.py at 48ef3fa, with no cache written)."""
    read = spool.read
    me = spool.root.name

    def filed_before(node_id: str, facts: dict[str, Any], message_id: str) -> str | None:
        for side in dict.fromkeys((me, facts.get("from") or "", facts.get("to") or "")):
            found = read.known(side, message_id)
            if found and found < node_id:
                return found
        return None

    def references(node_id: str, facts: dict[str, Any]) -> int:
        count = 0
        for message_id in dict.fromkeys(facts.get("references") or ()):
            found = filed_before(node_id, facts, message_id)
            if found and read._parsed(found, read.locate(found) or "").get("thread") == facts.get("thread"):
                count += 1
        return count

    facts: dict[str, Any] = {"from": letter.sender, "to": letter.to, "in_reply_to": letter.in_reply_to,
                             "references": list(letter.references), "thread": letter.thread}  # fmt: skip
    chain = [(letter_id, facts)]
    base = -1
    while chain[-1][1].get("in_reply_to"):
        node_id, node = chain[-1]
        parent_id = filed_before(node_id, node, node["in_reply_to"])
        if parent_id is None:
            break
        parent = read._parsed(parent_id, read.locate(parent_id) or "")
        if "depth" in parent:
            base = int(parent["depth"])
            break
        chain.append((parent_id, parent))
    depth = base
    for node_id, node in reversed(chain):
        depth = max(depth + 1, references(node_id, node))
    return depth


_MIDS = [f"<{n}.x@bus.test>" for n in range(5)]
_history = st.lists(
    st.tuples(
        st.sampled_from(["alpha", "beta", "gamma", ""]),  # the sender (this spool is beta's)
        st.sampled_from(["beta", "alpha", ""]),  # its To, right or wrong
        st.sampled_from(_MIDS),  # Message-IDs collide: a sender reusing one, two senders one each
        st.one_of(st.none(), st.sampled_from(_MIDS)),
        st.lists(st.sampled_from(_MIDS), max_size=3),
        st.sampled_from(["thr-a", "thr-b"]),
        st.one_of(st.none(), st.sampled_from(["01zz", "01aa", "01mm", "01bb"])),  # ids out of filing order
        st.booleans(),  # its record's depth dropped after filing: the next walk goes past it
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=examples(200), deadline=None)
@given(history=_history)
def test_the_depth_is_what_the_statement_per_question_code_gave(tmp_path_factory: Any, history: list[Any]) -> None:
    spool = _spool(tmp_path_factory.mktemp("depth"))
    template, _raw = _letter(1)
    used: set[str] = set()
    for n, (sender, to, mid, parent, refs, thread, given_id, forget) in enumerate(history):
        letter = template.replace(sender=sender, to=to, message_id=mid, in_reply_to=parent,
                                  references=tuple(refs), thread=thread, id="")  # fmt: skip
        if given_id and given_id not in used:
            letter = letter.replace(id=given_id)
            used.add(given_id)
        letter_id = letter.id or f"01n{n:023d}"
        expected = _old_depth(spool, letter_id, letter)
        filed = spool.write.store("unread", letter.replace(id=letter_id), b"letter %d" % n)
        assert filed.depth == expected
        if forget:
            meta = json.loads(spool.db.conn().execute("SELECT meta FROM letters WHERE id=?", (filed.id,)).fetchone()[0])
            meta.pop("depth")
            spool.db.conn().execute("UPDATE letters SET meta=? WHERE id=?", (json.dumps(meta), filed.id))
