"""The local post office transport (transport/local.py) on its own: delivery into a Maildir, UIDs
handed out as an IMAP server would, fetch in batches from a checkpoint, and the wait's wakes.

Each test states the exact outcome (file names, UIDs, batches, results): the mutation group
``local`` (tests/MUTATION.md) runs these against the module's mutants.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentmail import ages
from agentmail._fs import locked
from agentmail.transport import inotify
from agentmail.transport import uid_mailbox as mailbox
from agentmail.transport.base import Envelope, Outgoing, SubmitResult
from agentmail.transport.local import BATCH, LocalTransport, Mailbox, deliver

from ..conftest import eventually
from ..depth import examples

RAW = b"From: a@bus.test\r\nTo: b@bus.test\r\nSubject: x\r\n\r\nbody\r\n"


def _names(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def _transport(postoffice: Path, platform: str = "beta") -> LocalTransport:
    known = {"alpha@bus.test": "alpha", "beta@bus.test": "beta", "beta+bob@bus.test": "beta"}
    return LocalTransport(postoffice, platform, known.get)


def _out(key: str, *rcpts: str) -> Outgoing:
    return Outgoing(key, RAW, Envelope("alpha@bus.test", tuple(rcpts)))


# --- delivery ------------------------------------------------------------------------------------


def test_deliver_makes_the_maildir_and_leaves_the_letter_in_new_only(tmp_path: Path) -> None:
    maildir = tmp_path / "po" / "beta"
    name = deliver(maildir, RAW)
    assert (maildir / "new" / name).read_bytes() == RAW
    assert _names(maildir / "tmp") == [] and _names(maildir / "cur") == []
    assert oct((maildir / "new").stat().st_mode & 0o777) == "0o700"
    # time.pid_random.host: 12 random hex digits make two deliveries in one nanosecond distinct
    host = os.uname().nodename
    assert re.fullmatch(rf"\d+\.{os.getpid()}_[0-9a-f]{{12}}\.{re.escape(host)}", name), name
    second = deliver(maildir, b"other")
    assert second != name and _names(maildir / "new") == sorted([name, second])


def test_a_host_name_with_a_slash_makes_no_subfolder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.uname()
    fake = type("uname", (), {"nodename": "rack/7"})()
    monkeypatch.setattr(os, "uname", lambda: fake)
    name = deliver(tmp_path / "beta", RAW)
    monkeypatch.undo()
    assert name.endswith(".rack_7") and os.listdir(tmp_path / "beta" / "new") == [name]
    del real


def test_deliver_remakes_a_maildir_whose_tmp_was_removed(tmp_path: Path) -> None:
    maildir = tmp_path / "beta"
    deliver(maildir, RAW)  # this process now believes the Maildir complete
    (maildir / "tmp").rmdir()
    name = deliver(maildir, b"again")
    assert (maildir / "new" / name).read_bytes() == b"again" and (maildir / "tmp").is_dir()


# --- the mailbox: UIDVALIDITY, UIDs ----------------------------------------------------------------


def test_ensure_writes_the_uidvalidity_once_and_keeps_it(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    value = box.uidvalidity
    assert value.isdigit() and [n for n in os.listdir(box.dir) if n.startswith(".uidvalidity")] == [".uidvalidity"]
    (box.dir / ".uidvalidity").write_text("12345\n")
    Mailbox(box.dir).ensure()
    assert Mailbox(box.dir).uidvalidity == "12345"
    for sub in ("tmp", "new", "cur"):
        assert oct((box.dir / sub).stat().st_mode & 0o777) == "0o700"


def test_of_two_processes_making_the_uidvalidity_the_first_value_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = Mailbox(tmp_path / "beta")
    real_link = os.link

    def other_process_first(source: object, target: object) -> None:
        Path(str(target)).write_text("777")  # the other process linked its value in first
        real_link(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "link", other_process_first)
    box.ensure()
    monkeypatch.undo()
    assert box.uidvalidity == "777"
    assert sorted(n for n in os.listdir(box.dir) if n.startswith(".uidvalidity")) == [".uidvalidity"]


def test_assign_numbers_new_letters_in_name_order_from_one(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "beta")
    assert box.assign() == 1  # nothing new, nothing assigned
    assert not (box.dir / ".uidnext").exists()
    for name in ("3.x", "1.x", "2.x"):
        box.ensure()
        (box.dir / "new" / name).write_bytes(name.encode())
    assert box.assign() == 4
    assert _names(box.dir / "cur") == ["000000000001:2,", "000000000002:2,", "000000000003:2,"]
    assert (box.dir / "cur" / "000000000001:2,").read_bytes() == b"1.x"
    assert (box.dir / ".uidnext").read_text() == "000000000004"
    assert oct((box.dir / ".uidnext").stat().st_mode & 0o777) == "0o600"
    assert _names(box.dir / "new") == []
    (box.dir / "new" / "4.x").write_bytes(b"4.x")
    assert box.assign() == 5 and (box.dir / "cur" / "000000000004:2,").read_bytes() == b"4.x"


def test_many_new_letters_are_numbered_in_passes_in_name_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass takes the first names only (a million names sorted at once held ~80 MB): passes
    number all of them, in name order, each UID once, the counter past the last."""
    monkeypatch.setattr(mailbox, "ASSIGN_CHUNK", 3)
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    names = [f"{n:03d}.x" for n in range(10)]
    for name in reversed(names):
        (box.dir / "new" / name).write_bytes(name.encode())
    assert box.assign() == 11
    assert _names(box.dir / "new") == []
    assert [(box.dir / "cur" / f"{uid:012d}:2,").read_bytes() for uid in range(1, 11)] == [n.encode() for n in names]
    assert (box.dir / ".uidnext").read_text() == "000000000011"
    (box.dir / "new" / "z.x").write_bytes(b"z")  # exactly a pass's worth and one more, later
    assert box.assign() == 12


