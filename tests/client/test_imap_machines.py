"""Several machines (homes) of one platform on one IMAP mailbox, under a state machine (issue 25).

The post-office twin is ``Machines`` in tests/client/test_many_machines.py; this one runs the
claim on the in-process IMAP server with its CONDSTORE: homes of beta sync, reply, mark done,
die between the claim and the send, come back, or are replaced by a fresh empty home, while
time passes on an injected clock (the takeover time) and the server now and then cannot be
reached, refuses the login, or refuses the letter for now. What the server received is the
judge: never two replies to one letter, and at the end, the stated time past, every letter
answered exactly once (nothing lost), the reply that went out being the one the server's claim
names.
"""

from __future__ import annotations

import email
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.errors import ConfigError
from agentmail.model import Letter
from agentmail.spool import db
from agentmail.transport.claim_marks import STALE_AFTER
from agentmail.transport.smtpimap import SmtpImapTransport

from ..conftest import OPENER
from ..depth import examples
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import USERS, make_bus

LETTERS = 3
HOMES = 3


class Killed(BaseException):
    """The machine dies here (raised from a hook, never caught by agentmail)."""


def _fresh_home(base: Path, root: Path, name: str) -> Path:
    """A machine joining the platform: the registry, keys and logins, an empty spool."""
    other = root / name
    shutil.copytree(base, other, ignore=shutil.ignore_patterns("spool"))
    return other


