"""A sent letter's name in the sender's spool is not flushed (issue 40): what a power cut may take.

On the local post office the sender's spool file of a delivered letter is a hard link of the
recipient's copy, whose inode and name the delivery flushed; the FULL commit that records it
sent notes those post-office names. The spool's own name (tmp/, then letters/) is never flushed,
so a power cut may take it while the row survives. The double keeps, of the spool database, only
what durable commits made durable (``durable_only``), and takes every spool file whose row notes
a post-office copy (never flushed); the post office keeps what its writers flushed. Each case
checks the letter is found again, byte for byte, from the post office, and is never sent twice;
and that nothing but the very bytes, read as a plain file, is ever taken back."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.model import Letter
from agentmail.spool import Spool

from ..conftest import OPENER, Cli
from ..depth import examples, suppressed
from .test_filing_power_cut import SAVED, durable_only
from .test_receive_durability import power_cut as drop_unflushed_copies

__all__ = ["durable_only"]  # the fixture, used by name


def cut(client: AgentMail, name: str = "alpha") -> AgentMail:
    """The power goes: ``client``'s spool keeps its durable commits only, the spool's names of
    what it sent are gone, and so is the post office's unflushed sent record; a new client starts."""
    root = client.spool.root
    taken = drop_unflushed_copies(root)
    client.close()
    client.spool.db.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{client.spool.db.path}{suffix}").unlink(missing_ok=True)
    for db_name in ("spool.db", "spool.db-wal"):
        if (root / SAVED / db_name).exists():
            shutil.copyfile(root / SAVED / db_name, root / db_name)
    assert taken, "the double took no spool file: it tests nothing"
    return AgentMail(client.registry, Identity(name), client.home)


def sent_record(home: Path) -> Path:
    return home / "postoffice" / ".sent" / "alpha"


def drop_sent_record(home: Path) -> None:
    """The post office's sent record is not flushed either: the worst cut takes it too."""
    for sub in ("new", "cur"):
        for path in (sent_record(home) / sub).iterdir():
            path.unlink()


def sent_then_cut(alpha: AgentMail, home: Path) -> tuple[Letter, bytes, AgentMail]:
    """alpha's letter to beta, its bytes, and alpha after the worst cut: the spool's name and the
    post office's sent record gone, the durable row and beta's copy kept."""
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    raw = alpha.raw(letter.id)
    restarted = cut(alpha)
    drop_sent_record(home)
    return letter, raw, restarted


def test_a_sent_letter_whose_spool_name_a_cut_took_shows_threads_and_never_goes_twice(
    alpha: AgentMail, home: Path, durable_only: None
) -> None:
    letter, raw, restarted = sent_then_cut(alpha, home)
    assert not (restarted.spool.root / "letters" / f"{letter.id}.eml").exists()
    assert restarted.spool.read.locate(letter.id) == "sent", "the row did not survive: the send was not durable"

    assert restarted.raw(letter.id) == raw  # copied back from beta's new/
    assert restarted.show(letter.id).message_id == letter.message_id
    assert [x.id for x in restarted.thread(letter.thread)] == [letter.id]
    assert restarted.flush() == [], "a delivered letter was submitted again"
    assert len(os.listdir(home / "postoffice" / "beta" / "new")) == 1
    # the copy is a file of the spool's own, never the post office's inode
    restored = restarted.spool.read.path("sent", letter.id)
    assert not os.path.samefile(restored, next((home / "postoffice" / "beta" / "new").iterdir()))


def test_a_sent_letter_its_recipient_already_read_is_found_in_cur(
    alpha: AgentMail, beta: AgentMail, home: Path, durable_only: None
) -> None:
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    raw = alpha.raw(letter.id)
    alpha.send("beta", "A second report, other bytes", OPENER)  # another file of cur/ to pass over
    assert len(beta.inbox()) == 2  # beta's reader renamed both from new/ into cur/ under UIDs
    assert os.listdir(home / "postoffice" / "beta" / "new") == []
    restarted = cut(alpha)
    drop_sent_record(home)
    assert restarted.raw(letter.id) == raw
    # a cache rebuilt from the letter files gives the same letter
    restarted.spool.drop_caches()
    again = AgentMail(alpha.registry, Identity("alpha"), home)
    assert again.show(letter.id).message_id == letter.message_id
    assert again.flush() == []