def test_a_letter_a_mail_client_took_meanwhile_gets_no_uid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    (box.dir / "new" / "b.x").write_bytes(b"b")
    real_first = mailbox._first_names

    def with_a_vanished_letter(folder: Path, count: int) -> list[str]:
        return ["a.x", *real_first(folder, count)]  # a.x: moved by mutt meanwhile

    monkeypatch.setattr(mailbox, "_first_names", with_a_vanished_letter)
    assert box.assign() == 3  # two UIDs were reserved; the one a.x would have had stays unused
    monkeypatch.undo()
    assert _names(box.dir / "cur") == ["000000000001:2,"]
    assert (box.dir / "cur" / "000000000001:2,").read_bytes() == b"b"
    assert box._uidnext() == 3


def test_a_letter_that_vanished_while_numbered_leaves_its_uid_unused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    (box.dir / "new" / "a.x").write_bytes(b"a")
    real_rename = os.rename

    def taken_by_another_client(source: object, target: object) -> None:
        os.unlink(source)  # type: ignore[arg-type]
        real_rename(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", taken_by_another_client)
    assert box.assign() == 2  # reserved before the rename, never given to another letter
    monkeypatch.undo()
    assert (box.dir / ".uidnext").read_text() == "000000000002" and _names(box.dir / "cur") == []


def test_the_counter_is_past_every_uid_before_the_first_letter_takes_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process killed among the renames must leave the counter past every UID it gave: were
    the counter behind, and the letter flagged by a mail client before the next assign (so the
    exact-name probe misses it), its UID would go to a second letter that readers skip."""
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    for name in ("1.x", "2.x", "3.x"):
        (box.dir / "new" / name).write_bytes(name.encode())
    seen: list[str] = []
    real_rename = os.rename

    def record_the_counter(source: object, target: object) -> None:
        seen.append((box.dir / ".uidnext").read_text())
        real_rename(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", record_the_counter)
    assert box.assign() == 4
    monkeypatch.undo()
    assert seen == ["000000000004"] * 3
    # What a kill after the first rename leaves, then a mail client's flag on that letter:
    os.rename(box.dir / "cur" / "000000000001:2,", box.dir / "cur" / "000000000001:2,S")
    for name in ("000000000002:2,", "000000000003:2,"):
        os.rename(box.dir / "cur" / name, box.dir / "new" / name)
    (box.dir / "new" / "4.x").write_bytes(b"4.x")
    assert box.assign() == 7
    uids = sorted(name.split(":")[0] for name in os.listdir(box.dir / "cur"))
    assert uids == sorted(set(uids)) and len(uids) == 4  # no UID given twice


@pytest.mark.parametrize("counter", [None, "", "garbage", "0", "-5"])
def test_without_a_usable_counter_a_flagged_letter_keeps_its_uid(tmp_path: Path, counter: str | None) -> None:
    """No counter (removed) or a torn one: the next UID comes from every name in cur/, flagged
    ones included; a probe from 1 would stop at letter 1 flagged ``S`` and give UID 1 again."""
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    (box.dir / "cur" / "000000000001:2,S").write_bytes(b"one, read in mutt")
    (box.dir / "cur" / "000000000002:2,").write_bytes(b"two")
    (box.dir / "cur" / "000000000003:2,RS").write_bytes(b"three, answered")
    (box.dir / "cur" / "notes.txt").write_bytes(b"not a letter of ours")
    if counter is not None:
        (box.dir / ".uidnext").write_text(counter)
    assert box._uidnext() == 4
    (box.dir / "new" / "n.x").write_bytes(b"four")
    assert box.assign() == 5 and (box.dir / "cur" / "000000000004:2,").read_bytes() == b"four"


def test_a_counter_of_bytes_that_are_no_text_is_no_usable_counter(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    (box.dir / "cur" / "000000000001:2,").write_bytes(b"one")
    (box.dir / ".uidnext").write_bytes(b"\xff\xfe00000000")  # torn by a disk fault: read, not decoded
    assert box._uidnext() == 2


@pytest.mark.parametrize("counter", [None, "", "garbage", "0", "-5", "000000000002"])
def test_the_uid_counter_is_a_cache_never_reused_whatever_it_says(tmp_path: Path, counter: str | None) -> None:
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    (box.dir / "cur" / "000000000001:2,").write_bytes(b"one")
    (box.dir / "cur" / "000000000002:2,").write_bytes(b"two")
    if counter is not None:
        (box.dir / ".uidnext").write_text(counter)
    assert box._uidnext() == 3
    (box.dir / "new" / "n.x").write_bytes(b"three")
    assert box.assign() == 4 and (box.dir / "cur" / "000000000003:2,").read_bytes() == b"three"


def test_a_counter_ahead_of_the_letters_is_kept_and_one_below_one_is_one(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    (box.dir / ".uidnext").write_text("000000000009")
    assert box._uidnext() == 9
    for value in ("0", "-5", "1"):
        (box.dir / ".uidnext").write_text(value)
        assert box._uidnext() == 1


def test_uids_are_assigned_under_the_post_offices_lock(tmp_path: Path) -> None:
    """Every reader of the Maildir (other processes, older releases) takes ``.lock``: while
    another holds it, no letter is numbered."""
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    (box.dir / "new" / "a.x").write_bytes(b"a")
    got: list[int] = []
    with locked(box.dir / ".lock"):
        reader = threading.Thread(target=lambda: got.append(box.assign()))
        reader.start()
        reader.join(0.5)
        assert reader.is_alive() and got == [] and _names(box.dir / "cur") == []
    reader.join()
    assert got == [2] and _names(box.dir / "cur") == ["000000000001:2,"]


def test_read_finds_a_flagged_letter_and_leaves_a_large_one_undownloaded(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    (box.dir / "cur" / "000000000001:2,").write_bytes(b"12345")
    (box.dir / "cur" / "000000000002:2,S").write_bytes(b"seen")  # a mail client flagged it
    one = box.read(1, 5)
    assert one is not None and (one.key, one.raw, one.size) == ("1", b"12345", 5)
    big = box.read(1, 4)
    assert big is not None and (big.key, big.raw, big.size) == ("1", None, 5)
    flagged = box.read(2, 100)
    assert flagged is not None and (flagged.key, flagged.raw) == ("2", b"seen")
    assert box.read(3, 100) is None


# --- the transport ---------------------------------------------------------------------------------


def test_submit_delivers_to_each_known_recipient_and_reports_the_refused(tmp_path: Path) -> None:
    po = tmp_path / "po"
    heard: list[SubmitResult] = []
    results = _transport(po, "alpha").submit(
        [
            _out("k1", "beta@bus.test", "ghost@bus.test", "beta+bob@bus.test"),
            _out("k2", "ghost@bus.test", "nobody@bus.test"),
            _out("k3"),
        ],
        heard.append,
    )
    assert heard == results
    # where the letter now lies durable: each delivery's name in new/, then the sent record's
    beta_new, sent_new = po / "beta" / "new", po / ".sent" / "alpha" / "new"
    assert sorted(results[0].copies[:2]) == [str(beta_new / n) for n in _names(beta_new)]
    assert results[0].copies[2:] == tuple(str(sent_new / n) for n in _names(sent_new))
    assert results[0] == SubmitResult(
        "k1",
        "sent",
        "delivered to the local post office",
        (("ghost@bus.test", "550 no such mailbox on this bus"),),
        copies=results[0].copies,
    )
    assert results[1] == SubmitResult(
        "k2",
        "failed",
        "ghost@bus.test: 550 no such mailbox on this bus; nobody@bus.test: 550 no such mailbox on this bus",
        (("ghost@bus.test", "550 no such mailbox on this bus"), ("nobody@bus.test", "550 no such mailbox on this bus")),
    )
    assert results[2] == SubmitResult("k3", "failed", "no recipients", ())
    # beta and beta+bob share the platform's Maildir: two copies there, none anywhere else
    assert [(po / "beta" / "new" / n).read_bytes() for n in _names(po / "beta" / "new")] == [RAW, RAW]
    assert sorted(os.listdir(po)) == [".sent", "beta"]
    # and one copy of what alpha sent in its sent record (issue 25: one picture per platform)
    assert [(po / ".sent" / "alpha" / "new" / n).read_bytes() for n in _names(po / ".sent" / "alpha" / "new")] == [RAW]
    assert _transport(po, "alpha").submit([]) == []
    assert _transport(po, "alpha").submit([_out("k4", "ghost@bus.test")])[0].status == "failed"  # nobody to tell


def test_a_submit_and_a_quota_count_name_their_files_without_pathlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The send's paths are plain strings (a pathlib join costs more than the syscall it
    names): an opener submitted, its marker written and counted, no PurePath join on the way."""
    import pathlib

    po = tmp_path / "po"
    transport = _transport(po, "alpha")
    opener = b"Message-ID: <1.alpha@bus.test>\r\nX-Agentmail-Type: question\r\n\r\nbody\r\n"
    joins: list[object] = []
    real = pathlib.PurePath.__truediv__
    monkeypatch.setattr(pathlib.PurePath, "__truediv__", lambda self, key: joins.append(key) or real(self, key))
    result = transport.submit([Outgoing("k1", opener, Envelope("alpha@bus.test", ("beta@bus.test",)))])[0]
    counted = transport.opener_keys_since(0)
    assert joins == []
    monkeypatch.undo()
    assert result.status == "sent" and [
        (po / "beta" / "new" / n).read_bytes() for n in _names(po / "beta" / "new")
    ] == [opener]
    hours = _names(po / ".opened" / "alpha")
    assert len(hours) == 1 and oct((po / ".opened" / "alpha" / hours[0]).stat().st_mode & 0o777) == "0o700"
    (marker,) = _names(po / ".opened" / "alpha" / hours[0])
    assert counted == {marker.partition("-")[2]: int(marker.partition("-")[0])}
    assert (po / ".opened" / "alpha" / hours[0] / marker).read_bytes() == b"<1.alpha@bus.test>"


def test_the_markers_hour_folder_is_made_once_and_a_file_in_its_place_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hour folder as ``Path.mkdir(parents=True, exist_ok=True)`` made it: parents made on
    the first marker, kept after; something else in its place refused (FileExistsError)."""
    halfway = (time.time() // 3600 + 0.5) * 3600  # one hour folder, whenever the test runs
    monkeypatch.setattr(ages, "clock", lambda: halfway)
    po = tmp_path / "po"
    transport = _transport(po, "alpha")

    def opener(n: int) -> Outgoing:
        raw = f"Message-ID: <{n}.alpha@bus.test>\r\nX-Agentmail-Type: question\r\n\r\nbody\r\n".encode()
        return Outgoing(f"k{n}", raw, Envelope("alpha@bus.test", ("beta@bus.test",)))

    assert [r.status for r in transport.submit([opener(1), opener(2)])] == ["sent", "sent"]
    (hour,) = _names(po / ".opened" / "alpha")
    assert len(_names(po / ".opened" / "alpha" / hour)) == 2
    (po / ".opened" / "alpha" / hour).rename(po / "aside")
    (po / ".opened" / "alpha" / hour).write_bytes(b"")
    with pytest.raises(FileExistsError):
        transport.submit([opener(3)])


def test_fetch_reads_from_the_checkpoint_in_batches_and_skips_missing_uids(tmp_path: Path) -> None:
    po = tmp_path / "po"
    for n in range(BATCH + 3):
        deliver(po / "beta", f"letter {n:03d}".encode())
    beta = _transport(po)
    batches = list(beta.fetch(None, 1000))
    assert [len(b) for b in batches] == [BATCH, 3]
    assert [i.key for b in batches for i in b] == [str(u) for u in range(1, BATCH + 4)]
    # the letters in delivery order (names start with the delivery time)
    assert [i.raw for b in batches for i in b][:2] == [b"letter 000", b"letter 001"]
    validity = beta.mailbox.uidvalidity
    assert beta.advance(None, batches[0]) == f"{validity}:{BATCH}"
    assert beta.advance(f"{validity}:60", batches[0]) == f"{validity}:60"  # never backwards
    assert beta.advance("other:7", batches[1]) == f"{validity}:{BATCH + 3}"
    (beta.mailbox.dir / "cur" / f"{BATCH + 2:012d}:2,").unlink()  # expunged by a mail client
    rest = list(beta.fetch(f"{validity}:{BATCH}", 1000))
    assert [[i.key for i in b] for b in rest] == [[str(BATCH + 1), str(BATCH + 3)]]
    assert list(beta.fetch(f"{validity}:{BATCH + 3}", 1000)) == []
    # a checkpoint of another UIDVALIDITY (a rebuilt post office) reads everything again
    again = list(beta.fetch(f"not-{validity}:{BATCH + 3}", 1000))
    assert sum(len(b) for b in again) == BATCH + 2


def test_fetch_of_exactly_one_batch_yields_no_empty_one(tmp_path: Path) -> None:
    po = tmp_path / "po"
    for n in range(BATCH):
        deliver(po / "beta", f"{n}".encode())
    assert [len(b) for b in _transport(po).fetch(None, 1000)] == [BATCH]


def test_pending_says_whether_anything_is_past_the_checkpoint(tmp_path: Path) -> None:
    po = tmp_path / "po"
    beta = _transport(po)
    beta.mailbox.ensure()
    validity = beta.mailbox.uidvalidity
    assert beta.pending(f"{validity}:0") is False
    assert beta.pending(None) is True  # no checkpoint of this mailbox yet
    assert beta.pending("other:0") is True
    deliver(po / "beta", RAW)
    assert beta.pending(f"{validity}:0") is True  # waiting in new/
    assert beta.mailbox.assign() == 2
    assert beta.pending(f"{validity}:0") is True  # assigned, not yet committed
    assert beta.pending(f"{validity}:1") is False
    assert beta.pending(f"{validity}:5") is False


def _read_all(beta: LocalTransport, checkpoint: str | None) -> tuple[str | None, list[str]]:
    """What a sync does with the transport: every batch committed, then the closing advance."""
    keys: list[str] = []
    for batch in beta.fetch(checkpoint, 1 << 20):
        keys += [item.key for item in batch]
        checkpoint = beta.advance(checkpoint, batch)
    return beta.advance(checkpoint, []), keys


@settings(max_examples=examples(60), deadline=None)
@given(validity=st.one_of(st.none(), st.binary(max_size=24)), counter=st.one_of(st.none(), st.binary(max_size=24)))
@example(validity=b"1", counter=b"0" * 13)  # a counter longer than its width: "…05" written over it read 50
def test_damaged_counter_files_stop_no_reader_and_lose_no_letter(validity: bytes | None, counter: bytes | None) -> None:
    """.uidvalidity and .uidnext removed or holding any bytes (a torn write, a stray edit): the
    next look and fetch work, no letter is skipped, and no UID is given twice."""
    with tempfile.TemporaryDirectory() as folder:
        po = Path(folder) / "po"
        deliver(po / "beta", b"before 1")
        deliver(po / "beta", b"before 2")
        beta = _transport(po)
        checkpoint, _ = _read_all(beta, None)
        for name, value in ((".uidvalidity", validity), (".uidnext", counter)):
            path = beta.mailbox.dir / name
            path.unlink() if value is None else path.write_bytes(value)
        deliver(po / "beta", b"after 1")
        deliver(po / "beta", b"after 2")
        reader = _transport(po)  # a new process: nothing remembered of the files as they were
        assert reader.pending(checkpoint)
        moved, keys = _read_all(reader, checkpoint)
        cur = reader.mailbox.dir / "cur"
        read = [(cur / f"{int(key):012d}:2,").read_bytes() for key in keys]
        assert read[-2:] == [b"after 1", b"after 2"] and len(set(keys)) == len(keys)  # renumbered: all again
        uids = sorted(int(name.partition(":")[0]) for name in os.listdir(cur))
        assert len(uids) == len(set(uids)) == 4  # no UID given twice (a gap is allowed)
        assert reader.mailbox.uidvalidity.isdigit() and moved == f"{reader.mailbox.uidvalidity}:{uids[-1]}"
        assert not reader.pending(moved)


def test_a_uidvalidity_that_cannot_be_written_again_is_a_machine_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    (box.dir / ".uidvalidity").write_bytes(b"torn\xff")
    monkeypatch.setattr(Mailbox, "_number", lambda self, replace: None)  # the write does not land
    with pytest.raises(OSError, match="damaged and could not be written again"):
        assert box.uidvalidity


@pytest.mark.parametrize("gone", ["the newest", "all of them"])
def test_letters_deleted_from_cur_before_they_were_read_are_not_pending_forever(tmp_path: Path, gone: str) -> None:
    """A mail client deleting letters in cur/ that no reader had read leaves UIDs no file holds:
    the checkpoint passes them at the close of the fetch, or wait() would find them pending
    (and wake at once) until the next letter came."""
    po = tmp_path / "po"
    beta = _transport(po)
    checkpoint, _ = _read_all(beta, None)
    for _ in range(3):
        deliver(po / "beta", RAW)
    assert beta.mailbox.assign() == 4
    doomed = ["000000000003:2,"] if gone == "the newest" else _names(po / "beta" / "cur")
    for name in doomed:
        (po / "beta" / "cur" / name).unlink()
    assert beta.pending(checkpoint)
    checkpoint, keys = _read_all(beta, checkpoint)
    assert keys == (["1", "2"] if gone == "the newest" else [])
    assert checkpoint is not None and checkpoint.endswith(":3") and not beta.pending(checkpoint)
    assert beta.wait(checkpoint, 0) is None
    deliver(po / "beta", RAW)  # the next letter gets a new UID and is read
    assert beta.pending(checkpoint) and _read_all(beta, checkpoint)[1] == ["4"]


def test_a_uid_a_vanished_letter_left_unused_is_passed_and_never_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    po = tmp_path / "po"
    beta = _transport(po)
    deliver(po / "beta", RAW)
    deliver(po / "beta", RAW)
    real_rename = os.rename
    taken: list[str] = []

    def the_second_taken_by_a_mail_client(source: object, target: object) -> None:
        if str(source).split("/")[-2] == "new" and taken == [] and _names(po / "beta" / "cur"):
            taken.append(str(source))
            os.unlink(source)  # type: ignore[arg-type]
        real_rename(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", the_second_taken_by_a_mail_client)
    checkpoint, keys = _read_all(beta, None)
    monkeypatch.undo()
    assert taken and keys == ["1"] and checkpoint is not None and checkpoint.endswith(":2")
    assert not beta.pending(checkpoint)
    deliver(po / "beta", RAW)
    assert _read_all(beta, checkpoint)[1] == ["3"]


def test_a_reader_never_passes_a_uid_another_reader_reserved_but_has_not_given_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two agents of one platform read one Maildir. Reader B reserves UID 2 (the counter says 3)
    for a letter still in new/; reader A, looking in between, must not pass UID 2 as "no file":
    A reads the counter before it looks at new/, so it sees the letter waiting and numbers it
    under the lock itself. (Looking at new/ first, A saw it empty, then read B's counter, found
    no UID 2, passed it, and B's letter landed under a UID behind A's checkpoint: lost to A.)"""
    po = tmp_path / "po"
    a = _transport(po)
    deliver(po / "beta", RAW)
    checkpoint, first = _read_all(a, None)
    assert first == ["1"]
    maildir = po / "beta"
    real_uidnext = Mailbox._uidnext
    interleaved: list[str] = []

    def reader_b_reserves_meanwhile(box: Mailbox) -> int:
        if not interleaved:
            interleaved.append(deliver(maildir, RAW))  # the letter lands in new/...
            (maildir / ".uidnext").write_text("000000000003")  # ...and B reserves UID 2 for it
        return real_uidnext(box)

    monkeypatch.setattr(Mailbox, "_uidnext", reader_b_reserves_meanwhile)
    checkpoint, keys = _read_all(a, checkpoint)
    monkeypatch.undo()
    (name,) = interleaved
    if (maildir / "new" / name).exists():  # B goes on: the letter takes the UID it reserved
        os.rename(maildir / "new" / name, maildir / "cur" / "000000000002:2,")
    keys += _read_all(a, checkpoint)[1]
    assert len(keys) == 1  # B's letter, read by A exactly once


def test_a_fetch_that_did_not_finish_passes_no_unread_uid(tmp_path: Path) -> None:
    """Only a fetch read to its end lets the close pass UIDs: one cut short (an error while
    filing) leaves the checkpoint where its last committed batch put it."""
    po = tmp_path / "po"
    beta = _transport(po)
    for _ in range(BATCH + 3):
        deliver(po / "beta", RAW)
    batches = beta.fetch(None, 1 << 20)
    first = next(batches)
    checkpoint = beta.advance(None, first)
    assert checkpoint is not None and checkpoint.endswith(f":{BATCH}")
    assert beta.advance(checkpoint, []) == checkpoint and beta.pending(checkpoint)


@pytest.mark.parametrize("with_inotify", [True, False])
def test_wait_returns_at_once_when_something_is_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_inotify: bool
) -> None:
    po = tmp_path / "po"
    beta = _transport(po)
    deliver(po / "beta", RAW)
    if not with_inotify:
        monkeypatch.setattr(inotify, "watch", lambda path: None)  # a system without inotify: polling
    elif inotify.watch(po / "beta" / "new") is None:
        pytest.skip("no inotify here")
    assert beta.wait(None, 600) == ("inotify" if with_inotify else "poll")


