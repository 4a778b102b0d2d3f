"""One reply per letter, word for word (mutation group ``claims_spool``, tests/MUTATION.md): the
claims a reply makes on the server and notes on itself (``server_claims``: claim, noted, confirm,
sent, release), against the real post office with a failure or a record put in front of it."""

from __future__ import annotations

import hashlib
import os
import types
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import StorageError, TransportError
from agentmail.model import opener_key, ulid_ms
from agentmail.spool import server_claims
from agentmail.spool.home_claims import CLAIMS_BUILT
from agentmail.spool.layout import _key, _loads, opener_row, reply_key
from agentmail.transport import open_transport
from agentmail.transport.base import Claimed
from agentmail.transport.local import LocalTransport

from ..conftest import OPENER
from .test_spool import _reply


class Recorded(LocalTransport):
    """The local post office, each claim call recorded; ``failing`` calls raise instead."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.calls: list[tuple[str, str, str, str]] = []
        self.failing: dict[str, Exception] = {}  # "claim", "sent", "release" -> what it raises
        self.warning: str | None = None

    def _call(self, what: str, message_id: str, key: str, holder: str) -> None:
        self.calls.append((what, message_id, key, holder))
        if what in self.failing:
            raise self.failing[what]

    def claim_reply(self, message_id: str, key: str, holder: str) -> Claimed:
        self._call("claim", message_id, key, holder)
        got = super().claim_reply(message_id, key, holder)
        return Claimed(got.holder, self.warning if got.holder is None else None)

    def reply_sent(self, message_id: str, key: str, holder: str) -> bool:
        self._call("sent", message_id, key, holder)
        return super().reply_sent(message_id, key, holder)

    def release_reply(self, message_id: str, key: str, holder: str) -> None:
        self._call("release", message_id, key, holder)
        super().release_reply(message_id, key, holder)


def _post(registry: Registry, home: Path, platform: str = "beta") -> Recorded:
    base = open_transport(registry, platform, home)
    assert isinstance(base, LocalTransport)
    return Recorded(base.postoffice, platform, base.resolve)


CLAIMS = [("<1.alpha@bus.test>", "k1"), ("<2.alpha@bus.test>", "k2")]


@pytest.fixture
def letters(alpha: AgentMail, beta: AgentMail) -> tuple[str, str]:
    """Two letters filed in beta's spool: the ids the claims are made for."""
    alpha.send("beta", "Quota", OPENER)
    alpha.send("beta", "Quota 2", OPENER)
    first, second = beta.inbox()
    return first.id, second.id


def test_a_claim_made_is_noted_on_the_letter_and_fresh_and_a_second_letter_loses_it(
    beta: AgentMail, registry: Registry, home: Path, letters: tuple[str, str]
) -> None:
    post, (mine, other) = _post(registry, home), letters
    assert server_claims.claim(beta.spool, post, mine, CLAIMS) == Claimed(None, None)
    assert post.calls == [("claim", m, k, f"beta {mine}") for m, k in CLAIMS]
    assert server_claims.noted(beta.spool, mine) == CLAIMS
    assert (
        beta.spool.read.annotations(mine)[server_claims.NOTE]
        == '[["<1.alpha@bus.test>", "k1"], ["<2.alpha@bus.test>", "k2"]]'
    )
    assert list(server_claims._fresh[post]) == [("beta", mine)]
    assert server_claims.claim(beta.spool, post, other, CLAIMS) == Claimed(f"beta {mine}", None)
    assert server_claims.noted(beta.spool, other) == [] and list(server_claims._fresh[post]) == [("beta", mine)]


def test_a_claim_the_server_cannot_take_is_noted_says_why_and_is_not_fresh(
    beta: AgentMail, registry: Registry, home: Path, letters: tuple[str, str]
) -> None:
    post, (mine, _) = _post(registry, home), letters
    post.failing["claim"] = TransportError("the post office is away")
    got = server_claims.claim(beta.spool, post, mine, CLAIMS)
    assert got == Claimed(
        None, "the reply is not claimed on the server yet (the post office is away): it is claimed when it is submitted"
    )
    assert len(post.calls) == 1  # the first key failed: none after it is tried
    assert server_claims.noted(beta.spool, mine) == CLAIMS and post not in server_claims._fresh


