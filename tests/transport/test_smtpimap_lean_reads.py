"""The reads a sync spends on smtp+imap, counted by the in-process server: a fetch of the few
letters its look saw lists them by their sizes (no UID SEARCH), and a look at the sent folder
with nothing new is one STATUS that leaves the INBOX look standing. Neither hides a letter: one
that came after the look, one expunged in the range, a gap wider than a batch. The bounded read
lists exactly what the SEARCH would (differential, over hostile folders)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.client import sibling_letters
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.transport import Checkpoint, smtpimap
from agentmail.transport.imap_uids import uid_batches
from agentmail.transport.smtpimap import SmtpImapTransport

from ..conftest import OPENER, eventually
from ..depth import examples
from ..mailservers import MailServers
from .test_transport_smtpimap import USERS, make_bus


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def _searches(servers: MailServers) -> int:
    return servers.store.counts["imap.UID SEARCH"] + servers.store.counts["imap.SEARCH"]


def _looks(servers: MailServers) -> int:
    return servers.store.counts["imap.EXAMINE"] + servers.store.counts["imap.SELECT"]


def _pair(home: Path, servers: MailServers, sent_folder: str = "") -> tuple[SmtpImapTransport, AgentMail]:
    reg = make_bus(home, servers, sent_folder=sent_folder, new_threads_per_hour=0)
    return SmtpImapTransport.from_registry(reg, "beta", home), AgentMail(reg, Identity("alpha"), home)


def _send(alpha: AgentMail, servers: MailServers, subjects: list[str]) -> list[str]:
    held = len(servers.store.messages("beta@bus.test"))
    ids = [alpha.send("beta", subject, OPENER).message_id for subject in subjects]
    assert eventually(lambda: len(servers.store.messages("beta@bus.test")) == held + len(subjects))
    return ids


def _read(transport: SmtpImapTransport, checkpoint: str | None) -> tuple[list[bytes], str | None]:
    got: list[bytes] = []
    for batch in transport.fetch(checkpoint, 10_000_000):
        got += [item.raw or b"" for item in batch]
        checkpoint = transport.advance(checkpoint, batch)
    return got, transport.advance(checkpoint, [])


def test_a_fetch_of_the_few_letters_its_look_saw_lists_them_by_size_without_a_search(
    home: Path, servers: MailServers
) -> None:
    beta, alpha = _pair(home, servers)
    try:
        start = beta.tip()
        ids = _send(alpha, servers, ["One", "Two", "Three"])
        assert beta.pending(start)
        searches, fetches = _searches(servers), servers.store.counts["imap.UID FETCH"]
        got, _ = _read(beta, start)
        assert sorted(m for m in ids if any(m.encode() in r for r in got)) == sorted(ids)
        assert _searches(servers) == searches  # the sizes listed them
        assert servers.store.counts["imap.UID FETCH"] == fetches + 1  # sizes and bodies in one
    finally:
        beta.close()
        alpha.close()


def test_a_letter_after_the_look_or_expunged_in_its_range_is_neither_lost_nor_read_twice(
    home: Path, servers: MailServers
) -> None:
    beta, alpha = _pair(home, servers)
    try:
        start = beta.tip()
        first, gone, kept = _send(alpha, servers, ["First", "Expunged", "Kept"])
        assert beta.pending(start)  # the look: UIDNEXT past these three
        later = _send(alpha, servers, ["After the look"])[0]
        doomed = [m.uid for m in servers.store.messages("beta@bus.test") if gone.encode() in m.data]
        servers.store.set_flags("beta@bus.test", "INBOX", doomed, "+", {"\\Deleted"})
        servers.store.expunge("beta@bus.test", "INBOX", doomed)
        got, checkpoint = _read(beta, start)
        assert [m for m in (first, gone, kept, later) if any(m.encode() in r for r in got)] == [first, kept]
        assert beta.pending(checkpoint)  # the one after the look: the next sync reads it
        again, checkpoint = _read(beta, checkpoint)
        assert len(again) == 1 and later.encode() in again[0]
        assert not beta.pending(checkpoint)
    finally:
        beta.close()
        alpha.close()


def test_in_the_one_fetch_a_letter_over_max_size_is_not_taken_and_the_others_come_whole(
    home: Path, servers: MailServers
) -> None:
    beta, alpha = _pair(home, servers)
    try:
        start = beta.tip()
        small = b"From: a@bus.test\r\nSubject: small\r\n\r\n" + b"s" * 4000 + b"\r\n"
        exact = b"From: a@bus.test\r\nSubject: exact\r\n\r\n" + b"e" * 5000
        large = b"From: a@bus.test\r\nSubject: large\r\n\r\n" + b"l" * 9000 + b"\r\n"
        for data in (small, exact, large):
            servers.store.deliver("beta@bus.test", data)
        small, exact, large = (m.data for m in servers.store.messages("beta@bus.test")[-3:])  # as delivered
        most = len(exact)  # max_size itself: still whole
        assert beta.pending(start)
        fetches = servers.store.counts["imap.UID FETCH"]
        items = [item for batch in beta.fetch(start, most) for item in batch]
        assert [(item.raw, item.size) for item in items] == [(small, len(small)), (exact, most), (None, len(large))]
        assert servers.store.counts["imap.UID FETCH"] == fetches + 1
    finally:
        beta.close()
        alpha.close()


def test_a_gap_wider_than_a_batch_is_searched_and_read_whole(
    home: Path, servers: MailServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(smtpimap, "BATCH", 2)
    beta, alpha = _pair(home, servers)
    try:
        start = beta.tip()
        ids = _send(alpha, servers, [f"Wide {n}" for n in range(5)])
        searches = _searches(servers)
        got, checkpoint = _read(beta, start)
        assert [m for m in ids if any(m.encode() in r for r in got)] == ids and len(got) == 5
        assert _searches(servers) == searches + 1
        assert not beta.pending(checkpoint)
    finally:
        beta.close()
        alpha.close()


def test_the_sent_record_with_nothing_new_is_one_status_and_the_inbox_look_stands(
    home: Path, servers: MailServers
) -> None:
    beta, alpha = _pair(home, servers, sent_folder="Sent")
    try:
        servers.store.create_folder("beta@bus.test", "Sent")
        start = beta.tip()
        status = beta._connect().folder_status("Sent", [b"UIDVALIDITY", b"UIDNEXT"])
        sent_start = str(Checkpoint(str(status[b"UIDVALIDITY"]), int(status[b"UIDNEXT"]) - 1))  # its end
        assert list(beta.sent_copies(sent_start, 10_000_000)) == []  # the one LIST that finds the folder
        (letter,) = _send(alpha, servers, ["Waiting"])
        assert beta.pending(start)
        looks, statuses = _looks(servers), servers.store.counts["imap.STATUS"]
        assert [b for b, _ in beta.sent_copies(sent_start, 10_000_000)] == []
        assert servers.store.counts["imap.STATUS"] == statuses + 1
        got, _ = _read(beta, start)  # takes the look pending took: no EXAMINE of INBOX again
        assert len(got) == 1 and letter.encode() in got[0]
        assert _looks(servers) == looks
    finally:
        beta.close()
        alpha.close()


def test_a_sibling_copy_past_the_checkpoint_is_still_read_and_filed_once(home: Path, servers: MailServers) -> None:
    reg = make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=0)
    with AgentMail(reg, Identity("alpha", "writer"), home) as writer, AgentMail(reg, Identity("alpha"), home) as reader:
        reader.sync()
        letter = writer.send("beta", "From the sibling", OPENER)
        assert writer.copy_sent() == 1
        reader.sync()
        reader.sync()  # nothing new in Sent now: the STATUS says so, nothing read twice
        filed = [x for x in reader.sent() if x.message_id == letter.message_id]
        assert len(filed) == 1
        assert reader.spool.read.locate(filed[0].id) == sibling_letters.STATE


# --- the bounded read against the SEARCH it replaces ---------------------------------------------


class _Folder:
    """A folder as a server holds it (UID -> size), answering UID SEARCH and UID FETCH as RFC
    3501 says: ``n:*`` includes the last UID, absent UIDs are passed over; plus whatever junk
    a hostile server adds to a FETCH answer (other UIDs, non-numbers)."""

    def __init__(self, sizes: dict[int, int], junk: dict[Any, Any]) -> None:
        self.sizes, self.junk = sizes, junk

    def search(self, criteria: list[str]) -> list[int]:
        low = int(criteria[1].split(":")[0])
        top = max(self.sizes, default=0)
        return sorted(u for u in self.sizes if u >= min(low, top))

    def fetch(self, uids: list[int], items: list[str]) -> dict[Any, Any]:
        held = [u for u in uids if u in self.sizes]
        if items == ["RFC822.SIZE"]:
            return {**self.junk, **{u: {b"RFC822.SIZE": self.sizes[u]} for u in held}}
        if items == ["BODY.PEEK[]"]:
            return {u: {b"BODY[]": self.body(u)} for u in held}
        size_item, partial = items  # RFC822.SIZE and BODY.PEEK[]<0.N>: N octets at most
        assert size_item == "RFC822.SIZE" and partial.startswith("BODY.PEEK[]<0.")
        most = int(partial.removeprefix("BODY.PEEK[]<0.").rstrip(">"))
        got = {u: {b"RFC822.SIZE": self.sizes[u], b"BODY[]<0>": self.body(u)[:most]} for u in held}
        return {**self.junk, **got}

    def body(self, uid: int) -> bytes:
        return str(uid).encode().ljust(self.sizes[uid], b".")[: self.sizes[uid]]


@settings(max_examples=examples(300), deadline=None)
@given(
    uids=st.sets(st.integers(1, 120), max_size=60),
    last=st.integers(0, 130),
    ahead=st.integers(0, 12),
    batch=st.integers(1, 60),
    max_size=st.integers(0, 30),
    junk=st.dictionaries(
        st.one_of(st.integers(-5, 200), st.text(max_size=3)), st.just({b"RFC822.SIZE": 1}), max_size=4
    ),
)
def test_the_bounded_read_lists_exactly_what_the_search_would(
    uids: set[int], last: int, ahead: int, batch: int, max_size: int, junk: dict[Any, Any]
) -> None:
    uidnext = max(uids, default=0) + 1 + ahead  # UIDs past the last one held were expunged
    # Junk outside the range asked for (other UIDs, non-numbers) is passed over. (A server that
    # gives a size for a UID in the range says it holds it: then it is listed, as a SEARCH of a
    # server saying so would.)
    outside = {k: v for k, v in junk.items() if not (isinstance(k, int) and last < k < uidnext)}
    folder = _Folder({u: u % 25 for u in uids}, outside)

    def read(known_uidnext: int) -> tuple[list[int], dict[int, int], dict[int, bytes]]:
        listed, sizes, bodies = [], {}, {}
        for chunk, got_sizes, got in uid_batches(folder, last, max_size, batch, known_uidnext):
            assert chunk == sorted(chunk) and len(chunk) <= batch
            listed += chunk
            sizes |= {u: int(got_sizes[u][b"RFC822.SIZE"]) for u in chunk}
            bodies |= {u: bytes(row[b"BODY[]"]) for u, row in got.items()}
        return listed, sizes, bodies

    bounded, searched = read(uidnext), read(0)
    assert bounded == searched
    listed, sizes, bodies = bounded
    assert listed == sorted(u for u in uids if u > last)
    assert sizes == {u: folder.sizes[u] for u in listed}
    assert bodies == {u: folder.body(u) for u in listed if folder.sizes[u] <= max_size}  # whole, never cut


class _Lying:
    """A server whose one FETCH contradicts itself: a body longer than the size it announced,
    a row without the (partial) body asked for, a whole body for a partial one."""

    def __init__(self) -> None:
        self.asked: list[tuple[list[int], list[str]]] = []

    def fetch(self, uids: list[int], items: list[str]) -> dict[Any, Any]:
        self.asked.append((uids, items))
        if items == ["BODY.PEEK[]"]:
            return {6: {b"BODY[]": b"whole"}}
        return {
            5: {b"RFC822.SIZE": 10, b"BODY[]<0>": b"x" * 31},
            6: {b"RFC822.SIZE": 10},
            7: {b"RFC822.SIZE": 4, b"BODY[]": b"four"},
        }


def test_a_body_longer_than_its_announced_size_is_not_taken_and_a_missing_one_is_asked_as_before() -> None:
    server = _Lying()
    ((chunk, sizes, bodies),) = list(uid_batches(server, 4, 30, 50, 8))
    assert chunk == [5, 6, 7]
    assert sizes[5] == {b"RFC822.SIZE": 31} and 5 not in bodies  # too large, by what came
    assert bodies[6] == {b"BODY[]": b"whole"}  # the partial fetch unanswered: the plain one, as before
    assert bodies[7] == {b"BODY[]": b"four"}
    assert server.asked[1] == ([6], ["BODY.PEEK[]"])
