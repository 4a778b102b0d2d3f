"""The sent record's one-STATUS look (nothing new: no EXAMINE) against a server that answers that
STATUS with NO while the folder is there and selectable. The look may spare the read only when
the server said nothing is new; a refusal is no such answer, and the read goes on as before
(a sibling's letter filed before the INBOX's, so a reply to it is filed at its depth)."""

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
from agentmail.transport import sent_record

from ..conftest import OPENER
from ..depth import examples
from ..mailservers import MailServers
from ..mailservers import imap as imap_server
from .test_transport_smtpimap import USERS, make_bus


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


async def _refused(self: Any, args: Any, uid: bool) -> str:
    raise imap_server._No("[UNAVAILABLE] status is not answered now")


async def _without_uidnext(self: Any, args: Any, uid: bool) -> str:
    """STATUS as a quirky server answers it: the UIDNEXT asked for left out."""
    if isinstance(args[-1], list):
        args = [*args[:-1], [item for item in args[-1] if str(item).upper() != "UIDNEXT"]]
    return await _STATUS(self, args, uid)


_STATUS = imap_server._COMMANDS["STATUS"][1]


@pytest.mark.parametrize("status", [_refused, _without_uidnext], ids=["refused", "without-uidnext"])
def test_a_sent_folder_whose_status_says_nothing_is_still_read_before_the_inbox(
    home: Path, servers: MailServers, monkeypatch: pytest.MonkeyPatch, status: Any
) -> None:
    reg = make_bus(home, servers, sent_folder="Sent", new_threads_per_hour=0)
    with (
        AgentMail(reg, Identity("alpha", "writer"), home) as writer,
        AgentMail(reg, Identity("alpha"), home) as reader,
        AgentMail(reg, Identity("beta"), home) as beta,
    ):
        writer.send("beta", "First from the sibling", OPENER)
        assert writer.copy_sent() == 1
        reader.sync()  # the folder found and read: the checkpoint set under its UIDVALIDITY
        assert len(reader.sent()) == 1
        letter = writer.send("beta", "From the sibling", OPENER)
        assert writer.copy_sent() == 1
        (got,) = [x for x in beta.inbox() if x.message_id == letter.message_id]
        assert beta.reply(got, "Reproduced.", type="ack") is not None
        monkeypatch.setitem(imap_server._COMMANDS, "STATUS", ("auth", status))
        reader.sync()  # the INBOX holds the reply: the sync reads, the sent record first
        filed = [x for x in reader.sent() if x.message_id == letter.message_id]
        assert len(filed) == 1
        assert reader.spool.read.locate(filed[0].id) == sibling_letters.STATE
        (reply,) = [x for x in reader.inbox(sync=False) if x.in_reply_to == letter.message_id]
        assert reply.depth == 1  # the loop guard's count: its parent was filed before it
        reader.sync()  # and read once
        assert len([x for x in reader.sent() if x.message_id == letter.message_id]) == 1


class _Sent:
    """A sent folder as a server holds it, answering STATUS with what it is asked (less what a
    quirky server leaves out), SELECT, UID SEARCH and UID FETCH truthfully."""

    def __init__(self, validity: int, uids: set[int], uidnext: int, left_out: frozenset[bytes]) -> None:
        self.validity, self.uids, self.uidnext, self.left_out = validity, uids, uidnext, left_out

    def folder_status(self, folder: str, items: list[bytes]) -> dict[bytes, int]:
        held = {b"UIDVALIDITY": self.validity, b"UIDNEXT": self.uidnext}
        return {item: held[item] for item in items if item not in self.left_out}

    def select_folder(self, folder: str, readonly: bool) -> dict[bytes, int]:
        return {b"UIDVALIDITY": self.validity, b"UIDNEXT": self.uidnext}

    def search(self, criteria: list[str]) -> list[int]:
        low = int(criteria[1].split(":")[0])
        return sorted(u for u in self.uids if u >= min(low, max(self.uids, default=0)))

    def fetch(self, uids: list[int], items: list[str]) -> dict[int, dict[bytes, Any]]:
        body = b"x"
        return {u: {b"RFC822.SIZE": 1, b"BODY[]": body, b"BODY[]<0>": body} for u in uids if u in self.uids}


@settings(max_examples=examples(300), deadline=None)
@given(
    validity=st.integers(1, 2),
    uids=st.sets(st.integers(1, 20), max_size=10),
    ahead=st.integers(0, 3),
    checkpoint=st.one_of(st.none(), st.tuples(st.integers(1, 2), st.integers(0, 22)).map(lambda c: f"{c[0]}:{c[1]}")),
    left_out=st.frozensets(st.sampled_from([b"UIDVALIDITY", b"UIDNEXT"])),
)
def test_the_status_look_says_nothing_is_new_only_when_the_read_finds_nothing(
    validity: int, uids: set[int], ahead: int, checkpoint: str | None, left_out: frozenset[bytes]
) -> None:
    folder = _Sent(validity, uids, max(uids, default=0) + 1 + ahead, left_out)
    if not sent_record.imap_pending(folder, "Sent", checkpoint):
        read = [item for batch, _ in sent_record.imap_copies(folder, "Sent", checkpoint, 100) for item in batch]
        assert read == []