def test_a_claim_kept_on_this_machine_only_says_the_first_warning(
    beta: AgentMail, registry: Registry, home: Path, letters: tuple[str, str]
) -> None:
    post, (mine, _) = _post(registry, home), letters
    post.warning = "held on this machine only"
    assert server_claims.claim(beta.spool, post, mine, CLAIMS) == Claimed(None, "held on this machine only")
    assert list(server_claims._fresh[post]) == [("beta", mine)]


def test_noted_reads_only_pairs_from_a_hostile_note(beta: AgentMail, letters: tuple[str, str]) -> None:
    mine, other = letters
    note = '[["<a>", "k"], ["<b>"], "x", ["<c>", "k", "z"], [1, 2], {"a": 1}]'
    beta.spool.write.annotate(mine, durable=False, **{server_claims.NOTE: note})
    assert server_claims.noted(beta.spool, mine) == [("<a>", "k"), ("1", "2")]
    beta.spool.write.annotate(other, durable=False, **{server_claims.NOTE: "[[not json"})
    assert server_claims.noted(beta.spool, other) == []
    assert server_claims.noted(beta.spool, "01NOSUCHLETTER") == []


def test_confirm_asks_the_server_unless_the_claim_is_fresh_from_this_transport(
    beta: AgentMail, registry: Registry, home: Path, letters: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(server_claims, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    post, (mine, _) = _post(registry, home), letters
    server_claims.claim(beta.spool, post, mine, CLAIMS)
    clock[0] += server_claims.FRESH - 1
    post.calls.clear()
    assert server_claims.confirm(beta.spool, post, mine) is None and post.calls == []  # fresh: not asked
    assert server_claims.confirm(beta.spool, post, mine) is None  # used once: asked now, still ours
    assert post.calls == [("claim", m, k, f"beta {mine}") for m, k in CLAIMS]
    server_claims.claim(beta.spool, post, mine, CLAIMS)
    clock[0] += server_claims.FRESH  # exactly as old as FRESH: asked again
    post.calls.clear()
    assert server_claims.confirm(beta.spool, post, mine) is None and len(post.calls) == 2
    other = _post(registry, home)
    assert server_claims.confirm(beta.spool, other, mine) is None and len(other.calls) == 2  # not its claim


def test_a_claim_made_at_the_same_moment_as_a_stale_one_is_remembered(
    beta: AgentMail, registry: Registry, home: Path, letters: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(server_claims, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    post, (mine, other) = _post(registry, home), letters
    server_claims.claim(beta.spool, post, mine, CLAIMS[:1])
    clock[0] += server_claims.FRESH  # exactly FRESH later: the first is forgotten
    server_claims.claim(beta.spool, post, other, CLAIMS[1:])
    assert server_claims._fresh[post] == {("beta", other): clock[0]}
    clock[0] += 1  # a moment later: the fresh one stays beside the new one
    server_claims.claim(beta.spool, post, mine, CLAIMS[:1])
    assert server_claims._fresh[post] == {("beta", other): clock[0] - 1, ("beta", mine): clock[0]}


def test_confirm_names_who_took_the_claim_over_but_never_this_very_letter(
    beta: AgentMail, registry: Registry, home: Path, letters: tuple[str, str]
) -> None:
    post, (mine, _) = _post(registry, home), letters
    beta.spool.write.annotate(mine, durable=False, **{server_claims.NOTE: '[["<1.alpha@bus.test>", "k1"]]'})
    post.claims.claim("k1", f"beta@bob {mine.lower()} 01OTHER")  # another machine's reply holds it
    assert server_claims.confirm(beta.spool, post, mine) == f"beta@bob {mine.lower()} 01OTHER"
    post.release_reply("<2.alpha@bus.test>", "k2", "x")
    beta.spool.write.annotate(mine, durable=False, **{server_claims.NOTE: '[["<2.alpha@bus.test>", "k2"]]'})
    post.claims.claim("k2", f"beta {mine.lower()}")  # this letter, its id in another case: marked before a kill
    post.claims.sent("k2", f"beta {mine.lower()}")
    assert server_claims.confirm(beta.spool, post, mine) is None


def test_sent_marks_every_claim_past_a_failure_and_release_stops_at_one(
    beta: AgentMail, registry: Registry, home: Path, letters: tuple[str, str]
) -> None:
    post, (mine, _) = _post(registry, home), letters
    server_claims.claim(beta.spool, post, mine, CLAIMS)
    post.calls.clear()
    post.failing["sent"] = OSError("the disk is full")
    server_claims.sent(beta.spool, post, mine)
    assert post.calls == [("sent", m, k, f"beta {mine}") for m, k in CLAIMS]
    post.calls.clear()
    post.failing["sent"] = TransportError("the server is away")
    server_claims.sent(beta.spool, post, mine)
    assert len(post.calls) == 2
    post.calls.clear()
    post.failing["release"] = TransportError("the server is away")
    server_claims.release(beta.spool, post, mine)
    assert post.calls == [("release", *CLAIMS[0], f"beta {mine}")]
    del post.failing["release"]
    post.calls.clear()
    server_claims.release(beta.spool, post, mine)
    assert post.calls == [("release", m, k, f"beta {mine}") for m, k in CLAIMS]


def test_a_claim_released_is_free_for_another_reply_and_one_sent_never_is(
    beta: AgentMail, registry: Registry, home: Path, letters: tuple[str, str]
) -> None:
    post, (mine, other) = _post(registry, home), letters
    server_claims.claim(beta.spool, post, mine, CLAIMS[:1])
    server_claims.release(beta.spool, post, mine)
    assert server_claims.claim(beta.spool, post, other, CLAIMS[:1]) == Claimed(None, None)
    server_claims.sent(beta.spool, post, other)
    assert server_claims.claim(beta.spool, _post(registry, home), mine, CLAIMS[:1]).holder == f"beta {other}"
    assert AgentMail(registry, Identity("beta"), home).spool.read.annotations(other)[server_claims.NOTE]


# --- the keys spool.db holds (layout) ---------------------------------------------------------


def test_the_keys_in_spool_db_are_the_ones_earlier_versions_wrote() -> None:
    """spool.db outlives a version: a key spelled another way would file a letter again (its
    sender and Message-ID) and lose every reply claim (the answered letter's Message-ID and sender)."""
    assert reply_key("<1.alpha@bus.test>", "alpha") == "<1.alpha@bus.test> from alpha"
    assert _key("alpha", "<1.alpha@bus.test>") == hashlib.sha256(b"alpha\0<1.alpha@bus.test>").hexdigest()[:40]
    assert _key(reply_key("<1@x>", "alpha")) == hashlib.sha256(b"<1@x> from alpha").hexdigest()[:40]


@pytest.mark.parametrize(
    ("text", "loaded"),
    [(None, None), ("", None), ("{", None), ("[1, 2]", None), ('"x"', None), ('{"a": [1]}', {"a": [1]})],
)
def test_a_rows_json_is_a_dict_or_nothing(text: str | None, loaded: dict[str, object] | None) -> None:
    assert _loads(text) == loaded


ID = "01kbz7x1y2z3a4b5c6d7e8f9g0"


@pytest.mark.parametrize(
    ("state", "data", "key"),
    [
        ("sent", {"type": "report", "message_id": "<m@x>"}, "<m@x>"),
        ("outbox", {"type": "question", "message_id": "<m@x>"}, "<m@x>"),
        ("held", {"type": "report", "message_id": "<m@x>"}, "<m@x>"),
        ("failed", {"type": "report", "message_id": "<m@x>"}, "<m@x>"),  # a row kept, never counted
        ("sibling", {"type": "report", "message_id": "<m@x>"}, "<m@x>"),
        ("sent", {"type": "report"}, ID),  # no Message-ID: counted by its id
        ("sent", {"type": "no-such-type", "message_id": "<m@x>"}, "<m@x>"),  # the quota errs toward counting
        ("unread", {"type": "report", "message_id": "<m@x>"}, None),  # received: not this platform's
        ("quarantine", {"type": "report", "message_id": "<m@x>"}, None),
        ("sent", {"type": "report", "message_id": "<m@x>", "reason": "x"}, None),
        ("sent", {"type": "report", "message_id": "<m@x>", "in_reply_to": "<p@x>"}, None),  # a reply
        ("sent", {"type": "note", "message_id": "<m@x>"}, None),
        ("sent", {"message_id": "<m@x>"}, None),  # no type: a person's letter
        ("sent", {"type": "", "message_id": "<m@x>"}, None),
    ],
)
def test_an_opener_row_is_made_for_this_platforms_openers_only(
    state: str, data: dict[str, str], key: str | None
) -> None:
    expected = None if key is None else (ID, ulid_ms(ID), opener_key(key))
    assert opener_row(ID, state, data) == expected


# --- the per-home claims, rebuilt (home_claims) --------------------------------------------------


def _forget_claims(client: AgentMail) -> None:
    with client.spool.db.write(durable=False) as tx:
        tx.execute("DELETE FROM claims")
        tx.execute("DELETE FROM facts WHERE name='claims'")


def test_claims_rebuilt_key_a_follow_up_by_this_platforms_own_letter_and_a_reply_by_its_sender(
    alpha: AgentMail, beta: AgentMail
) -> None:
    opened = beta.send("alpha", "Quota", OPENER)
    more = beta.follow_up(opened.thread, "It fails since 2.4.1 too.", type="report")
    alpha.send("beta", "Limits", OPENER)
    (got,) = beta.inbox()
    answer = beta.reply(got, "Reproduced; fixing it.", type="ack")
    assert answer is not None and more.in_reply_to == opened.message_id
    _forget_claims(beta)
    claims = beta.spool.home_claims
    assert claims.replied_by(reply_key(opened.message_id, "beta")) == f"beta {more.id}"
    assert claims.replied_by(reply_key(opened.message_id, "alpha")) is None
    assert claims.replied_by(reply_key(got.message_id, "alpha")) == f"beta {answer.id}"
    assert claims.replied_by(reply_key(got.message_id, "beta")) is None
    assert beta.spool.db.fact("claims") == CLAIMS_BUILT


def test_a_claim_of_a_sibling_mailbox_whose_spool_db_was_lost_refuses_a_second_reply(
    alpha: AgentMail, registry: Registry, home: Path
) -> None:
    """The other agent's spool.db gone, its letters on disk: whether it answered cannot be said
    until it is rebuilt, so no reply of this mailbox is claimed in the meantime."""
    alpha.send("beta", "Quota", OPENER)
    bob = AgentMail(registry, Identity("beta", "bob"), home)
    (got,) = bob.inbox()
    answer = bob.reply(got, "Reproduced; fixing it.", type="ack")
    assert answer is not None and answer.state == "sent"
    bob.close()
    for name in os.listdir(bob.spool.root):
        if name.startswith("spool.db"):
            os.remove(bob.spool.root / name)
    beta = AgentMail(registry, Identity("beta"), home)
    key = reply_key(got.message_id, "alpha")
    with pytest.raises(StorageError, match="spool.db is missing"):
        beta.spool.home_claims.replied_by(key)
    with pytest.raises(StorageError, match="spool.db is missing"), beta.spool.home_claims.claim_reply(key, "01SECOND"):
        pass


def test_the_claims_are_built_once_not_rescanned_on_every_question(beta: AgentMail) -> None:
    """A cache: built from the letters when it is missing, then kept by ``claim_reply`` alone (a
    scan of every mailbox's letters for each reply would grow with the spool)."""
    claims, key = beta.spool.home_claims, reply_key("<1.alpha@bus.test>", "alpha")
    assert claims.replied_by(key) is None and beta.spool.db.fact("claims") == CLAIMS_BUILT
    beta.spool.write.store("sent", *_reply("01FILEDUNCLAIMED"))  # filed past the claims (no client does)
    assert claims.replied_by(key) is None
    _forget_claims(beta)
    assert claims.replied_by(key) == "beta 01FILEDUNCLAIMED"
