"""The new-thread count from the spool's openers table (spool/db.py, written by ``Spool._insert``,
read by ``opener_keys_since``) and from the post office's markers by name: the same answers as
the count before it, which read every letter of the window and every marker (kept here as the
oracle), over random histories."""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail import ages
from agentmail.client.quota import opened_count, opened_times
from agentmail.errors import TransportError
from agentmail.model import opener_key, ulid_floor, ulid_ms
from agentmail.spool import db as dbmod
from agentmail.spool.layout import LEAVING, STATES
from agentmail.spool.store import Spool
from agentmail.transport.local import LocalTransport

from ..depth import examples
from ..helpers.opened import opened_since
from .test_spool import NAMES, _letter

HOUR = 3_600_000


def _old_openers_since(spool: Spool, cutoff_ms: int) -> dict[str, list[int]]:
    """The count before the openers table: every letter of the window's rows, its record parsed
    (Message-ID -> the times of its letters; the oldest is the one counted)."""
    found: dict[str, list[int]] = {}
    floor = ulid_floor(cutoff_ms)
    for one in (spool, *spool.siblings()):
        rows = (
            one.db.conn()
            .execute(
                "SELECT id, state FROM letters WHERE id >= ? AND state IN (?, ?, ?, ?)", (floor, *LEAVING, "sibling")
            )
            .fetchall()
        )
        for letter_id, state in rows:
            if ulid_ms(letter_id) < cutoff_ms:
                continue
            data = one.read._parsed(letter_id, state)
            if not data.get("in_reply_to") and data.get("type") != "note" and "reason" not in data:
                found.setdefault(str(data.get("message_id") or letter_id), []).append(ulid_ms(letter_id))
    return found


_FILED = st.tuples(
    st.sampled_from(["beta", "beta@bob"]),
    st.sampled_from(STATES),
    st.sampled_from(["report", "question", "note", "close"]),
    st.booleans(),  # a reply
    st.integers(min_value=0, max_value=2 * HOUR),  # how long ago
    st.integers(min_value=1, max_value=12),  # its Message-ID: the same one in two mailboxes is one thread
    st.booleans(),  # bytes that parse to no letter (a reason, once the records are made again)
)
_MOVED = st.tuples(st.integers(min_value=0, max_value=30), st.sampled_from(STATES))


