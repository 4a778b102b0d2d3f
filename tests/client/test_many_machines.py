"""Reply claims across homes and machines of one platform (issue 25): the post office's claims, the IMAP claim, and the wired reply path."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.transport import open_transport
from agentmail.transport.base import Transport
from agentmail.transport.claim_marks import MAX_KEYWORD, STALE_AFTER, Claims, ImapClaim
from agentmail.transport.local import LocalTransport
from agentmail.transport.smtpimap import NO_CONDSTORE, SmtpImapTransport

from ..conftest import OPENER
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import USERS, make_bus

RACER = """
import json, sys
from pathlib import Path
from agentmail.transport.claim_marks import Claims
root, me, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sys.stdin.readline()  # start together
won = [i for i in range(n) if Claims(root).claim(f"<letter-{i}@alpha.test>", me) is None]
print(json.dumps(won))
"""


def test_two_processes_racing_50_letters_each_won_once(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(tmp_path), f"home{h} R{h}", "50"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for h in range(2)
    ]
    outs = [p.communicate("go\n", timeout=60)[0] for p in procs]
    won = [set(json.loads(o)) for o in outs]
    assert won[0].isdisjoint(won[1]) and won[0] | won[1] == set(range(50))
    claims = Claims(tmp_path)
    for i in range(50):
        winner = "home0 R0" if i in won[0] else "home1 R1"
        assert claims.holder(f"<letter-{i}@alpha.test>") == winner
        loser = "home1 R1" if winner == "home0 R0" else "home0 R0"
        assert claims.claim(f"<letter-{i}@alpha.test>", loser) == winner  # the loser is told who


def test_a_dead_homes_claim_is_taken_over_after_the_stated_time_once(tmp_path: Path) -> None:
    clock = [1_000.0]
    a = Claims(tmp_path, stale_after=600, now=lambda: clock[0])
    b = Claims(tmp_path, stale_after=600, now=lambda: clock[0])
    c = Claims(tmp_path, stale_after=600, now=lambda: clock[0])
    assert a.claim("<x@t>", "A r1") is None  # then A dies before sending
    clock[0] += 599
    assert b.claim("<x@t>", "B r2") == "A r1"  # still in flight
    clock[0] += 2
    assert b.claim("<x@t>", "B r2") is None  # taken over
    assert c.claim("<x@t>", "C r3") == "B r2"  # exactly once
    assert b.sent("<x@t>", "B r2")
    assert not a.sent("<x@t>", "A r1")  # A's late reply is told it lost the claim
    clock[0] += 10_000
    assert c.claim("<x@t>", "C r3") == "B r2"  # a sent claim is never taken over


def test_a_sent_claim_holds_for_ever_and_the_holder_may_ask_again(tmp_path: Path) -> None:
    claims = Claims(tmp_path, now=lambda: 0.0)
    assert claims.claim("<y@t>", "A r1") is None
    assert claims.claim("<y@t>", "A r1") is None
    assert claims.sent("<y@t>", "A r1")
    assert claims.claim("<y@t>", "A r1") == "A r1"  # answered: not even its holder answers twice
    assert Claims(tmp_path, now=lambda: 1e9).claim("<y@t>", "B r2") == "A r1"


class Homes(RuleBasedStateMachine):
    """Several homes reply / send / crash / rejoin: never two sent replies to one letter, and
    every letter ends answerable or answered (nothing lost)."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.dir = Path(tempfile.mkdtemp())
        self.clock = 0.0
        self.live: dict[str, str | None] = {}  # home -> letter it holds a claim on, unsent
        self.sent: dict[str, list[str]] = {}  # letter -> homes whose reply went out

    def claims(self) -> Claims:
        return Claims(self.dir, stale_after=60, now=lambda: self.clock)

    @rule(home=st.sampled_from("ABC"), letter=st.sampled_from(["<1@t>", "<2@t>", "<3@t>"]))
    def reply(self, home: str, letter: str) -> None:
        if self.claims().claim(letter, home) is None:
            self.live[home] = letter

    @rule(home=st.sampled_from("ABC"))
    def send(self, home: str) -> None:
        letter = self.live.pop(home, None)
        if letter and self.claims().sent(letter, home):
            self.sent.setdefault(letter, []).append(home)

    @rule(home=st.sampled_from("ABC"))
    def crash(self, home: str) -> None:
        self.live.pop(home, None)  # its claim stays on disk, never sent

    @rule(seconds=st.sampled_from([1.0, 30.0, 61.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock += seconds

    @invariant()
    def never_two_replies(self) -> None:
        assert all(len(set(homes)) == len(homes) == 1 for homes in self.sent.values())

    @invariant()
    def nothing_lost(self) -> None:
        for letter in ["<1@t>", "<2@t>", "<3@t>"]:
            if letter not in self.sent:  # unanswered: some home can still win it in time
                later = Claims(self.dir, stale_after=60, now=lambda: self.clock + 61)
                holder = later.holder(letter)
                assert later.claim(letter, holder or "Z") is None
                if holder is None:
                    for gen in self.dir.glob(Claims.key(letter) + ".*"):
                        gen.unlink()  # the probe's own claim: undo it


TestHomes = Homes.TestCase
TestHomes.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


# --- the IMAP claim's keywords ----------------------------------------------------------------

ULIDS = st.text("0123456789ABCDEFGHJKMNPQRSTVWXYZ", min_size=26, max_size=26)


@given(key=st.text(max_size=80), mailbox=st.text(max_size=80), reply=ULIDS, at=st.floats(1e6, 4e9))
def test_imap_claim_keywords_fit_dovecot_and_read_back_as_the_same_claim(
    key: str, mailbox: str, reply: str, at: float
) -> None:
    words = ImapClaim(key, (), now=at).keywords(0, f"{mailbox} {reply}")
    assert all(len(w) <= MAX_KEYWORD and re.fullmatch(r"\$[A-Za-z0-9@._+-]+", w) for w in words)
    back = ImapClaim(key, [w.encode() for w in words], now=at + 1)
    assert back.generation == 0 and back.holders[0] == reply
    assert back.decide(f"{mailbox} {reply}") == (None, [])  # its holder sees it as its own
    who, add = back.decide("other " + ("1" * 26 if reply != "1" * 26 else "2" * 26))
    assert who == back.who() and who.endswith(reply) and add == []  # in flight: another is told who
    assert ImapClaim(key + "x", [w.encode() for w in words], now=at).generation == -1  # another key's claim


@given(flags=st.lists(st.one_of(st.binary(max_size=60), st.text(max_size=60))), key=st.text(max_size=20))
def test_imap_claim_reads_any_flags_a_server_sends_without_failing(flags: list[object], key: str) -> None:
    state = ImapClaim(key, flags, now=1e9)
    who, add = state.decide("beta 01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert (who is None) or isinstance(who, str)
    assert all(len(w) <= MAX_KEYWORD for w in add)


def test_an_imap_claim_is_taken_over_after_the_stated_time_and_a_sent_one_never() -> None:
    a, b = "beta@laptop 01ARZ3NDEKTSV4RRFFQ69G5FAV", "beta@ci 01BX5ZZKBKACTAV9WEVGEMMVRZ"
    flags = [w.encode() for w in ImapClaim("<x@t>", (), now=1e6).keywords(0, a)]
    assert ImapClaim("<x@t>", flags, now=1e6 + 599).decide(b)[0] == f"beta@laptop {a.split()[1]}"
    who, add = ImapClaim("<x@t>", flags, now=1e6 + 601).decide(b)
    assert who is None and add[0].startswith(f"$amc-{ImapClaim('<x@t>', (), now=0).part}-1-")  # the next generation
    flags += [w.encode() for w in add]
    assert ImapClaim("<x@t>", flags, now=1e6 + 602).sent_keyword(a) is None  # A's late reply is told it lost
    sent = ImapClaim("<x@t>", flags, now=1e6 + 602).sent_keyword(b)
    assert sent is not None
    flags.append(sent.encode())
    assert ImapClaim("<x@t>", flags, now=1e9).decide(a)[0] == f"beta@ci {b.split()[1]}"  # answered: for ever


# --- two machines of one platform, wired: the whole reply path -----------------------------------

WORKER = Path(__file__).parents[1] / "helpers" / "reply_worker.py"


def _second_home(home: Path, tmp_path: Path, name: str, *, share_postoffice: bool = False) -> Path:
    """Another machine of the same platforms: the same registry, keys and logins, its own spool."""
    other = tmp_path / name
    shutil.copytree(home, other, ignore=shutil.ignore_patterns("spool", "postoffice"))
    if share_postoffice:
        (other / "postoffice").symlink_to(home / "postoffice")
    return other


def _race(homes: list[tuple[Path, str]], message_ids: list[str], tmp_path: Path) -> list[list[dict[str, object]]]:
    """One reply_worker per home, all started at once on the same letters, in the same order."""
    procs = []
    for i, (where, agent) in enumerate(homes):
        env = {**os.environ, "AGENTMAIL_HOME": str(where)}
        out = tmp_path / f"race{i}.json"
        procs.append((out, subprocess.Popen(
            [sys.executable, str(WORKER), "beta", agent, str(out), *message_ids],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )))  # fmt: skip
    try:
        for _, proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for _, proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for _, proc in procs:
            assert proc.wait(timeout=600) == 0
    finally:
        for _, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
    return [json.loads(out.read_text())["results"] for out, _ in procs]


def _replies_sent(servers: MailServers, message_id: str) -> int:
    return sum(
        1 for m in servers.store.accepted
        if m.login == "beta@bus.test" and f"In-Reply-To: {message_id}".encode() in m.data
    )  # fmt: skip


def _check_race(results: list[list[dict[str, object]]], message_ids: list[str], sent: Callable[[str], int]) -> None:
    duplicates = lost = 0
    for i, message_id in enumerate(message_ids):
        codes = sorted(int(str(r[i]["exit"])) for r in results)
        losers = [str(r[i]["stderr"]) for r in results if r[i]["exit"] == 4]
        assert codes == [0, 4] and "already answered (by beta@" in losers[0] and losers[0].count("\n") == 1, (
            i,
            results,
        )
        duplicates += sent(message_id) > 1
        lost += sent(message_id) == 0
    wins = [sum(r[i]["exit"] == 0 for i in range(len(message_ids))) for r in results]
    print(
        f"race: {len(message_ids)} letters, {len(results)} machines, wins {wins}, duplicates {duplicates}, lost {lost}"
    )
    assert duplicates == lost == 0


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def test_two_machines_on_one_imap_mailbox_race_replies_to_50_letters_one_reply_each(
    home: Path, tmp_path: Path, servers: MailServers
) -> None:
    reg = make_bus(home, servers, new_threads_per_hour=0)
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        ids = [alpha.send("beta", f"Quota {i}", OPENER).message_id for i in range(50)]
    other = _second_home(home, tmp_path, "machine2")
    results = _race([(home, "laptop"), (other, "ci")], ids, tmp_path)
    _check_race(results, ids, lambda m: _replies_sent(servers, m))
    inbox = servers.store.messages("beta@bus.test")
    assert len(inbox) == 50  # nothing added to the INBOX a person reads: the claims are keywords
    assert all(sum(f.startswith("$ams-") for f in m.flags) == 1 for m in inbox)  # each answered, once


def test_two_homes_on_one_post_office_race_replies_to_50_letters_one_reply_each(
    home: Path, tmp_path: Path, registry: Registry
) -> None:
    with AgentMail(registry, Identity("alpha"), home) as alpha:
        ids = [alpha.send("beta", f"Quota {i}", OPENER).message_id for i in range(50)]
    other = _second_home(home, tmp_path, "machine2", share_postoffice=True)
    results = _race([(home, "laptop"), (other, "ci")], ids, tmp_path)
    alpha_box = home / "postoffice" / "alpha"
    answers = [p.read_bytes() for d in ("new", "cur") for p in (alpha_box / d).glob("*")]
    _check_race(results, ids, lambda m: sum(f"In-Reply-To: {m}".encode() in raw for raw in answers))


KILLED = """
import os, signal, sys
from agentmail.spool import db
from agentmail.client.facade import AgentMail
am = AgentMail.from_env("beta", agent="laptop")
(letter,) = am.inbox()
db.crash_point = lambda point: point == "stored" and os.kill(os.getpid(), signal.SIGKILL)
am.reply(letter, "Reproduced; fixing.", type="ack")
"""


def _killed_between_claim_and_send(home: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", KILLED], env={**os.environ, "AGENTMAIL_HOME": str(home)}, timeout=120)
    assert proc.returncode == -signal.SIGKILL


def _takeover(home: Path, other: Path, transport: Transport, clock: list[float], sent: Callable[[], int]) -> None:
    """Machine A died between claim and send; B is refused until the stated time, then answers
    once; A, back, never sends its reply."""
    reg2 = registry_mod.load(other / "registry")
    with AgentMail(reg2, Identity("beta", "ci"), other, transport=transport) as b:
        (letter,) = b.inbox()
        clock[0] = time.time() + STALE_AFTER - 5
        assert b.reply(letter, "Mine now.", type="ack") is None
        assert "already answered (by beta@laptop, letter" in (b.why_refused(letter) or "")
        clock[0] = time.time() + STALE_AFTER + 5
        assert b.reply(letter, "Mine now.", type="ack") is not None
    assert sent() == 1
    reg1 = registry_mod.load(home / "registry")
    with AgentMail(reg1, Identity("beta", "laptop"), home) as a:
        (stuck,) = a.spool.read.ids("outbox")
        assert a.flush() == []
        assert a.spool.read.locate(stuck) == "failed"
        assert "answered meanwhile (by beta@ci" in a.spool.read.annotations(stuck)["failed_reason"]
    assert sent() == 1


def test_an_imap_machine_killed_between_claim_and_send_is_taken_over_after_the_stated_time_once(
    home: Path, tmp_path: Path, servers: MailServers
) -> None:
    reg = make_bus(home, servers)
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        mid = alpha.send("beta", "Quota", OPENER).message_id
    other = _second_home(home, tmp_path, "machine2")
    _killed_between_claim_and_send(home)
    clock = [0.0]
    transport = SmtpImapTransport.from_registry(registry_mod.load(other / "registry"), "beta", other)
    transport.now = lambda: clock[0]
    _takeover(home, other, transport, clock, lambda: _replies_sent(servers, mid))


def test_a_post_office_home_killed_between_claim_and_send_is_taken_over_after_the_stated_time_once(
    home: Path, tmp_path: Path, registry: Registry
) -> None:
    with AgentMail(registry, Identity("alpha"), home) as alpha:
        mid = alpha.send("beta", "Quota", OPENER).message_id
    other = _second_home(home, tmp_path, "machine2", share_postoffice=True)
    _killed_between_claim_and_send(home)
    clock = [0.0]
    transport = open_transport(registry_mod.load(other / "registry"), "beta", other)
    assert isinstance(transport, LocalTransport)
    transport.claims.now = lambda: clock[0]
    box = home / "postoffice" / "alpha"
    _takeover(home, other, transport, clock,
              lambda: sum(f"In-Reply-To: {mid}".encode() in p.read_bytes() for d in ("new", "cur") for p in (box / d).glob("*")))  # fmt: skip


def _reply_costs(home: Path, servers: MailServers, *, condstore: bool, n: int = 5) -> tuple[int, float]:
    """(IMAP commands, ms) of ``n`` replies, each from a fresh process's view (a new client)."""
    servers.store.condstore = condstore
    reg = make_bus(home, servers, new_threads_per_hour=0)
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        for i in range(n):
            alpha.send("beta", f"Quota {i}", OPENER)
    with AgentMail(reg, Identity("beta"), home) as beta:
        letters = beta.inbox()
    servers.store.reset_counts()
    started = time.perf_counter()
    for letter in letters:
        with AgentMail(reg, Identity("beta"), home) as beta:
            answer = beta.reply(letter.id, "On it.", type="ack")
            assert answer is not None
            warnings = answer.notices
        assert (NO_CONDSTORE in warnings) == (not condstore)  # said, in one line, when it cannot claim
    ms = (time.perf_counter() - started) * 1000 / n
    commands = sum(v for k, v in servers.store.counts.items() if k.startswith("imap.") and k != "imap.connect")
    return commands // n, ms


def test_what_a_claim_costs_per_reply_and_a_server_without_condstore_claims_per_machine(
    home: Path, tmp_path: Path
) -> None:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as plain:
        without, ms_without = _reply_costs(home, plain, condstore=False)
        assert not any(f.startswith("$am") for m in plain.store.messages("beta@bus.test") for f in m.flags)  # none made
    second = tmp_path / "second"
    second.mkdir()
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        with_claims, ms_with = _reply_costs(second, ms, condstore=True)
        assert all(sum(f.startswith("$ams-") for f in m.flags) == 1 for m in ms.store.messages("beta@bus.test"))
    print(f"per reply: {without} IMAP commands and {ms_without:.1f} ms without a claim, "
          f"{with_claims} and {ms_with:.1f} ms with one (+{with_claims - without} round trips)")  # fmt: skip
    assert with_claims - without == 7  # claim: SELECT, SEARCH, FETCH, STORE; sent: SELECT, FETCH, STORE (DESIGN §10)


# --- the wired path under a state machine: homes reply, crash, rejoin, time passes ------------


class Killed(BaseException):
    """The process dies here (raised from the spool's crash-point hook, never caught by agentmail)."""


class Machines(RuleBasedStateMachine):
    """Three homes of beta on one post office answer alpha's letters through ``AgentMail.reply``;
    a home may die right after its reply was claimed and filed (before it left), come back and
    flush, while time passes. Never two replies to one letter; at the end, with the stated time
    past, every letter is answered exactly once (nothing lost)."""

    LETTERS = 3

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        from agentmail.admin import bus

        self.root = Path(tempfile.mkdtemp())
        base = self.root / "h0"
        base.mkdir()
        reg = bus.init(base, base / "registry", ["alpha", "beta"], domain="bus.test",
                       endpoints={"new_threads_per_hour": 0})  # fmt: skip
        with AgentMail(reg, Identity("alpha"), base) as alpha:
            self.ids = [alpha.send("beta", f"Quota {i}", OPENER).message_id for i in range(self.LETTERS)]
        self.homes = [base] + [_second_home(base, self.root, f"h{i}", share_postoffice=True) for i in (1, 2)]
        self.clock = [time.time()]
        self.clients: list[AgentMail | None] = [None, None, None]
        self.armed = False

    def _client(self, h: int) -> AgentMail:
        if self.clients[h] is None:
            reg = registry_mod.load(self.homes[h] / "registry")
            transport = open_transport(reg, "beta", self.homes[h])
            assert isinstance(transport, LocalTransport)
            transport.claims.now = lambda: self.clock[0]
            self.clients[h] = AgentMail(reg, Identity("beta"), self.homes[h], transport=transport)
        client = self.clients[h]
        assert client is not None
        return client

    def _reply(self, h: int, letter: int) -> None:
        client = self._client(h)
        mine = {x.message_id: x for x in client.inbox()}
        if self.ids[letter] in mine:
            client.reply(mine[self.ids[letter]], "On it.", type="ack")

    @rule(h=st.integers(0, 2), letter=st.integers(0, LETTERS - 1))
    def reply(self, h: int, letter: int) -> None:
        self._reply(h, letter)

    @rule(h=st.integers(0, 2), letter=st.integers(0, LETTERS - 1))
    def crash_between_claim_and_send(self, h: int, letter: int) -> None:
        from agentmail.spool import db

        def die(point: str) -> None:
            if point == "stored" and self.armed:
                raise Killed

        client = self._client(h)
        mine = {x.message_id: x for x in client.inbox()}
        if self.ids[letter] not in mine:
            return
        db.crash_point, self.armed = die, True
        try:
            client.reply(mine[self.ids[letter]], "On it.", type="ack")
        except Killed:
            pass
        finally:
            db.crash_point, self.armed = None, False
        client.close()
        self.clients[h] = None  # dead; its home keeps what was on disk

    @rule(h=st.integers(0, 2))
    def rejoin(self, h: int) -> None:
        self._client(h).flush()

    @rule(seconds=st.sampled_from([1.0, 300.0, STALE_AFTER + 1]))
    def time_passes(self, seconds: float) -> None:
        self.clock[0] += seconds

    def replies(self, message_id: str) -> int:
        box = self.homes[0] / "postoffice" / "alpha"
        return sum(
            f"In-Reply-To: {message_id}".encode() in p.read_bytes() for d in ("new", "cur") for p in (box / d).glob("*")
        )

    @invariant()
    def never_two_replies(self) -> None:
        assert all(self.replies(m) <= 1 for m in self.ids)

    def teardown(self) -> None:
        try:
            self.clock[0] += STALE_AFTER + 1
            for h in range(3):
                self._client(h).flush()  # every home back; what it left behind confirms first
            for letter, message_id in enumerate(self.ids):
                if self.replies(message_id) == 0:
                    self._reply(letter % 3, letter)
                assert self.replies(message_id) == 1, f"letter {letter}: {self.replies(message_id)} replies"
        finally:
            for client in self.clients:
                if client is not None:
                    client.close()
            shutil.rmtree(self.root, ignore_errors=True)


TestMachines = Machines.TestCase
TestMachines.settings = settings(max_examples=15, stateful_step_count=12, deadline=None)
