"""The one Maildir writer (transport/maildir.py) and what the post office writes with it: the
letter (flushed before ``submit`` returns), the platform's sent record of it (a link, not
flushed) and the opener marker (a hard link of the letter where it can be)."""

from __future__ import annotations

import ast
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.transport import maildir
from agentmail.transport.base import Envelope, Outgoing
from agentmail.transport.local import OPENED, LocalTransport, marked_id
from agentmail.transport.sent_record import SENT, record

from ..depth import examples

OPENER = (
    b"From: alpha@bus.test\r\nTo: beta@bus.test\r\nMessage-ID: <o1@bus.test>\r\n"
    b"X-Agentmail-Type: question\r\nSubject: x\r\n\r\nbody\r\n"
)


@pytest.fixture
def flushed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths every os.fsync of the test flushed, in order."""
    seen: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    yield seen


def _spool_copy(folder: Path, raw: bytes) -> tuple[str, int, int]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "letter.eml"
    path.write_bytes(raw)
    st_ = path.stat()
    return str(path), st_.st_dev, st_.st_ino


def test_put_writes_in_tmp_then_renames_into_new_flushing_the_file_and_then_new(
    tmp_path: Path, flushed: list[str]
) -> None:
    box = tmp_path / "box"
    name = maildir.put(box, b"bytes", suffix="sent")
    assert name.endswith(".sent") and os.listdir(box / "new") == [name] and os.listdir(box / "tmp") == []
    assert (box / "new" / name).read_bytes() == b"bytes"
    assert oct((box / "new" / name).stat().st_mode & 0o777) == "0o600"
    assert flushed == [str(box / "tmp" / name), str(box / "new")]


def test_put_links_the_senders_copy_and_flushes_it_before_the_rename(tmp_path: Path, flushed: list[str]) -> None:
    copy = _spool_copy(tmp_path / "spool", b"letter")
    name = maildir.put(tmp_path / "box", b"letter", copy)
    assert (tmp_path / "box" / "new" / name).stat().st_ino == copy[2]
    assert flushed == [str(tmp_path / "box" / "tmp" / name), str(tmp_path / "box" / "new")]


def test_put_writes_its_own_file_when_the_copy_is_no_longer_those_bytes(tmp_path: Path) -> None:
    path, dev, ino = _spool_copy(tmp_path / "spool", b"letter")
    name = maildir.put(tmp_path / "box", b"other", (path, dev, ino))  # the size differs: not that file
    written = tmp_path / "box" / "new" / name
    assert written.read_bytes() == b"other" and written.stat().st_ino != ino
    assert os.listdir(tmp_path / "box" / "tmp") == []


def test_the_post_office_sent_record_is_not_flushed(tmp_path: Path, flushed: list[str]) -> None:
    """The platform's other homes read it for their threads; the letter and the sender's spool
    record of it are the durable ones."""
    folder = tmp_path / "po" / SENT / "alpha"
    record(folder, b"letter", None)
    (name,) = os.listdir(folder / "new")
    assert name.endswith(".sent") and (folder / "new" / name).read_bytes() == b"letter" and flushed == []


def test_submit_flushes_the_letter_once_and_links_it_into_the_sent_record(tmp_path: Path, flushed: list[str]) -> None:
    postoffice = tmp_path / "po"
    transport = LocalTransport(postoffice, "alpha", {"beta@bus.test": "beta"}.get)
    copy = _spool_copy(tmp_path / "spool", OPENER)
    (result,) = transport.submit([Outgoing("k", OPENER, Envelope("alpha@bus.test", ("beta@bus.test",)), copy=copy)])
    assert result.status == "sent"
    (delivered,) = os.listdir(postoffice / "beta" / "new")
    (kept,) = os.listdir(postoffice / SENT / "alpha" / "new")
    assert flushed == [str(postoffice / "beta" / "tmp" / delivered), str(postoffice / "beta" / "new")]
    inodes = {
        (postoffice / "beta" / "new" / delivered).stat().st_ino,
        (postoffice / SENT / "alpha" / "new" / kept).stat().st_ino,
    }
    assert inodes == {copy[2]}  # one inode: nothing was written twice


def _markers(postoffice: Path) -> list[Path]:
    return sorted((postoffice / OPENED / "alpha").glob("*/*"))


def test_an_opener_marker_is_a_link_of_the_letter_and_names_its_message_id(tmp_path: Path) -> None:
    postoffice = tmp_path / "po"
    transport = LocalTransport(postoffice, "alpha", {"beta@bus.test": "beta"}.get)
    copy = _spool_copy(tmp_path / "spool", OPENER)
    transport.submit([Outgoing("k", OPENER, Envelope("alpha@bus.test", ("beta@bus.test",)), copy=copy)])
    (marker,) = _markers(postoffice)
    assert marker.stat().st_ino == copy[2] and marker.stat().st_nlink == 4  # spool, beta, sent record, marker
    assert marker.name.endswith("-" + hashlib.sha256(b"<o1@bus.test>").hexdigest()[:16])  # the name is as before
    assert list(transport.openers_since(0) or {}) == ["<o1@bus.test>"]


def test_an_opener_without_a_spool_copy_gets_a_marker_holding_its_message_id(tmp_path: Path) -> None:
    postoffice = tmp_path / "po"
    transport = LocalTransport(postoffice, "alpha", {"beta@bus.test": "beta"}.get)
    transport.submit([Outgoing("k", OPENER, Envelope("alpha@bus.test", ("beta@bus.test",)))])
    (marker,) = _markers(postoffice)
    assert marker.read_bytes() == b"<o1@bus.test>"
    transport._record_opener(OPENER)  # the same letter again, the same millisecond or not: one marker each
    assert set(transport.openers_since(0) or {}) == {"<o1@bus.test>"}


def test_a_marker_that_is_no_regular_file_names_nothing(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "letter").write_bytes(OPENER)
    os.symlink(tmp_path / "letter", tmp_path / "link")
    os.mkdir(tmp_path / "dir")
    assert marked_id(str(tmp_path / "letter")) == "<o1@bus.test>"
    for name in ("fifo", "link", "dir", "missing"):
        assert marked_id(str(tmp_path / name)) is None
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "reply").write_bytes(OPENER.replace(b"Subject", b"In-Reply-To: <p@bus.test>\r\nSubject"))
    assert marked_id(str(tmp_path / "empty")) is None and marked_id(str(tmp_path / "reply")) is None


def test_a_marker_swapped_or_unreadable_after_the_look_names_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "letter").write_bytes(OPENER)
    real_fstat = os.fstat
    os.mkfifo(tmp_path / "fifo")
    fifo_stat = os.stat(tmp_path / "fifo")
    monkeypatch.setattr(os, "fstat", lambda fd: fifo_stat)  # replaced by a FIFO between the look and the open
    assert marked_id(str(tmp_path / "letter")) is None
    monkeypatch.setattr(os, "fstat", real_fstat)

    def unreadable(fd: int, size: int) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "read", unreadable)
    assert marked_id(str(tmp_path / "letter")) is None


@settings(max_examples=examples(200), deadline=None)
@given(data=st.binary(max_size=300))
def test_a_marker_holding_any_bytes_gives_a_message_id_or_none(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("m") / "marker"
    path.write_bytes(data)
    got = marked_id(str(path))
    assert got is None or isinstance(got, str)
    if data.startswith(b"<"):
        assert got == data.decode("utf-8", "replace")


def _imports(module: Path) -> set[str]:
    """The transport modules ``module`` imports, under TYPE_CHECKING too (a circle for a reader)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def test_the_transport_modules_import_in_one_direction() -> None:
    folder = Path(maildir.__file__).parent
    graph = {path.stem: _imports(path) for path in folder.glob("*.py") if path.stem != "__init__"}
    done: set[str] = set()

    def walk(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"a circle: {' -> '.join((*path, node))}"
        if node in done:
            return
        for target in sorted(graph.get(node, ())):
            walk(target, (*path, node))
        done.add(node)

    for name in sorted(graph):
        walk(name, ())