def test_wait_with_nothing_pending_times_out_with_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    beta = _transport(tmp_path / "po")
    beta.mailbox.ensure()
    checkpoint = f"{beta.mailbox.uidvalidity}:0"
    assert beta.wait(checkpoint, 0) is None
    assert beta.wait(checkpoint, 0.2) is None
    monkeypatch.setattr(inotify, "watch", lambda path: None)
    assert beta.wait(checkpoint, 0.2) is None


def _after_the_first_look(beta: LocalTransport, monkeypatch: pytest.MonkeyPatch, arrive: Callable[[], object]) -> None:
    """``arrive`` runs right after the wait's first look found nothing: news during the wait."""
    real_pending = beta.pending
    looks = [0]

    def pending(value: str | None) -> bool:
        found = real_pending(value)
        looks[0] += 1
        if looks[0] == 1:
            arrive()
        return found

    monkeypatch.setattr(beta, "pending", pending)


@pytest.mark.parametrize("with_inotify", [True, False])
def test_wait_wakes_on_a_delivery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_inotify: bool) -> None:
    po = tmp_path / "po"
    beta = _transport(po)
    beta.mailbox.ensure()
    if not with_inotify:
        monkeypatch.setattr(inotify, "watch", lambda path: None)
    elif inotify.watch(po / "beta" / "new") is None:
        pytest.skip("no inotify here")
    _after_the_first_look(beta, monkeypatch, lambda: deliver(po / "beta", RAW))
    assert beta.wait(f"{beta.mailbox.uidvalidity}:0", 600) == ("inotify" if with_inotify else "poll")
    assert len(os.listdir(po / "beta" / "new")) == 1


