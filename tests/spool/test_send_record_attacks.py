"""Attacks on the sender's record of a delivered letter (issue 37, session 8): a sent letter's
spool name a power cut took is copied back from the post office (``SpoolReader.restore``); a
co-tenant or recipient who can write there tries to make that cost unbounded work, to have other
bytes taken back, or (a mistaken operator) to have another mailbox's letters restored here."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.spool import Spool, ledger, views
from agentmail.transport import claim_marks

from ..conftest import OPENER, Cli
from .test_rebuild_restores import _client, _lose_and_rebuild
from .test_send_power_cut import cut, drop_sent_record, durable_only, sent_then_cut

__all__ = ["durable_only"]  # the fixture, used by name


def _lost_in_the_post_office(home: Path) -> Path:
    """beta's copy deleted (its own Maildir: a mail client's expunge); its cur/, made."""
    for path in (home / "postoffice" / "beta" / "new").iterdir():
        path.unlink()
    cur = home / "postoffice" / "beta" / "cur"
    cur.mkdir(exist_ok=True)
    return cur


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads = [0]
    real = views.read_plain

    def read_plain(path: str | Path, limit: int | None = None) -> tuple[bytes | None, os.stat_result]:
        reads[0] += 1
        return real(path, limit)

    monkeypatch.setattr(views, "read_plain", read_plain)
    return reads


def test_a_cur_full_of_decoys_of_the_letters_size_costs_a_bounded_number_of_reads(
    alpha: AgentMail, home: Path, durable_only: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A co-tenant fills beta's cur/ with files of the very size of alpha's letter (it held the
    letter: it knows the size), other bytes: every read of the lost letter would read them all."""
    letter, raw, restarted = sent_then_cut(alpha, home)
    cur = _lost_in_the_post_office(home)
    decoy = raw.replace(b"Quota", b"Quote")
    for n in range(3 * views.CUR_READS):
        (cur / f"{n:012d}:2,").write_bytes(decoy)
    reads = _counting(monkeypatch)
    with pytest.raises(OSError):  # lost, as a letter file deleted by hand
        restarted.raw(letter.id)
    assert 0 < reads[0] <= views.CUR_READS + 4, reads  # + the noted names (new/, the sent record)


def test_the_letter_among_fewer_decoys_than_the_bound_is_still_found(
    alpha: AgentMail, home: Path, durable_only: None
) -> None:
    letter, raw, restarted = sent_then_cut(alpha, home)
    cur = _lost_in_the_post_office(home)
    for n in range(views.CUR_READS - 1):  # newer names, read first
        (cur / f"{n + 10:012d}:2,S").write_bytes(raw.replace(b"Quota", b"Quote"))
    (cur / f"{1:012d}:2,S").write_bytes(raw)  # the recipient's reader renamed it, then flagged it
    assert restarted.raw(letter.id) == raw


def test_a_symlinked_cur_folder_gives_nothing_but_the_very_bytes(
    alpha: AgentMail, home: Path, durable_only: None
) -> None:
    """beta's cur/ replaced by a symbolic link to a folder of the co-tenant's, holding a file of
    the letter's size with a secret in it, and a hard link to a secret where the letter was."""
    letter, raw, restarted = sent_then_cut(alpha, home)
    (name,) = os.listdir(home / "postoffice" / "beta" / "new")
    cur = _lost_in_the_post_office(home)
    cur.rmdir()
    theirs = home / "theirs"
    theirs.mkdir()
    secret = home / "secret.txt"
    secret.write_bytes(b"S" * len(raw))
    os.link(secret, theirs / "000000000001:2,")
    os.link(secret, home / "postoffice" / "beta" / "new" / name)
    cur.symlink_to(theirs)
    with pytest.raises(OSError):
        restarted.raw(letter.id)
    assert list((restarted.spool.root / "tmp").glob("*.eml")) == []
    assert restarted.flush() == []


