"""The ledger's exact behaviour, one rule a test (mutation run 12): the bytes of a record, how an
append opens, locks and writes the file, and what a hostile ledger is read back as."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentmail.spool import ledger
from agentmail.spool.ledger import Entry

STATES = ("unread", "read", "held")


def _read(root: Path) -> bytes:
    return (root / ledger.FILE).read_bytes()


def _own_fd(root: Path) -> int:
    """The descriptor this process holds on the ledger (inside ``appending``)."""
    target = str(root / ledger.FILE)
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == target:
                return int(name)
        except OSError:
            continue
    raise AssertionError("the ledger is not open")


def test_a_record_is_one_compact_ascii_json_line() -> None:
    assert ledger.line({"id": "a1", "notes": {"why": "é"}}) == b'{"id":"a1","notes":{"why":"\\u00e9"}}\n'


def test_an_append_writes_the_lines_in_order_after_what_was_there(tmp_path: Path) -> None:
    (tmp_path / ledger.FILE).write_bytes(b'{"id":"a"}\n')
    ledger.append(str(tmp_path), [b"one\n", b"two\n"])
    ledger.append(str(tmp_path), [b"three\n"])
    assert _read(tmp_path) == b'{"id":"a"}\none\ntwo\nthree\n'


def test_a_new_ledger_is_private_and_starts_with_the_first_line(tmp_path: Path) -> None:
    ledger.append(str(tmp_path), [b"one\n"])
    assert _read(tmp_path) == b"one\n"
    assert (tmp_path / ledger.FILE).stat().st_mode & 0o777 == 0o600


def test_nothing_to_append_makes_no_ledger(tmp_path: Path) -> None:
    with ledger.appending(str(tmp_path), []):
        pass
    assert not (tmp_path / ledger.FILE).exists()


def test_a_torn_last_line_gets_its_newline_before_the_next_records(tmp_path: Path) -> None:
    (tmp_path / ledger.FILE).write_bytes(b'{"id":"a","sta')
    ledger.append(str(tmp_path), [b"next\n"])
    assert _read(tmp_path) == b'{"id":"a","sta\nnext\n'


def test_a_whole_last_line_gets_no_extra_newline(tmp_path: Path) -> None:
    (tmp_path / ledger.FILE).write_bytes(b"x\ny\n")
    ledger.append(str(tmp_path), [b"next\n"])
    assert _read(tmp_path) == b"x\ny\nnext\n"


def test_the_ledger_is_locked_and_opened_for_appending_while_the_commit_runs(tmp_path: Path) -> None:
    """Inside ``appending``: held under flock (another open file cannot lock it), opened
    read-write, append-only, non-blocking and closed on exec; the lines come only after."""
    with ledger.appending(str(tmp_path), [b"line\n"]):
        assert _read(tmp_path) == b""
        fd = _own_fd(tmp_path)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        assert flags & os.O_ACCMODE == os.O_RDWR
        assert flags & os.O_APPEND and flags & os.O_NONBLOCK
        assert not os.get_inheritable(fd)
        with open(tmp_path / ledger.FILE, "rb") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert _read(tmp_path) == b"line\n"
    with open(tmp_path / ledger.FILE, "rb") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # released with the close


def test_a_commit_that_raises_adds_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), ledger.appending(str(tmp_path), [b"line\n"]):
        raise RuntimeError("the commit failed")
    assert _read(tmp_path) == b""


def test_a_ledger_that_cannot_be_opened_is_left_alone(tmp_path: Path) -> None:
    ran = []
    with ledger.appending(str(tmp_path / "no-such-folder"), [b"line\n"]):
        ran.append(True)
    assert ran == [True]


def test_a_symbolic_link_at_the_ledger_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    (tmp_path / ledger.FILE).symlink_to(target)
    ledger.append(str(tmp_path), [b"line\n"])
    assert target.read_bytes() == b""


def test_a_fifo_at_the_ledger_is_never_locked_nor_written(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ledger.FILE)
    reader = os.open(tmp_path / ledger.FILE, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with ledger.appending(str(tmp_path), [b"line\n"]):
            pass
        assert os.read(reader, 10) == b""  # nothing was written into it (and no writer is left)
    finally:
        os.close(reader)


def test_a_full_disk_leaves_the_commit_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ledger.os, "write", full)
    ledger.append(str(tmp_path), [b"line\n"])
    assert _read(tmp_path) == b""


def test_every_byte_is_written_when_a_write_takes_only_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.write
    calls = []

    def short(fd: int, data: Any) -> int:
        calls.append(len(data))
        return real(fd, bytes(data[:3]))

    monkeypatch.setattr(ledger.os, "write", short)
    ledger.append(str(tmp_path), [b"0123456789\n"])
    assert _read(tmp_path) == b"0123456789\n"
    assert calls == [11, 8, 5, 2]


@pytest.mark.parametrize(
    ("letter_id", "valid"),
    [("a", True), ("A1" * 32, True), ("a" * 65, False), ("", False), ("a-b", False), ("é", False), (7, False)],
)
def test_an_id_is_one_to_64_ascii_letters_and_digits(letter_id: object, valid: bool) -> None:
    data = ledger.line({"id": letter_id, "state": "read"})
    assert ledger.parse(data, STATES) == ({str(letter_id): Entry(state="read")} if valid else {})


def test_the_last_word_on_an_id_wins_and_seq_is_kept_from_a_state_record() -> None:
    data = b"".join(
        ledger.line(r)
        for r in (
            {"id": "a", "state": "unread", "seq": 0},
            {"id": "b", "state": "held", "seq": 4},
            {"id": "a", "state": "read"},
        )
    )
    assert ledger.parse(data, STATES) == {"a": Entry(state="read", seq=0), "b": Entry(state="held", seq=4)}


@pytest.mark.parametrize("seq", [-1, True, "3", 2.0, None])
def test_a_seq_that_is_no_filing_number_is_not_said(seq: object) -> None:
    data = ledger.line({"id": "a", "state": "read", "seq": seq})
    assert ledger.parse(data, STATES) == {"a": Entry(state="read", seq=-1)}


def test_a_state_not_among_the_spools_is_skipped_and_the_notes_beside_it_are_read() -> None:
    data = ledger.line({"id": "a", "state": "sent", "seq": 3}) + ledger.line(
        {"id": "b", "state": "nowhere", "notes": {"k": "v"}}
    )
    assert ledger.parse(data, STATES) == {"b": Entry(notes={"k": "v"}, notes_said=True)}


def test_a_state_record_sets_only_the_state_even_with_notes_beside_it() -> None:
    data = ledger.line({"id": "a", "state": "held", "notes": {"k": "v"}, "set": {"x": "y"}})
    assert ledger.parse(data, STATES) == {"a": Entry(state="held")}


def test_notes_replace_and_a_set_adds_to_them() -> None:
    data = b"".join(
        ledger.line(r)
        for r in (
            {"id": "a", "state": "read", "seq": 2},
            {"id": "a", "notes": {"old": "1", "k": "v"}},
            {"id": "a", "notes": {"k": "w"}},
            {"id": "a", "set": {"more": "2"}},
            {"id": "a", "set": {"k": "z"}},
        )
    )
    expected = Entry(state="read", seq=2, notes={"k": "z", "more": "2"}, notes_said=True)
    assert ledger.parse(data, STATES) == {"a": expected}


def test_a_set_alone_says_the_notes_and_empty_notes_clear_them() -> None:
    data = ledger.line({"id": "a", "set": {"k": "v"}}) + ledger.line({"id": "b", "notes": {"k": "v"}})
    data += ledger.line({"id": "b", "notes": {}})
    assert ledger.parse(data, STATES) == {
        "a": Entry(notes={"k": "v"}, notes_said=True),
        "b": Entry(notes={}, notes_said=True),
    }


def test_gone_drops_only_on_true_and_what_follows_starts_afresh() -> None:
    data = b"".join(
        ledger.line(r)
        for r in (
            {"id": "a", "state": "read", "seq": 1, "notes": {}},
            {"id": "a", "notes": {"k": "v"}},
            {"id": "b", "state": "read"},
            {"id": "b", "gone": 1},
            {"id": "a", "gone": True},
            {"id": "c", "gone": True},
            {"id": "a", "state": "held"},
        )
    )
    assert ledger.parse(data, STATES) == {"a": Entry(state="held"), "b": Entry(state="read")}


@pytest.mark.parametrize(
    "bad",
    [
        b"not json",
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the parser goes
        b'["id", "a"]',
        b'{"state": "read"}',
        b'{"id": "a"}',
        b'{"id": "a", "notes": ["k"]}',
        b'{"id": "a", "set": "k"}',
        b'{"id": "a", "state": 3}',
    ],
)
def test_a_line_of_no_known_shape_is_skipped_and_the_next_is_read(bad: bytes) -> None:
    data = ledger.line({"id": "z", "state": "unread"}) + bad + b"\n" + ledger.line({"id": "y", "state": "read"})
    assert ledger.parse(data, STATES) == {"z": Entry(state="unread"), "y": Entry(state="read")}


def test_a_line_longer_than_the_limit_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    fits = ledger.line({"id": "a", "state": "read"})
    monkeypatch.setattr(ledger, "_MAX_LINE", len(fits) - 1)  # the line without its newline: at the limit
    too_long = ledger.line({"id": "bb", "state": "read"})
    assert ledger.parse(fits + too_long, STATES) == {"a": Entry(state="read")}


def test_a_ledger_is_read_from_its_file_and_none_is_empty(tmp_path: Path) -> None:
    assert ledger.read(str(tmp_path), STATES) == {}
    (tmp_path / ledger.FILE).write_bytes(b"")
    assert ledger.read(str(tmp_path), STATES) == {}
    (tmp_path / ledger.FILE).write_bytes(ledger.line({"id": "a", "state": "held", "seq": 9}))
    assert ledger.read(str(tmp_path), STATES) == {"a": Entry(state="held", seq=9)}
    assert ledger.read(str(tmp_path), ("read",)) == {}


def test_a_ledger_that_is_no_regular_file_says_nothing(tmp_path: Path) -> None:
    (tmp_path / ledger.FILE).mkdir()
    assert ledger.read(str(tmp_path), STATES) == {}


def test_a_line_is_what_parse_reads_back() -> None:
    record = {"id": "a", "notes": {"text": "line one\nline two \u2028 \x00"}}
    assert json.loads(ledger.line(record)) == record
    assert ledger.parse(ledger.line(record), STATES)["a"].notes == record["notes"]


def test_an_empty_or_over_long_line_in_the_middle_is_skipped_and_reading_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, last = ledger.line({"id": "a", "state": "read"}), ledger.line({"id": "b", "state": "held"})
    assert ledger.parse(first + b"\n\n" + last, STATES) == {"a": Entry(state="read"), "b": Entry(state="held")}
    monkeypatch.setattr(ledger, "_MAX_LINE", len(first))
    over = b'{"id":"c","state":"read","pad":"' + b"x" * len(first) + b'"}\n'
    assert ledger.parse(first + over + last, STATES) == {"a": Entry(state="read"), "b": Entry(state="held")}