def test_a_file_of_cur_that_vanishes_while_it_is_searched_is_passed_over(
    alpha: AgentMail, beta: AgentMail, home: Path, durable_only: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    raw = alpha.raw(letter.id)
    alpha.send("beta", "A second report, other bytes", OPENER)
    beta.inbox()
    restarted = cut(alpha)
    drop_sent_record(home)
    cur = home / "postoffice" / "beta" / "cur"
    other = max(os.listdir(cur))  # the newest, looked at first: gone between the listing and its stat
    real = os.lstat

    def lstat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if os.path.normpath(str(path)) == str(cur / other):
            raise FileNotFoundError(2, "gone", str(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", lstat)
    assert restarted.raw(letter.id) == raw


def test_a_sent_letter_is_found_in_the_sent_record_when_the_recipient_lost_it(
    alpha: AgentMail, home: Path, durable_only: None
) -> None:
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    raw = alpha.raw(letter.id)
    restarted = cut(alpha)
    for path in (home / "postoffice" / "beta" / "new").iterdir():
        path.unlink()  # a person's mail client deleted it there
    assert restarted.raw(letter.id) == raw


def test_rebuild_after_a_cut_finds_a_sent_letter_from_the_ledger_notes(
    alpha: AgentMail, home: Path, durable_only: None, cli: Cli
) -> None:
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    raw = alpha.raw(letter.id)
    restarted = cut(alpha)
    restarted.close()
    restarted.spool.db.close()
    for name in ("spool.db-wal", "spool.db-shm"):
        (restarted.spool.root / name).unlink(missing_ok=True)
    (restarted.spool.root / "spool.db").write_bytes(b"not a database " * 300)  # damaged as well
    code, out, err = cli("--as", "alpha", "rebuild")
    assert code == 0 and "1 sent" in out, (out, err)
    spool = Spool(restarted.spool.root)
    assert spool.read.locate(letter.id) == "sent" and spool.read.raw(letter.id) == raw


def _plant(home: Path, how: str, raw: bytes) -> None:
    """Where beta's copy was, something else: other bytes of the same size, a symbolic link to
    a file of the very bytes, a FIFO."""
    new = home / "postoffice" / "beta" / "new"
    (path,) = new.iterdir()
    path.unlink()
    if how == "other bytes":
        path.write_bytes(raw.replace(b"Quota", b"Quote"))
    elif how == "a link":
        elsewhere = home / "elsewhere.eml"
        elsewhere.write_bytes(raw)
        path.symlink_to(elsewhere)
    else:
        os.mkfifo(path)
    cur = home / "postoffice" / "beta" / "cur"
    cur.mkdir(exist_ok=True)
    (cur / "000000000001:2,").symlink_to(home / "elsewhere.eml" if how == "a link" else path)


@pytest.mark.parametrize("how", ["other bytes", "a link", "a FIFO"])
def test_a_planted_post_office_file_is_never_taken_back(
    alpha: AgentMail, home: Path, durable_only: None, how: str
) -> None:
    letter, raw, restarted = sent_then_cut(alpha, home)
    _plant(home, how, raw)
    with pytest.raises(OSError):  # the file is lost, as before: nothing else is taken for it
        restarted.raw(letter.id)
    assert list((restarted.spool.root / "tmp").glob("*.eml")) == []
    assert restarted.flush() == [], "a row whose file is lost was sent again"
    assert restarted.spool.read.locate(letter.id) == "sent"


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.text(max_size=40),
    st.sampled_from(["..", "../..", "/", "/dev/zero", "../../postoffice/beta/new", "letters", "x\x00y"]),
    st.lists(st.text(max_size=20), max_size=3),
)


@settings(
    max_examples=examples(120), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(
    notes=st.fixed_dictionaries(
        {"copy": _VALUES, "copy_key": st.text(max_size=40)}, optional={"copy_size": _VALUES, "copies": _VALUES}
    ),
)
@example(notes={"copy": "x\x00y", "copy_key": "k"})
@example(
    notes={"copy": "../../postoffice/beta/new", "copy_key": "k", "copy_size": True, "copies": ["/dev/zero", "x\x00"]}
)
def test_any_notes_a_restore_reads_find_nothing_else_and_never_raise(tmp_path: Path, notes: dict[str, object]) -> None:
    """The notes come from spool.db or, in a rebuild, from ledger.jsonl (a file anyone with the
    home may edit): whatever they say, a restore takes only a plain file holding the noted key."""
    spool = Spool(tmp_path / "spool" / "alpha")
    spool.ensure()
    (tmp_path / "postoffice" / "beta" / "cur").mkdir(parents=True, exist_ok=True)
    (tmp_path / "postoffice" / "beta" / "cur" / "000000000001:2,").write_bytes(b"not the letter")
    assert spool.read.restore("01ABCDEF", dict(notes)) is False
    assert list((spool.root / "tmp").glob("*.eml")) == []
    spool.db.close()