def test_a_file_swapped_between_its_read_and_the_restore_is_never_what_is_kept(
    alpha: AgentMail, home: Path, durable_only: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is swapped for other bytes of the same size right after it was read: what is
    kept is the bytes read and checked, never read again from the name."""
    letter, raw, restarted = sent_then_cut(alpha, home)
    (path,) = (home / "postoffice" / "beta" / "new").iterdir()
    real = views.read_plain

    def read_then_swap(at: str | Path, limit: int | None = None) -> tuple[bytes | None, os.stat_result]:
        got = real(at, limit)
        Path(at).unlink()
        Path(at).write_bytes(raw.replace(b"Quota", b"Quote"))
        return got

    monkeypatch.setattr(views, "read_plain", read_then_swap)
    assert restarted.raw(letter.id) == raw
    assert path.read_bytes() != raw  # the swap happened


def test_a_siblings_ledger_copied_in_restores_none_of_its_sent_letters(registry: Registry, home: Path) -> None:
    """A mistaken operator appends the ledger of alpha's second agent to alpha's own: every
    letter it says was sent is a letter of this platform, its bytes in the post office. A rebuild
    must not file them here as sent by this mailbox (they are the sibling's, seen here as such)."""
    alpha, two = _client(home, "alpha"), _client(home, "alpha", "two")
    mine = alpha.send("beta", "Quota 500s", OPENER)
    theirs = two.send("beta", "Invoices doubled", OPENER)
    alpha.sync()
    before = sorted(alpha.spool.read.ids("sent"))
    assert before == [mine.id]
    root = alpha.spool.root
    (root / ledger.FILE).write_bytes((root / ledger.FILE).read_bytes() + (two.spool.root / ledger.FILE).read_bytes())
    _lose_and_rebuild([alpha], [root])
    alpha = _client(home, "alpha")
    assert sorted(alpha.spool.read.ids("sent")) == before
    assert theirs.id not in os.listdir(root / "letters") + os.listdir(root / "tmp")


def test_a_reply_whose_answered_mark_a_cut_took_is_never_answered_again_by_another_machine(
    registry: Registry, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Machine A replies; the power goes. What A flushed survives: the claim, the delivery, the
    durable commit recording the reply sent. The claim's ``.sent`` mark and the post office's
    sent record were never flushed: the cut takes them. Machine B, past the time a dead home's
    claim is taken over, must not answer the letter a second time."""
    from agentmail.config import registry as registry_mod
    from agentmail.config.identity import Identity
    from agentmail.transport import local, open_transport
    from agentmail.transport.claim_marks import STALE_AFTER

    from ..client.test_many_machines import _second_home

    with AgentMail(registry, Identity("alpha"), home) as alpha:
        mid = alpha.send("beta", "Quota", OPENER).message_id
    other = _second_home(home, tmp_path, "machine2", share_postoffice=True)
    transport = open_transport(registry_mod.load(other / "registry"), "beta", other)
    assert isinstance(transport, local.LocalTransport)
    later = [time.time()]
    transport.claims.now = lambda: later[0]
    b = AgentMail(registry_mod.load(other / "registry"), Identity("beta", "ci"), other, transport=transport)
    (letter,) = b.inbox()  # B has the letter too, before A answers it
    made: list[tuple[str, int]] = []  # (a mark's path, when), and when each folder was last flushed
    flushed: dict[str, int] = {}
    clock = iter(range(1 << 30))
    real_write, real_flush = claim_marks.write_new, claim_marks.fsync_dir

    def write_new(path: str | Path, data: bytes, **kwargs: object) -> None:
        real_write(path, data, **kwargs)  # type: ignore[arg-type]
        made.append((str(path), next(clock)))

    def fsync_dir(path: str | Path) -> None:
        real_flush(path)
        flushed[str(path)] = next(clock)

    monkeypatch.setattr(claim_marks, "write_new", write_new)
    monkeypatch.setattr(claim_marks, "fsync_dir", fsync_dir)
    with AgentMail(registry_mod.load(home / "registry"), Identity("beta", "laptop"), home) as a:
        (mine,) = a.inbox()
        assert a.reply(mine, "Reproduced.", type="ack") is not None
    monkeypatch.undo()
    marks = [(Path(p), at) for p, at in made if p.endswith(".sent")]
    assert marks, "no answered mark: the test tests nothing"
    for path, at in marks:
        if flushed.get(str(path.parent), -1) < at:
            path.unlink()  # its name never flushed: the cut takes it
    for path in (home / "postoffice" / ".sent" / "beta").glob("*/*"):
        path.unlink()  # the sent record is never flushed
    later[0] = time.time() + STALE_AFTER + 5
    with b:
        assert b.reply(letter, "Mine now.", type="ack") is None, "answered twice"
    replies = [p for d in ("new", "cur") for p in (home / "postoffice" / "alpha" / d).glob("*")]
    assert sum(f"In-Reply-To: {mid}".encode() in p.read_bytes() for p in replies) == 1


def test_a_recipients_edit_in_place_of_the_shared_file_is_never_listed_as_what_was_sent(
    registry: Registry, home: Path
) -> None:
    """On the local post office a sent letter's spool file is the recipient's file (one inode).
    beta edits it in place in its own cur/: alpha's show, authentication and archive flag it and
    save/apply refuse it; a rebuild must not file the edited bytes as alpha's sent letter."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    beta.inbox()  # beta's reader renamed it into cur/: beta's own Maildir, its file to flag or edit
    (path,) = (home / "postoffice" / "beta" / "cur").iterdir()
    data = path.read_bytes()
    with open(path, "r+b") as fh:  # in place: no new file, no rename
        fh.write(data.replace(b"returns 500", b"returns 200"))
    assert alpha.raw(letter.id) != data  # the sender's own record changed with it
    _lose_and_rebuild([alpha], [alpha.spool.root])
    alpha = _client(home, "alpha")
    # Its bytes are gone everywhere (one inode): what the file holds now is no letter alpha sent.
    assert alpha.sent() == []
    (held,) = alpha.quarantined(sync=False)
    assert held.id == letter.id and held.reason == "unauthenticated"  # shown for what it is: unverified


def _torn(path: Path) -> None:
    """What a power cut leaves of a file written without a flush whose name a later flush of
    anything else made durable (ext4 commits every name of the running transaction, not the
    data of a file written since): the name, no bytes."""
    with open(path, "r+b") as fh:
        fh.truncate(0)


def test_a_restored_copy_a_second_cut_left_empty_is_restored_again(
    alpha: AgentMail, home: Path, durable_only: None
) -> None:
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    raw = alpha.raw(letter.id)
    restarted = cut(alpha)
    assert restarted.raw(letter.id) == raw  # restored, unflushed, into tmp/
    _torn(restarted.spool.read.path("sent", letter.id))
    assert restarted.raw(letter.id) == raw
    assert restarted.show(letter.id).message_id == letter.message_id


def test_a_received_letters_copy_a_cut_left_empty_is_restored_again(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    """The sync files a letter as an unflushed copy of the post-office file (DESIGN §7): a cut
    after a later flush keeps its name, not its bytes."""
    alpha.send("beta", "Quota endpoint returns 500", OPENER)
    (letter,) = beta.inbox()
    raw = beta.raw(letter.id)
    _torn(beta.spool.read.path("unread", letter.id))
    assert beta.raw(letter.id) == raw
    assert "changed" not in beta.authentication(beta.show(letter.id))


def test_a_reader_never_sees_a_copy_half_restored(
    alpha: AgentMail, home: Path, durable_only: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two readers of one lost letter at once (a CLI and the MCP server): the second reads while
    the first is writing the copy back. It gets the whole letter, or restores it itself."""
    from agentmail import _fs

    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    raw = alpha.raw(letter.id)
    restarted = cut(alpha)
    other = AgentMail(restarted.registry, Identity("alpha"), home)
    real = _fs.write_all
    seen: list[bytes] = []
    paused = [False]

    def write_all(fd: int, data: bytes) -> None:
        if data != raw or paused[0]:
            return real(fd, data)
        paused[0] = True  # the other reader's own copy, if it makes one, is written whole
        real(fd, data[: len(data) // 2])
        try:
            seen.append(other.raw(letter.id))  # meanwhile
        except OSError:
            seen.append(b"lost")
        return real(fd, data[len(data) // 2 :])

    monkeypatch.setattr(_fs, "write_all", write_all)
    assert restarted.raw(letter.id) == raw
    assert seen in ([raw], [b"lost"]), len(seen[0])


@pytest.mark.parametrize("folder", ["letters", "tmp"])
def test_an_empty_copy_with_nothing_to_restore_it_from_is_shown_as_changed(
    alpha: AgentMail, beta: AgentMail, home: Path, folder: str
) -> None:
    """The post office's file is gone too (a person's mail client expunged it): the empty file
    is what there is, read as it is and flagged, never taken for the letter."""
    alpha.send("beta", "Quota endpoint returns 500", OPENER)
    (letter,) = beta.inbox()
    path = beta.spool.read.path("unread", letter.id)
    _torn(path)
    path.rename(beta.spool.root / folder / path.name)
    for sub in ("new", "cur"):
        for lost in (home / "postoffice" / "beta" / sub).iterdir():
            lost.unlink()
    assert beta.raw(letter.id) == b""
    assert "its file changed after it was filed" in beta.authentication(beta.show(letter.id))


def test_over_mcp_a_lost_sent_letter_shows_only_its_own_bytes(
    alpha: AgentMail, home: Path, durable_only: None, tmp_path: Path
) -> None:
    """An agent steered by a letter asks the MCP server for a lost letter while the post office
    holds a same-size decoy first in beta's cur/ (the caches gone too): it is shown as sent, restored from the one
    file with its bytes, the decoy's words nowhere."""
    from ..cli.test_mcp import call, session

    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    raw = alpha.raw(letter.id)
    restarted = cut(alpha)
    restarted.spool.drop_caches()  # the show parses the file again: its read restores it
    restarted.close()
    drop_sent_record(home)
    (path,) = (home / "postoffice" / "beta" / "new").iterdir()
    cur = home / "postoffice" / "beta" / "cur"
    cur.mkdir(exist_ok=True)
    path.rename(cur / "000000000001:2,S")
    (cur / "000000000009:2,").write_bytes(raw.replace(b"Quota endpoint returns 500", b"Quota endpoint is all fine"))
    shown: list[Any] = []

    async def scenario(client: Any) -> None:
        shown.append(await call(client, "show", id=letter.id))

    session(home, tmp_path, "--as", "alpha")(scenario)
    ((failed, full),) = shown
    assert not failed and full["state"] == "sent" and "all fine" not in json.dumps(full)
    assert (restarted.spool.root / "tmp" / f"{letter.id}.eml").exists()  # restored by the server's read
    assert Spool(restarted.spool.root).read.raw(letter.id) == raw


def test_rebuild_restores_a_sent_letter_whose_restored_copy_a_second_cut_left_empty(
    alpha: AgentMail, home: Path, durable_only: None, cli: Cli
) -> None:
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    raw = alpha.raw(letter.id)
    restarted = cut(alpha)
    assert restarted.raw(letter.id) == raw  # restored, unflushed
    _torn(restarted.spool.read.path("sent", letter.id))
    restarted.close()
    restarted.spool.db.close()
    for name in ("spool.db-wal", "spool.db-shm"):
        (restarted.spool.root / name).unlink(missing_ok=True)
    (restarted.spool.root / "spool.db").write_bytes(b"not a database " * 300)
    code, out, err = cli("--as", "alpha", "rebuild")
    assert code == 0 and "1 sent" in out, (out, err)
    spool = Spool(restarted.spool.root)
    assert spool.read.locate(letter.id) == "sent" and spool.read.raw(letter.id) == raw


def test_rebuild_with_a_received_letters_copy_left_empty_files_it_once_and_no_junk(
    registry: Registry, home: Path
) -> None:
    """beta's copy of a letter a cut left empty, then spool.db lost: the rebuild and the next
    sync (which reads the post office from the start) file the letter once, unread, and nothing
    in quarantine for the empty file."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota endpoint returns 500", OPENER)
    (letter,) = beta.inbox()
    _torn(beta.spool.read.path("unread", letter.id))
    _lose_and_rebuild([beta], [beta.spool.root])
    beta = _client(home, "beta")
    assert [x.message_id for x in beta.inbox()] == [letter.message_id]
    assert beta.quarantined(sync=False) == []


def test_decoys_in_one_recipients_cur_never_hide_the_sent_records_copy(
    alpha: AgentMail, home: Path, durable_only: None
) -> None:
    """The bound is per Maildir searched: a recipient filling its own cur/ with decoys (and
    deleting its copy) hides only its own copy, never the post office's sent record, which the
    platform's sync renamed into ``.sent/alpha/cur/``."""
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    raw = alpha.raw(letter.id)
    alpha.sync()  # the sent record read: renamed from new/ into cur/ under a UID
    assert os.listdir(home / "postoffice" / ".sent" / "alpha" / "new") == []
    restarted = cut(alpha)
    cur = _lost_in_the_post_office(home)
    for n in range(3 * views.CUR_READS):
        (cur / f"{n + 10:012d}:2,").write_bytes(raw.replace(b"Quota", b"Quote"))
    assert restarted.raw(letter.id) == raw


def test_decoys_named_after_the_letters_file_cost_a_bounded_number_of_reads(
    alpha: AgentMail, home: Path, durable_only: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The noted name with flags a mail client added (``NAME*``) is looked for too: a co-tenant
    that saw the name in beta's new/ plants hundreds of ``NAME<anything>`` files."""
    letter, raw, restarted = sent_then_cut(alpha, home)
    (path,) = (home / "postoffice" / "beta" / "new").iterdir()
    path.unlink()
    for n in range(3 * views.CUR_READS):
        path.with_name(f"{path.name}:2,{n:04d}").write_bytes(raw.replace(b"Quota", b"Quote"))
    reads = _counting(monkeypatch)
    with pytest.raises(OSError):
        restarted.raw(letter.id)
    assert 0 < reads[0] <= 2 * views.CUR_READS + 2, reads