@settings(max_examples=examples(120), deadline=None)
@given(
    filed=st.lists(_FILED, min_size=1, max_size=14),
    moved=st.lists(_MOVED, max_size=6),
    rebuilt=st.booleans(),
    window=st.integers(min_value=0, max_value=2 * HOUR),
)
def test_the_openers_rows_count_what_reading_every_letter_counted(
    filed: list[tuple[Any, ...]], moved: list[tuple[int, str]], rebuilt: bool, window: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        beta = Spool(Path(tmp) / "spool" / "beta", name_of=NAMES.get)
        mailboxes = {"beta": beta, "beta@bob": Spool(Path(tmp) / "spool" / "beta@bob", platform_root=beta.root)}
        now = int(time.time() * 1000)
        ids: list[tuple[Spool, str, str]] = []
        for n, (mailbox, state, kind, reply, ago, mid, garbled) in enumerate(filed):
            changes: dict[str, Any] = {"type": kind}
            if reply:
                changes["in_reply_to"] = "<0.alpha@bus.test>"
            letter, raw = _letter(mid, **changes)
            letter_id = ulid_floor(now - ago)[:10] + f"{n:016d}"
            spool = mailboxes[mailbox]
            spool.write.store(state, letter.replace(id=letter_id), b"garbled" if garbled else raw, durable=False)
            ids.append((spool, letter_id, state))
        for index, target in moved:
            spool, letter_id, state = ids[index % len(ids)]
            if spool.write.move(letter_id, state, target, durable=False):
                ids[index % len(ids)] = (spool, letter_id, target)
        if rebuilt:
            for spool in mailboxes.values():
                spool.drop_caches()
        cutoff = now - window
        old = _old_openers_since(beta, cutoff)
        expected = {opener_key(m): min(times) for m, times in old.items()}
        assert beta.read.opener_keys_since(cutoff) == expected
        assert beta.read.opener_key_set(cutoff) == (set(expected), min(expected.values(), default=None))
        assert opened_count(beta, None, cutoff + HOUR) == (len(expected), min(expected.values(), default=None))
        assert len(opened_since(beta.read, cutoff)) == sum(len(times) for times in old.values())


def _marker_oracle(transport: LocalTransport, cutoff_ms: int) -> dict[str, int]:
    """The markers read as they were: each one opened, its Message-ID read (``openers_since``)."""
    return {opener_key(message_id): when for message_id, when in (transport.openers_since(cutoff_ms) or {}).items()}


@settings(max_examples=examples(60), deadline=None)
@given(
    sent=st.lists(st.tuples(st.integers(min_value=0, max_value=2 * HOUR), st.integers(0, 20)), max_size=12),
    window=st.integers(min_value=0, max_value=2 * HOUR),
)
def test_the_markers_counted_by_name_are_the_markers_read(sent: list[tuple[int, int]], window: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        transport = LocalTransport(Path(tmp) / "postoffice", "alpha", NAMES.get)
        now = ages.now_ms()
        unique = {mid: ago for ago, mid in sent}  # one marker a letter: a second submission is the same one
        cutoff = now - window
        try:
            for n, (mid, ago) in enumerate(unique.items()):
                if n == len(unique) // 2:  # a count between two sends: the next one parses only what is new
                    assert transport.opener_keys_since(cutoff) == _marker_oracle(transport, cutoff)
                ages.clock = lambda ago=ago: (now - ago) / 1000
                raw = f"Message-ID: <{mid}.alpha@bus.test>\r\nX-Agentmail-Type: report\r\n\r\nbody\r\n".encode()
                transport._record_opener(raw)
        finally:
            ages.clock = None
        assert transport.opener_keys_since(cutoff) == _marker_oracle(transport, cutoff)
        for marker in sorted((Path(tmp) / "postoffice" / ".opened" / "alpha").glob("*/*"))[:1]:
            marker.unlink()  # a marker gone: its folder is parsed afresh
        assert transport.opener_keys_since(cutoff) == _marker_oracle(transport, cutoff)


def test_a_marker_name_is_the_opener_key_of_its_message_id(tmp_path: Path) -> None:
    """The one naming scheme both counts share: ``<ms>-<opener_key>``, the key 16 hex digits."""
    transport = LocalTransport(tmp_path / "postoffice", "alpha", NAMES.get)
    transport._record_opener(b"Message-ID: <1.alpha@bus.test>\r\nX-Agentmail-Type: report\r\n\r\nbody\r\n")
    (folder,) = (tmp_path / "postoffice" / ".opened" / "alpha").iterdir()
    (name,) = (p.name for p in folder.iterdir())
    assert (
        name.split("-")[1] == opener_key("<1.alpha@bus.test>") == hashlib.sha256(b"<1.alpha@bus.test>").hexdigest()[:16]
    )
    assert len(opener_key("<1.alpha@bus.test>")) == 16 and opener_key("\ud800") != opener_key("x")


def test_a_spool_of_the_release_before_gets_its_openers_rows_at_its_first_opening(tmp_path: Path) -> None:
    """A spool.db of schema UNOPENED (no openers table): made and filled from its letters, under
    the setup lock, at the first opening; the count is the same as before."""
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    letter, raw = _letter(1)
    filed = beta.write.store("sent", letter, raw)
    reply, reply_raw = _letter(2, in_reply_to="<1.alpha@bus.test>")
    beta.write.store("sent", reply, reply_raw)
    conn = beta.db.conn()
    conn.execute("DROP TABLE openers")
    conn.execute(f"PRAGMA user_version={dbmod.UNOPENED}")
    beta.db.close()
    again = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    assert again.db.version() == dbmod.CURRENT
    assert again.read.opener_keys_since(0) == {opener_key(letter.message_id): ulid_ms(filed.id)}


def test_the_quota_merges_this_home_and_the_markers_by_key(tmp_path: Path) -> None:
    """A letter counted in the spool and by its marker is one thread; a marker of another
    machine's letter is one more."""
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    transport = LocalTransport(tmp_path / "postoffice", "beta", NAMES.get)
    letter, raw = _letter(1)
    filed = beta.write.store("sent", letter, raw)
    transport._record_opener(raw)
    transport._record_opener(raw.replace(b"<1.alpha@bus.test>", b"<9.alpha@bus.test>"))  # another machine's
    now = ages.now_ms()
    times = opened_times(beta, transport, now)
    assert len(times) == 2 and ulid_ms(filed.id) in times
    assert opened_count(beta, transport, now) == (2, times[0])  # what the sender asks: how many, the oldest
    assert opened_count(beta, transport, now + 2 * HOUR) == (0, None)


class _Unreachable(LocalTransport):
    def opener_keys_since(self, cutoff_ms: int) -> dict[str, int] | None:
        raise TransportError("the server cannot be reached")


def test_a_server_that_cannot_be_asked_leaves_this_homes_count(tmp_path: Path) -> None:
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    letter, raw = _letter(1)
    filed = beta.write.store("sent", letter, raw)
    transport = _Unreachable(tmp_path / "postoffice", "beta", NAMES.get)
    assert opened_count(beta, transport, ages.now_ms()) == (1, ulid_ms(filed.id))
    assert opened_times(beta, transport, ages.now_ms()) == [ulid_ms(filed.id)]


def test_a_name_that_is_no_marker_is_not_counted(tmp_path: Path) -> None:
    """In a marker folder, a name that is no time, a key that is not 16 characters and an older
    marker are passed over; what has a marker's name counts, whatever it holds (a name, not a
    file, is what is counted: a marker whose write a crash cut short still counts)."""
    transport = LocalTransport(tmp_path / "postoffice", "alpha", NAMES.get)
    transport._record_opener(b"Message-ID: <1.alpha@bus.test>\r\nX-Agentmail-Type: report\r\n\r\nbody\r\n")
    (folder,) = (tmp_path / "postoffice" / ".opened" / "alpha").iterdir()
    now = ages.now_ms()
    (folder / f"soon-{opener_key('<x@bus.test>')}").write_text("<x@bus.test>")
    (folder / f"{now}-short").write_text("<y@bus.test>")
    (folder / f"{now - 2 * HOUR}-{opener_key('<z@bus.test>')}").write_text("<z@bus.test>")
    (folder / f"{now}-{opener_key('<w@bus.test>')[:15]}x").mkdir()  # a marker's name
    cutoff = now - HOUR
    keys = transport.opener_keys_since(cutoff)
    assert set(keys) == {opener_key("<1.alpha@bus.test>"), opener_key("<w@bus.test>")[:15] + "x"}
    assert transport.opener_keys_since(now + 3 * HOUR) == {} and transport._markers == {}  # past hours forgotten


# --- the window kept in the process: the same answers as the plain count, step by step ----------

_FILED_OFTEN_COUNTED = st.tuples(
    st.sampled_from(["beta", "beta@bob"]),
    st.sampled_from(["outbox", "sent", "held", "sibling", "failed", "unread"]),
    st.sampled_from(["report", "question", "note"]),
    st.sampled_from([False, False, True]),  # a reply
    st.integers(min_value=0, max_value=2 * HOUR),
    st.integers(min_value=1, max_value=8),
    st.just(False),
)
_STEP = st.one_of(
    st.tuples(st.just("file"), _FILED_OFTEN_COUNTED),
    st.tuples(st.just("move"), _MOVED),
    st.tuples(st.just("move"), st.tuples(st.integers(0, 30), st.sampled_from(["failed", "sent", "unread"]))),
    st.tuples(st.just("other"), _MOVED),  # a move by another connection (another process's commit)
    st.tuples(st.just("rebuild"), st.sampled_from(["beta", "beta@bob"])),
    st.tuples(st.just("count"), st.integers(min_value=-HOUR // 2, max_value=2 * HOUR)),  # the window slides, or back
)


def _plain(spool: Spool, cutoff: int) -> tuple[set[str], int | None]:
    """The count read whole: every letter of the window, its record parsed (the oracle)."""
    old = _old_openers_since(spool, cutoff)
    return {opener_key(m) for m in old}, min((min(t) for t in old.values()), default=None)


@settings(max_examples=examples(120), deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=24))
def test_the_window_kept_between_counts_counts_what_the_plain_count_counts(steps: list[tuple[str, Any]]) -> None:
    """One reader counts again and again while letters are filed, moved (by this connection and
    by another), the caches rebuilt and the window slides: each answer is the plain count's."""
    with tempfile.TemporaryDirectory() as tmp:
        beta = Spool(Path(tmp) / "spool" / "beta", name_of=NAMES.get)
        mailboxes = {"beta": beta, "beta@bob": Spool(Path(tmp) / "spool" / "beta@bob", platform_root=beta.root)}
        now = int(time.time() * 1000)
        cutoff = now - HOUR
        ids: list[tuple[Spool, str, str]] = []
        for n, (what, step) in enumerate([*steps, ("count", 0)]):
            if what == "file":
                mailbox, state, kind, reply, ago, mid, _ = step
                changes: dict[str, Any] = {"type": kind}
                if reply:
                    changes["in_reply_to"] = "<0.alpha@bus.test>"
                letter, raw = _letter(mid, **changes)
                letter_id = ulid_floor(now - ago)[:10] + f"{n:016d}"
                mailboxes[mailbox].write.store(state, letter.replace(id=letter_id), raw, durable=False)
                ids.append((mailboxes[mailbox], letter_id, state))
            elif what in ("move", "other") and ids:
                index, target = step
                spool, letter_id, state = ids[index % len(ids)]
                mover = spool if what == "move" else Spool(spool.root, platform_root=beta.root)
                if mover.write.move(letter_id, state, target, durable=False):
                    ids[index % len(ids)] = (spool, letter_id, target)
            elif what == "rebuild":
                mailboxes[step].drop_caches()
            elif what == "count":
                cutoff += step
            assert beta.read.opener_key_set(cutoff) == _plain(beta, cutoff), (n, what, step)


def test_a_letter_moved_out_of_the_counted_states_leaves_the_kept_window(tmp_path: Path) -> None:
    """A queued letter that fails for good is no longer counted, by this connection's move or another's."""
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    now = int(time.time() * 1000)
    ids = []
    for n in range(3):
        letter, raw = _letter(n + 1)
        ids.append(beta.write.store("outbox", letter.replace(id=ulid_floor(now - n)[:10] + f"{n:016d}"), raw).id)
    keys, oldest = beta.read.opener_key_set(now - HOUR)
    assert len(keys) == 3 and oldest == now - 2
    assert beta.write.move(ids[2], "outbox", "failed")
    assert beta.read.opener_key_set(now - HOUR) == (keys - {opener_key(_letter(3)[0].message_id)}, now - 1)
    assert Spool(beta.root).write.move(ids[1], "outbox", "failed")  # another connection: data_version moved
    assert beta.read.opener_key_set(now - HOUR) == ({opener_key(_letter(1)[0].message_id)}, now)
    assert beta.read.opener_key_set(now + 1) == (set(), None)  # slid past the last one
    # one Message-ID filed twice (a letter and a copy of it): counted once, and still once the copy fails
    twice = [beta.write.store("outbox", _letter(9)[0].replace(id=new_id), _letter(9)[1]).id for new_id in (
        ulid_floor(now - 5)[:10] + "9" * 16, ulid_floor(now - 6)[:10] + "8" * 16)]  # fmt: skip
    key = opener_key(_letter(9)[0].message_id)
    assert beta.read.opener_key_set(now - HOUR) == ({opener_key(_letter(1)[0].message_id), key}, now - 6)
    assert beta.write.move(twice[0], "outbox", "failed")
    assert beta.read.opener_key_set(now - HOUR) == ({opener_key(_letter(1)[0].message_id), key}, now - 6)
    assert beta.read.opener_key_set(now - HOUR) == _plain(beta, now - HOUR)


def test_a_count_after_letters_changed_reads_them_with_the_version_check(tmp_path: Path) -> None:
    """The kept window brought up to date after this connection filed and moved letters: one
    read gives the versions and each letter changed with its row (NULLs for one the window no
    longer holds), then the list is emptied: two statements, not a third read of the rows; the
    answer is the plain count's, and the next count finds nothing changed."""
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    now = int(time.time() * 1000)
    first, raw = _letter(1)
    beta.write.store("outbox", first.replace(id=ulid_floor(now - 2)[:10] + "1" * 16), raw)
    beta.read.opener_key_set(now - HOUR)  # the window loaded
    gone, raw = _letter(2)
    gone_id = beta.write.store("outbox", gone.replace(id=ulid_floor(now - 1)[:10] + "2" * 16), raw).id
    beta.write.store("outbox", _letter(3)[0].replace(id=ulid_floor(now)[:10] + "3" * 16), _letter(3)[1])
    assert beta.write.move(gone_id, "outbox", "failed")  # changed, no longer counted: its row gives NULLs
    said: list[str] = []
    conn = beta.db.conn()
    conn.set_trace_callback(said.append)
    try:
        keys, oldest = beta.read.opener_key_set(now - HOUR)
        said.append("-- again")
        assert beta.read.opener_key_set(now - HOUR) == (keys, oldest)
    finally:
        conn.set_trace_callback(None)
    statements = [s.split(" (SELECT")[0] for s in said if not s.startswith("--") or s == "-- again"]
    assert statements == [
        "SELECT d.*, s.*, t.id,",
        "DELETE FROM am_openers_touched",
        "-- again",
        "SELECT d.*, s.*, t.id,",
    ]
    assert (keys, oldest) == _plain(beta, now - HOUR)
    assert keys == {opener_key(_letter(1)[0].message_id), opener_key(_letter(3)[0].message_id)}


# --- a big hour folder watched, not listed: the same names as listing it --------------------------

_MARKER_STEP = st.one_of(
    st.tuples(st.just("send"), st.integers(0, 30), st.integers(0, 2 * HOUR)),  # this process's marker
    st.tuples(st.just("other"), st.integers(0, 30), st.integers(0, 2 * HOUR)),  # another process's
    st.tuples(st.just("remove"), st.integers(0, 60), st.just(0)),  # a marker gone
    st.tuples(st.just("junk"), st.integers(0, 60), st.just(0)),  # a name that is no marker
)


@settings(max_examples=examples(120), deadline=None)
@given(steps=st.lists(_MARKER_STEP, min_size=1, max_size=30), window=st.integers(min_value=0, max_value=2 * HOUR))
def test_a_watched_hour_folder_counts_what_listing_it_counts(steps: list[tuple[str, int, int]], window: int) -> None:
    """From the second count of a folder of ``WATCH_FROM`` markers on, the names come from a
    watch: after every step the count is the one a fresh process makes by listing, and the one
    made by reading every marker."""
    from unittest import mock

    from agentmail.transport import local

    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(local, "WATCH_FROM", 1):
        postoffice = Path(tmp) / "postoffice"
        counting = LocalTransport(postoffice, "alpha", NAMES.get)
        other = LocalTransport(postoffice, "alpha", NAMES.get)
        now = ages.now_ms()
        cutoff = now - window
        try:
            for n, (what, mid, ago) in enumerate(steps):
                folders = sorted((postoffice / ".opened" / "alpha").glob("*"))
                if what in ("send", "other"):
                    ages.clock = lambda ago=ago: (now - ago) / 1000
                    raw = f"Message-ID: <{mid}.alpha@bus.test>\r\nX-Agentmail-Type: report\r\n\r\nbody\r\n".encode()
                    (counting if what == "send" else other)._record_opener(raw)
                    ages.clock = None
                elif what == "remove" and folders:
                    markers = sorted(p for folder in folders for p in folder.iterdir())
                    if markers:
                        markers[mid % len(markers)].unlink()
                elif what == "junk" and folders:
                    (folders[mid % len(folders)] / f"junk{n}").write_bytes(b"")
                fresh = LocalTransport(postoffice, "alpha", NAMES.get).opener_keys_since(cutoff)
                assert counting.opener_keys_since(cutoff) == fresh, (n, what)
                names = [p.name for p in (postoffice / ".opened" / "alpha").glob("*/*-*")]
                if len({name.partition("-")[2] for name in names}) == len(names):  # (the oracle: one marker a letter)
                    assert fresh == _marker_oracle(counting, cutoff)
        finally:
            ages.clock = None
        counting.opener_keys_since(cutoff)  # (each folder counted twice by now: watched)
        assert all(m.watch is not None or not m.names for m in counting._markers.values())
        counting.close()  # the watches go with the transport; a count after it lists again
        assert all(m.watch is None for m in counting._markers.values())
        assert counting.opener_keys_since(cutoff) == LocalTransport(postoffice, "alpha", NAMES.get).opener_keys_since(
            cutoff
        )


def test_the_kept_window_in_a_transaction_with_odd_ids_and_after_many_changes(tmp_path: Path) -> None:
    """The window's less common roads, each against the plain count: a count inside a write
    transaction (read whole), ids that are no ULID of their time (judged by the query's test, as
    they come and as the window slides past them), and more changes than it follows one by one."""
    from unittest import mock

    from agentmail.spool import views

    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    for n, letter_id in enumerate(("01uheld", "01uqueued")):
        letter, raw = _letter(n + 1)
        beta.write.store("outbox", letter.replace(id=letter_id), raw, durable=False)
        assert beta.read.opener_key_set(-5) == _plain(beta, -5)  # (a time of -1: in a window from -5)
    assert len(beta.read.opener_key_set(-5)[0]) == 2 and beta.read.opener_key_set(-5)[1] == -1
    assert beta.read.opener_key_set(0) == (set(), None) == _plain(beta, 0)  # slid past them
    now = int(time.time() * 1000)
    with beta.db.write():
        assert beta.read.opener_key_set(now - HOUR) == _plain(beta, now - HOUR)
    beta.db.close()  # a new connection: a new window
    assert beta.read.opener_key_set(-5) == _plain(beta, -5)
    with mock.patch.object(views, "_MANY", 1):
        for n in range(3):
            letter, raw = _letter(n + 5)
            beta.write.store("sent", letter.replace(id=ulid_floor(now - n)[:10] + f"{n:016d}"), raw, durable=False)
        assert beta.read.opener_key_set(now - HOUR) == _plain(beta, now - HOUR)
        assert len(beta.read.opener_key_set(now - HOUR)[0]) == 3


def test_watched_marker_folders_across_two_hours_and_out_of_the_window(tmp_path: Path) -> None:
    """Two hour folders both counted (the older one's answer under the newer one's), a watch that
    leaves with its hour, a folder that cannot be listed once watched, and a watch of no folder."""
    from unittest import mock

    from agentmail.transport import inotify, local

    postoffice = tmp_path / "postoffice"
    counting = LocalTransport(postoffice, "alpha", NAMES.get)
    now = ages.now_ms()
    try:
        for mid, ago in ((1, HOUR + 60_000), (2, 0)):  # the hour before and this one
            ages.clock = lambda ago=ago: (now - ago) / 1000
            raw = f"Message-ID: <{mid}.alpha@bus.test>\r\nX-Agentmail-Type: report\r\n\r\nbody\r\n".encode()
            counting._record_opener(raw)
    finally:
        ages.clock = None
    cutoff = now - 2 * HOUR
    with mock.patch.object(local, "WATCH_FROM", 1):
        for _ in range(3):  # listed, listed with a watch made, watched
            assert counting.opener_keys_since(cutoff) == _marker_oracle(counting, cutoff)
            assert len(counting.opener_keys_since(cutoff)) == 2
        assert all(m.watch is not None for m in counting._markers.values())
        assert len(counting.opener_keys_since(now - 60_000)) == 1  # the older hour left the window, its watch closed
        assert len(counting._markers) == 1
        counting.close()
        counting.close()  # (twice: nothing left to close)
        with mock.patch.object(os, "listdir", side_effect=PermissionError("no listing")):
            assert counting.opener_keys_since(now - 60_000) == {}  # a folder that cannot be listed: counted as none
        assert len(counting.opener_keys_since(now - 60_000)) == 1
    assert inotify.watch(tmp_path / "no such folder", inotify.EVERY_NAME) is None