def test_wait_looks_again_for_news_no_event_announced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A letter numbered by another reader lands in cur/, not new/: no inotify event; the wait's
    recheck (every RECHECK seconds) still finds it."""
    po = tmp_path / "po"
    beta = _transport(po)
    beta.mailbox.ensure()
    if inotify.watch(po / "beta" / "new") is None:
        pytest.skip("no inotify here")
    _after_the_first_look(beta, monkeypatch, lambda: (beta.mailbox.dir / "cur" / "000000000001:2,").write_bytes(RAW))
    assert beta.wait(f"{beta.mailbox.uidvalidity}:0", 600) == "inotify"


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[inotify.Watch]:
    """Every inotify watch the transport makes, in order (to see which are open, and when)."""
    watches: list[inotify.Watch] = []
    real_watch = inotify.watch

    def watch(path: Path) -> inotify.Watch | None:
        found = real_watch(path)
        if found is not None:
            watches.append(found)
        return found

    monkeypatch.setattr(inotify, "watch", watch)
    return watches


def test_the_waits_share_one_watch_that_close_closes(tmp_path: Path, made: list[inotify.Watch]) -> None:
    """Closing an inotify instance waits for the kernel to retire it (~12 ms here): kept open
    from one wait to the next, it is closed by ``close``, never between a wake and its letter."""
    beta = _transport(tmp_path / "po")
    beta.mailbox.ensure()
    beta.wait(f"{beta.mailbox.uidvalidity}:0", 0)
    deliver(beta.mailbox.dir, RAW)
    assert beta.wait(None, 0) == "inotify"
    if not made:
        pytest.skip("no inotify here")
    assert len(made) == 1 and made[0].fd >= 0
    new = beta.mailbox.dir / "new"  # a person rebuilt the Maildir: the old watch sees nothing
    new.rename(tmp_path / "old-new")
    new.mkdir()
    assert beta.wait(f"{beta.mailbox.uidvalidity}:0", 0) is None
    assert len(made) == 2 and made[0].fd == -1 and made[1].fd >= 0
    beta.close()
    assert [w.fd for w in made] == [-1, -1]


def test_a_wait_is_not_woken_by_events_from_before_it(tmp_path: Path) -> None:
    """The kept watch holds events from between two waits (the letter the first one woke for,
    already read): the next wait drains them and looks, so it waits for a new letter."""
    beta = _transport(tmp_path / "po")
    beta.mailbox.ensure()
    assert beta.wait(f"{beta.mailbox.uidvalidity}:0", 0) is None
    if beta._watch is None:
        pytest.skip("no inotify here")
    deliver(beta.mailbox.dir, RAW)
    uidnext = beta.mailbox.assign()  # read by this mailbox: nothing is pending any more
    assert beta.wait(f"{beta.mailbox.uidvalidity}:{uidnext - 1}", 0.05) is None
    beta.close()


def test_two_threads_wait_on_one_transport(tmp_path: Path, made: list[inotify.Watch]) -> None:
    """The kept watch serves one waiting thread; a second one waits on a watch of its own, closed
    when its wait ends. Both wake for the letter."""
    probe = inotify.watch(tmp_path)
    if probe is None:
        pytest.skip("no inotify here")
    probe.close()
    made.clear()  # the probe is not the transport's
    beta = _transport(tmp_path / "po")
    beta.mailbox.ensure()
    start = f"{beta.mailbox.uidvalidity}:0"
    woke: list[str | None] = []
    first = threading.Thread(target=lambda: woke.append(beta.wait(start, 600)))
    first.start()
    assert eventually(lambda: beta._watch is not None)
    second = threading.Thread(target=lambda: woke.append(beta.wait(start, 600)))
    second.start()
    assert eventually(lambda: len(made) == 2)
    deliver(beta.mailbox.dir, RAW)
    first.join()
    second.join()
    assert woke == ["inotify", "inotify"]
    assert made[0].fd >= 0 and made[1].fd == -1  # the kept one, and the second thread's own
    beta.close()
