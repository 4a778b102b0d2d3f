"""``_fs.read_plain`` held to its exact answers (mutation run 17): the refusal's errno, words and
path; a path swapped after the lstat (for a symbolic link, a FIFO, another file) never followed
nor read; the open's flags; and never more than ``limit`` + 1 bytes read, whatever fstat said."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail._fs import NotAFile, read_plain

from ..depth import examples, suppressed

MOST_READS = 8  # a loop that reads more often than this on a file of a few bytes never ends


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each ``os.read`` as (bytes asked, bytes got); a read loop that would never end fails."""
    seen: list[tuple[int, int]] = []
    real: Callable[[int, int], bytes] = os.read

    def read(fd: int, want: int) -> bytes:
        assert len(seen) < MOST_READS, f"read {len(seen)} times: {seen}"
        got = real(fd, want)
        seen.append((want, len(got)))
        return got

    monkeypatch.setattr(os, "read", read)
    return seen


def _fstat_says(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """fstat reports ``size`` bytes, whatever the file holds (a file that grew since)."""
    real = os.fstat

    def fstat(fd: int) -> os.stat_result:
        st = real(fd)
        return os.stat_result((*st[:6], size, *st[7:]))

    monkeypatch.setattr(os, "fstat", fstat)


def _lstat_of(monkeypatch: pytest.MonkeyPatch, other: Path) -> None:
    """The lstat sees ``other``: what the path was before something swapped it."""
    real = os.lstat
    monkeypatch.setattr(os, "lstat", lambda path, **kw: real(other))


def test_what_is_no_regular_file_is_refused_with_einval_its_kind_and_its_path(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotAFile) as refused:
        read_plain(tmp_path / "fifo")
    assert refused.value.errno == errno.EINVAL
    assert refused.value.strerror == "a FIFO, not a regular file"
    assert refused.value.filename == str(tmp_path / "fifo")
    assert str(refused.value) == f"[Errno 22] a FIFO, not a regular file: '{tmp_path / 'fifo'}'"


def test_another_file_in_its_place_after_the_lstat_is_refused_as_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "before").write_bytes(b"before")
    (tmp_path / "letter").write_bytes(b"letter")
    _lstat_of(monkeypatch, tmp_path / "before")
    with pytest.raises(NotAFile) as refused:
        read_plain(tmp_path / "letter")
    assert (refused.value.errno, refused.value.strerror) == (errno.EINVAL, "replaced while it was opened")
    assert refused.value.filename == str(tmp_path / "letter")
    assert str(refused.value) == f"[Errno 22] replaced while it was opened: '{tmp_path / 'letter'}'"


def test_a_fifo_in_its_place_after_the_lstat_is_refused_as_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same inode, no longer a regular file: the open does not wait (a writer is held open
    here, so no version of the open can hang), the fstat refuses it."""
    os.mkfifo(tmp_path / "fifo")
    writer = os.open(tmp_path / "fifo", os.O_RDWR | os.O_NONBLOCK)
    try:
        real = os.lstat

        def lstat(path: Any, **kw: Any) -> os.stat_result:  # the FIFO's own inode, seen as a regular file
            return os.stat_result((0o100600, *real(path)[1:]))

        monkeypatch.setattr(os, "lstat", lstat)
        with pytest.raises(NotAFile, match="replaced while it was opened"):
            read_plain(tmp_path / "fifo", 10)
    finally:
        os.close(writer)


def test_a_symbolic_link_in_its_place_after_the_lstat_is_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "secret").write_bytes(b"secret")
    (tmp_path / "letter").symlink_to(tmp_path / "secret")
    _lstat_of(monkeypatch, tmp_path / "secret")  # the very file the link leads to: only O_NOFOLLOW refuses
    with pytest.raises(OSError) as refused:
        read_plain(tmp_path / "letter")
    assert refused.value.errno == errno.ELOOP


def test_the_file_is_opened_read_only_never_followed_never_waited_for_never_inherited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "letter").write_bytes(b"letter")
    flags: list[int] = []
    real = os.open

    def opened(path: Any, how: int, *rest: Any, **kw: Any) -> int:
        flags.append(how)
        return real(path, how, *rest, **kw)

    monkeypatch.setattr(os, "open", opened)
    assert read_plain(tmp_path / "letter")[0] == b"letter"
    assert flags == [os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC]


def test_a_file_fstat_says_is_too_large_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "letter").write_bytes(b"x" * 100)
    reads = _reads(monkeypatch)
    data, st = read_plain(tmp_path / "letter", 99)
    assert (data, st.st_size, reads) == (None, 100, [])


def test_a_whole_file_is_read_in_one_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "letter").write_bytes(b"x" * 100)
    reads = _reads(monkeypatch)
    assert read_plain(tmp_path / "letter")[0] == b"x" * 100
    assert len(reads) == 1 and reads[0][1] == 100
    reads.clear()
    assert read_plain(tmp_path / "letter", 100)[0] == b"x" * 100
    assert reads == [(101, 100)]  # the one byte more sees a file that grew, and no more than that


def test_a_file_that_grew_since_its_fstat_is_read_whole_without_a_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "letter").write_bytes(b"0123456789")
    _fstat_says(monkeypatch, 3)
    reads = _reads(monkeypatch)
    data, st = read_plain(tmp_path / "letter")
    assert (data, st.st_size) == (b"0123456789", 3)
    assert reads[0] == (4, 4) and sum(got for _, got in reads) == 10


def test_a_file_that_grew_past_its_limit_is_read_to_one_byte_past_it_and_no_further(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "letter").write_bytes(b"0123456789")
    _fstat_says(monkeypatch, 3)
    reads = _reads(monkeypatch)
    assert read_plain(tmp_path / "letter", 5)[0] is None
    assert reads == [(4, 4), (2, 2)]
    reads.clear()
    assert read_plain(tmp_path / "letter", 10)[0] == b"0123456789"
    assert reads == [(4, 4), (7, 6)]


def test_the_file_is_closed_whatever_the_answer(tmp_path: Path) -> None:
    (tmp_path / "letter").write_bytes(b"x" * 10)
    before = sorted(os.listdir("/proc/self/fd"))
    for limit in (None, 5, 10):
        read_plain(tmp_path / "letter", limit)
    assert sorted(os.listdir("/proc/self/fd")) == before


@settings(
    max_examples=examples(80), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(content=st.binary(max_size=300), limit=st.none() | st.integers(0, 400))
def test_property_the_bytes_come_back_exactly_when_they_fit(tmp_path: Path, content: bytes, limit: int | None) -> None:
    path = tmp_path / "letter"
    path.write_bytes(content)
    data, st = read_plain(path, limit)
    assert st.st_size == len(content)
    assert data == (content if limit is None or len(content) <= limit else None)