class ImapMachines(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp())
        self.servers = MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit").start()
        self.base = self.root / "base"
        self.base.mkdir()
        reg = make_bus(self.base, self.servers, new_threads_per_hour=0)
        with AgentMail(reg, Identity("alpha"), self.base) as alpha:
            self.ids = [alpha.send("beta", f"Quota {i}", OPENER).message_id for i in range(LETTERS)]
        self.joined = 0
        self.homes = [self._join() for _ in range(HOMES)]
        self.clock = [time.time()]
        self.clients: list[AgentMail | None] = [None] * HOMES

    def _join(self) -> Path:
        self.joined += 1
        return _fresh_home(self.base, self.root, f"h{self.joined}")

    def _client(self, h: int) -> AgentMail:
        client = self.clients[h]
        if client is None:
            reg = registry_mod.load(self.homes[h] / "registry")
            transport = SmtpImapTransport.from_registry(reg, "beta", self.homes[h])
            transport.now = lambda: self.clock[0]
            client = self.clients[h] = AgentMail(reg, Identity("beta"), self.homes[h], transport=transport)
        return client

    def _drop(self, h: int) -> None:
        """The machine is gone: its connections cut, not logged out; its home keeps its disk."""
        client, self.clients[h] = self.clients[h], None
        if client is not None:
            assert isinstance(client.transport, SmtpImapTransport)
            client.transport._drop()
            client.close()

    def _unread(self, h: int, letter: int, *, sync: bool = True) -> Letter | None:
        """The letter if unread in home ``h`` (``sync``: after reading the server, so the picture
        knows what the other machines sent; else on the view it had, as a racing machine does)."""
        return {x.message_id: x for x in self._client(h).inbox(sync=sync)}.get(self.ids[letter])

    # --- what a machine does ------------------------------------------------------------------

    @rule(h=st.integers(0, HOMES - 1))
    def inbox(self, h: int) -> None:
        got = {x.message_id for x in self._client(h).inbox()}
        assert got <= set(self.ids)

    @rule(h=st.integers(0, HOMES - 1), letter=st.integers(0, LETTERS - 1), sync=st.booleans())
    def reply(self, h: int, letter: int, sync: bool) -> None:
        parent = self._unread(h, letter, sync=sync)
        if parent is not None:
            sent = self._client(h).reply(parent, "On it.", type="ack")
            assert sent is None or sent.state == "sent", sent
            why = "" if sent else self._client(h).why_refused(parent) or ""
            event(f"reply: {'sent' if sent else 'refused on the server' if '(by beta' in why else 'refused'}")

    @rule(h=st.integers(0, HOMES - 1), letter=st.integers(0, LETTERS - 1))
    def done(self, h: int, letter: int) -> None:
        parent = self._unread(h, letter)
        if parent is not None:
            self._client(h).done(parent.id)

    @rule(h=st.integers(0, HOMES - 1), letter=st.integers(0, LETTERS - 1), filed=st.booleans())
    def crash_between_claim_and_send(self, h: int, letter: int, filed: bool) -> None:
        """Killed once the server claim is made: before the reply is filed, or after (at "stored")."""
        parent = self._unread(h, letter)
        if parent is None:
            return
        client = self._client(h)
        transport = client.transport
        assert isinstance(transport, SmtpImapTransport)
        claim = transport.claim_reply

        def claimed_then_killed(message_id: str, key: str, holder: str) -> str | None:
            who = claim(message_id, key, holder)
            if who is None and not filed:
                raise Killed
            return who

        def killed_when_stored(point: str) -> None:
            if point == "stored":
                raise Killed

        transport.claim_reply = claimed_then_killed  # type: ignore[method-assign]
        db.crash_point = killed_when_stored if filed else None
        try:
            client.reply(parent, "On it.", type="ack")
        except Killed:
            pass
        finally:
            db.crash_point = None
            self._drop(h)

    @rule(h=st.integers(0, HOMES - 1))
    def comes_back(self, h: int) -> None:
        """A machine back (or a later command): what its outbox holds confirms its claim first."""
        client = self._client(h)
        queued = client.spool.read.ids("outbox")
        client.flush()
        for letter_id in queued:
            event(f"back: a queued reply {client.spool.read.locate(letter_id)}")

    @rule(h=st.integers(0, HOMES - 1))
    def rejoin(self, h: int) -> None:
        """The machine is replaced by a fresh empty home: it sees every letter, answers none twice."""
        self._drop(h)
        self.homes[h] = self._join()
        client = self._client(h)
        client.inbox()  # read what the server holds: the letters, and what the others sent
        held = {client.spool.read.letter(i, s).message_id for s in ("unread", "read") for i in client.spool.read.ids(s)}
        assert held == set(self.ids)  # every letter; those another machine answered read already

    @rule(seconds=st.sampled_from([1.0, 300.0, STALE_AFTER + 1]))
    def time_passes(self, seconds: float) -> None:
        self.clock[0] += seconds

    # --- what the server does -----------------------------------------------------------------

    @rule(h=st.integers(0, HOMES - 1), letter=st.integers(0, LETTERS - 1))
    def claim_unreachable(self, h: int, letter: int) -> None:
        """The IMAP server is down at the claim: the reply is filed, queued, and claimed when it
        is submitted (a later flush); the caller sees a normal return. Nothing leaves meanwhile."""
        parent = self._unread(h, letter)
        if parent is None:
            return
        before = len(self.servers.store.accepted)
        self.servers.stop_imap()
        try:
            queued = self._client(h).reply(parent, "On it.", type="ack")
        finally:
            self.servers.start_imap()
            for other in self.clients:  # every machine's next command connects anew
                if other is not None:
                    assert isinstance(other.transport, SmtpImapTransport)
                    other.transport._drop()
        assert queued is None or queued.state == "outbox", queued
        assert len(self.servers.store.accepted) == before
        event(f"claim unreachable: {'queued' if queued else 'refused'}")

    @rule(h=st.integers(0, HOMES - 1), letter=st.integers(0, LETTERS - 1))
    def claim_login_refused(self, h: int, letter: int) -> None:
        """The login is refused at the claim: the reply is refused whole (ConfigError), nothing filed."""
        parent = self._unread(h, letter)
        if parent is None:
            return
        client = self._client(h)
        assert isinstance(client.transport, SmtpImapTransport)
        client.transport._drop()  # the claim must log in again
        outbox = set(client.spool.read.ids("outbox"))
        self.servers.store.refuse_logins()
        try:
            client.reply(parent, "On it.", type="ack")
        except ConfigError:
            pass
        finally:
            self.servers.store.refuse_logins(False)
        assert set(client.spool.read.ids("outbox")) == outbox

    @rule(h=st.integers(0, HOMES - 1), letter=st.integers(0, LETTERS - 1))
    def smtp_says_later(self, h: int, letter: int) -> None:
        """The claim is made, the submission answered 451: queued with its claim in flight."""
        parent = self._unread(h, letter)
        if parent is None:
            return
        self.servers.store.fail_next_data(1, 451)
        try:
            queued = self._client(h).reply(parent, "On it.", type="ack")
        finally:
            self.servers.store.fail_next_data(0)
        assert queued is None or queued.state == "outbox", queued

    # --- the judge: what the server received --------------------------------------------------

    def replies(self) -> dict[str, set[str]]:
        """Answered Message-ID -> the Message-IDs of beta's letters answering it (a letter
        submitted twice, after a crash, is one reply)."""
        found: dict[str, set[str]] = {}
        for accepted in self.servers.store.accepted:
            if accepted.login == "beta@bus.test":
                parsed = email.message_from_bytes(accepted.data)
                found.setdefault(str(parsed["In-Reply-To"]).strip(), set()).add(str(parsed["Message-ID"]).strip())
        return found

    def sent_by_homes(self) -> dict[str, str]:
        """Message-ID -> letter id of every letter some home (gone ones too) holds as sent."""
        found: dict[str, str] = {}
        for where in self.root.glob("h*"):
            with AgentMail(registry_mod.load(where / "registry"), Identity("beta"), where) as home:
                for letter_id in home.spool.read.ids("sent"):
                    found[home.spool.read.letter(letter_id, "sent").message_id] = letter_id
        return found

    @invariant()
    def never_two_replies(self) -> None:
        replies = self.replies()
        assert set(replies) <= set(self.ids)
        assert all(len(r) == 1 for r in replies.values()), replies

    def teardown(self) -> None:
        try:
            self.clock[0] += STALE_AFTER + 1
            for h in range(HOMES):
                self._client(h).flush()  # every machine back: what it left behind confirms first
            self._drop(0)
            self.homes[0] = self._join()
            fresh = self._client(0)  # a fresh home answers what is still unanswered
            for letter in fresh.inbox():
                if letter.message_id not in self.replies():
                    assert fresh.reply(letter, "On it.", type="ack") is not None, fresh.why_refused(letter)
            replies, sent = self.replies(), self.sent_by_homes()
            assert sorted(replies) == sorted(self.ids) and all(len(r) == 1 for r in replies.values()), replies
            for stored in self.servers.store.messages("beta@bus.test"):
                (reply,) = replies[_mid(stored.data)]
                marked = [f for f in stored.flags if f.startswith("$ams-")]
                assert len(marked) == 1, stored.flags  # answered once, on the server too
                part, gen = marked[0].split("-")[1:3]
                holder = sent[reply].lower()
                assert f"$amh-{part}-{gen}-{holder}" in stored.flags, (reply, stored.flags)
        finally:
            for h in range(HOMES):
                client = self.clients[h]
                if client is not None:
                    client.close()
            self.servers.close()
            shutil.rmtree(self.root, ignore_errors=True)


