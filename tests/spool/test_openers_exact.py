"""The openers of the hour as ``opener_keys_since`` returns them, at the edge the random
histories of test_openers.py seldom draw: two letters of one mailbox under one key (a letter
queued again under its Message-ID) count at the older one's time, whatever order the database
reads their rows in (each order of states is one)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentmail.model import opener_key, ulid_floor, ulid_ms
from agentmail.spool.store import Spool

from .test_spool import NAMES, _letter


@pytest.mark.parametrize(("first", "then"), [("sent", "outbox"), ("outbox", "sent"), ("held", "sent")])
def test_two_letters_of_one_mailbox_under_one_key_count_at_the_older_ones_time(
    tmp_path: Path, first: str, then: str
) -> None:
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    letter, raw = _letter(1)
    older = beta.write.store(first, letter, raw)
    newer = beta.write.store(then, letter, raw)
    assert older.id < newer.id
    key = opener_key(letter.message_id)
    assert beta.read.opener_keys_since(0) == {key: ulid_ms(older.id)}
    assert beta.read.opener_key_set(0) == ({key}, ulid_ms(older.id))


HOUR = 3_600_000


def _id(ms: int, n: int) -> str:
    return ulid_floor(ms)[:10] + f"{n:016d}"


@pytest.mark.parametrize("older_here", [True, False])
def test_one_key_in_two_mailboxes_of_the_platform_counts_at_the_older_ones_time(
    tmp_path: Path, older_here: bool
) -> None:
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    bob = Spool(tmp_path / "spool" / "beta@bob", platform_root=beta.root, name_of=NAMES.get)
    now = int(time.time() * 1000)
    letter, raw = _letter(1)
    (first, second) = (beta, bob) if older_here else (bob, beta)
    first.write.store("sent", letter.replace(id=_id(now - 20, 1)), raw)
    second.write.store("sibling", letter.replace(id=_id(now - 10, 2)), raw)
    key = opener_key(letter.message_id)
    assert beta.read.opener_keys_since(now - HOUR) == {key: now - 20}
    assert beta.read.opener_key_set(now - HOUR) == ({key}, now - 20)


@pytest.mark.parametrize("older_here", [True, False])
def test_the_oldest_opener_of_the_platform_is_the_oldest_of_every_mailbox(tmp_path: Path, older_here: bool) -> None:
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    bob = Spool(tmp_path / "spool" / "beta@bob", platform_root=beta.root, name_of=NAMES.get)
    now = int(time.time() * 1000)
    (first, second) = (beta, bob) if older_here else (bob, beta)
    one, one_raw = _letter(1)
    two, two_raw = _letter(2)
    first.write.store("outbox", one.replace(id=_id(now - 20, 1)), one_raw)
    second.write.store("sent", two.replace(id=_id(now - 10, 2)), two_raw)
    keys = {opener_key(one.message_id), opener_key(two.message_id)}
    assert beta.read.opener_key_set(now - HOUR) == (keys, now - 20)
    assert beta.read.opener_keys_since(now - HOUR) == {
        opener_key(one.message_id): now - 20,
        opener_key(two.message_id): now - 10,
    }


def test_a_key_two_letters_hold_stays_counted_when_one_of_them_leaves(tmp_path: Path) -> None:
    """The kept window counts how many letters hold a key, one by one as they are filed."""
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    now = int(time.time() * 1000)
    assert beta.read.opener_key_set(now - HOUR) == (set(), None)
    letter, raw = _letter(1)
    older = beta.write.store("outbox", letter.replace(id=_id(now - 20, 1)), raw).id
    assert beta.read.opener_key_set(now - HOUR) == ({opener_key(letter.message_id)}, now - 20)
    beta.write.store("outbox", letter.replace(id=_id(now - 10, 2)), raw)
    assert beta.read.opener_key_set(now - HOUR) == ({opener_key(letter.message_id)}, now - 20)
    assert beta.write.move(older, "outbox", "failed")
    assert beta.read.opener_key_set(now - HOUR) == ({opener_key(letter.message_id)}, now - 10)


def test_the_oldest_is_a_timed_letters_when_an_odd_id_is_newer(tmp_path: Path) -> None:
    """An id that is no ULID of its time (its first character past 7: a time past a ULID's 48
    bits) is judged by the query's test; the oldest is still the oldest of all."""
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    now = int(time.time() * 1000)
    one, one_raw = _letter(1)
    two, two_raw = _letter(2)
    beta.write.store("outbox", one.replace(id=_id(now - 5, 1)), one_raw)
    beta.write.store("outbox", two.replace(id="8" + "0" * 25), two_raw)
    assert ulid_ms("8" + "0" * 25) == 1 << 48
    keys = {opener_key(one.message_id), opener_key(two.message_id)}
    assert beta.read.opener_key_set(now - HOUR) == (keys, now - 5)


@pytest.mark.parametrize("source", ["unread", "read"])
def test_a_letter_moved_into_an_outgoing_state_gets_its_openers_row(tmp_path: Path, source: str) -> None:
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    now = int(time.time() * 1000)
    letter, raw = _letter(1)
    letter_id = beta.write.store(source, letter.replace(id=_id(now - 5, 1)), raw).id
    assert beta.read.opener_keys_since(now - HOUR) == {}
    assert beta.write.move(letter_id, source, "outbox")
    assert beta.read.opener_keys_since(now - HOUR) == {opener_key(letter.message_id): now - 5}
    assert beta.write.move(letter_id, "outbox", "sent")  # from one opening state to another: the one row
    assert beta.read.opener_keys_since(now - HOUR) == {opener_key(letter.message_id): now - 5}
    assert beta.db.conn().execute("SELECT count(*) FROM openers").fetchone() == (1,)


def test_the_kept_window_slides_past_a_letter_that_left_and_keeps_a_time_at_its_edge(tmp_path: Path) -> None:
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    now = int(time.time() * 1000)
    assert beta.read.opener_key_set(now - HOUR) == (set(), None)
    ids = []
    for n in range(3):  # filed between two counts: the window takes all three at once
        letter, raw = _letter(n + 1)
        ids.append(beta.write.store("outbox", letter.replace(id=_id(now - 3 + n, n)), raw).id)
    assert beta.read.opener_key_set(now - HOUR) == (
        {opener_key(_letter(n + 1)[0].message_id) for n in range(3)},
        now - 3,
    )
    assert beta.write.move(ids[1], "outbox", "failed")  # its time stays in the heap, no longer a row's
    assert beta.read.opener_key_set(now - HOUR)[1] == now - 3
    assert beta.read.opener_key_set(now - 1) == ({opener_key(_letter(3)[0].message_id)}, now - 1)  # at the edge: kept
    odd, odd_raw = _letter(9)
    beta.write.store("outbox", odd.replace(id="01uodd"), odd_raw)  # no ULID: a time of -1
    assert beta.read.opener_key_set(-1) == ({opener_key(_letter(n)[0].message_id) for n in (1, 3, 9)}, -1)