def _mid(data: bytes) -> str:
    return str(email.message_from_bytes(data)["Message-ID"]).strip()


TestImapMachines = ImapMachines.TestCase
TestImapMachines.settings = settings(max_examples=examples(40), stateful_step_count=12, deadline=None)


# --- the fallback, step by step: the server unreachable at the claim --------------------------


def _beta(home: Path) -> AgentMail:
    return AgentMail(registry_mod.load(home / "registry"), Identity("beta"), home)


def test_a_reply_whose_claim_could_not_be_made_is_claimed_at_submit_and_a_refused_login_files_nothing(
    tmp_path: Path,
) -> None:
    """Machine A cannot reach IMAP at the claim: its reply is queued (a normal return). B answers
    meanwhile: A's letter, flushed, fails naming B. And a second letter queued the same way,
    flushed before anyone else answers, is claimed then: B is refused. A login refused at the
    claim refuses the reply whole (nothing filed, the per-home claim free for the next try)."""
    base = tmp_path / "base"
    base.mkdir()
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as servers:
        reg = make_bus(base, servers, new_threads_per_hour=0)
        with AgentMail(reg, Identity("alpha"), base) as alpha:
            first, second, third = (alpha.send("beta", f"Quota {i}", OPENER).message_id for i in range(3))
        a_home, b_home = _fresh_home(base, tmp_path, "a"), _fresh_home(base, tmp_path, "b")
        with _beta(a_home) as a, _beta(b_home) as b:
            on_a = {x.message_id: x for x in a.inbox()}
            on_b = {x.message_id: x for x in b.inbox()}
            servers.stop_imap()
            queued = [a.reply(on_a[m], "On it.", type="ack") for m in (first, second)]
            servers.start_imap()
            q0, q1 = queued
            assert q0 is not None and q1 is not None and q0.state == q1.state == "outbox"
            assert all(m.login != "beta@bus.test" for m in servers.store.accepted)  # nothing left
            assert b.reply(on_b[first], "Mine.", type="ack") is not None  # A holds no claim on the server yet
            assert isinstance(a.transport, SmtpImapTransport)
            a.transport._drop()  # A's next command connects anew
            a.flush()
            assert a.spool.read.locate(q0.id) == "failed"
            assert "answered meanwhile (by beta" in a.spool.read.annotations(q0.id)["failed_reason"]
            assert a.spool.read.locate(q1.id) == "sent"  # claimed at submit
            assert b.reply(on_b[second], "Mine.", type="ack") is None
            assert "already answered (by beta" in (b.why_refused(on_b[second]) or "")
            assert isinstance(b.transport, SmtpImapTransport)
            b.transport._drop()
            servers.store.refuse_logins()  # the claim must log in, and cannot: refused whole
            with pytest.raises(ConfigError, match="refused the login"):
                b.reply(on_b[third], "Mine.", type="ack")
            servers.store.refuse_logins(False)
            assert (
                b.spool.read.ids("outbox") == [] and b.reply(on_b[third], "Mine.", type="ack") is not None
            )  # left free
        answers = [
            email.message_from_bytes(m.data)["In-Reply-To"]
            for m in servers.store.accepted
            if m.login == "beta@bus.test"
        ]
        assert sorted(answers) == sorted([first, second, third])  # one reply each
