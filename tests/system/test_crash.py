"""Crash safety with real SIGKILLs (DESIGN §7): "a crash at any instant leaves each letter
complete or absent, never both, never torn", and the checkpoint moves only after the commit.

Each scenario runs the real code in a separate process and kills it with SIGKILL many times,
then checks every letter on disk: each Message-ID exactly once, in exactly one state, byte for
byte what was sent, nothing quarantined. Kills land at seeded random instants and, where a
scenario must prove a number of mid-way deaths, at chosen points too; no loop ends on a clock
and nothing asserts how much a victim got done in some time (CI runs on a busy machine).

The victims are forked from tests/helpers/crash_zygote.py, which has already imported
agentmail: a fresh interpreter needs ~250 ms before it touches a letter, which would put every
"5-80 ms" kill inside ``import``. No mocks: the children use ``AgentMail.from_env`` on the
test's AGENTMAIL_HOME, the same files the assertions read.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from email.parser import BytesHeaderParser
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry, load
from agentmail.model import new_thread_id
from agentmail.spool import STATES, Spool
from agentmail.stages.compose import Draft, compose
from agentmail.transport.local import Mailbox, deliver

from ..conftest import make_signed_letters
from ..depth import THOROUGH

OPENER = """\
I am the agent of alpha (billing); we call beta's /quota endpoint for every invoice.
Reproduction: `curl -s https://beta.example/quota?id=7` returns status 500 with the output
"KeyError: 'plan'" since version 2.4.1 (2026-11-28). Expected 200 per the documented contract.
Blast radius: all invoices for users on the free plan. Please fix or tell us the new contract.
"""
ZYGOTE = Path(__file__).parents[1] / "helpers" / "crash_zygote.py"
SEED = 20261129
KILL_DELAY = (0.005, 0.080)  # seconds after the child was forked
HANG = 300  # seconds: only a hung worker takes this long, however busy the machine


# --- helpers ------------------------------------------------------------------------------


class Zygote:
    """Drives tests/helpers/crash_zygote.py: fork a worker, SIGKILL it, reap it."""

    def __init__(
        self, home: Path, mode: str, platform: str, agent: str | None = None, *args: str, log: Path | None = None
    ) -> None:
        env = dict(os.environ, AGENTMAIL_HOME=str(home))
        env.pop("AGENTMAIL_PLATFORM", None)
        if log is not None:
            env["CRASH_LOG"] = str(log)
        self.stderr_path = home.parent / f"zygote-{mode}-{platform}-{os.getpid()}-{id(self)}.err"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(ZYGOTE), mode, platform, agent or "-", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            bufsize=0,
        )
        self._buf = b""
        assert self._line(60) == "ready", self.errors()

    def errors(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def _line(self, timeout: float = HANG) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise AssertionError(f"crash_zygote did not answer within {timeout}s: {self.errors()}")
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise AssertionError(f"crash_zygote died: {self.errors()}")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode().strip()

    def _cmd(self, text: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{text}\n".encode())
        return self._line()

    def run_and_kill(self, delay: float, after: Callable[[], bool] | None = None, what: Callable[[], str] = str) -> str:
        """Fork a worker, let it run ``delay`` s (counted from when ``after()`` is true, if
        given), SIGKILL it; "signal 9", or "exit N" if it finished first (the pid is ours
        until reaped, so the kill can never hit a stranger)."""
        pid = int(self._cmd("fork"))
        deadline = time.monotonic() + HANG
        while after is not None and not after():
            if time.monotonic() > deadline:  # a hang, not a slow machine: fail with the state
                os.kill(pid, signal.SIGKILL)
                self._cmd(f"reap {pid}")
                raise AssertionError(f"the worker never {what()} within {HANG} s: {self.errors()}")
            time.sleep(0.002)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        return self._cmd(f"reap {pid}")

    def kill_at(self, calls: int) -> str:
        """Fork a worker and SIGKILL it at a chosen point: right after its ``calls``-th claiming
        call returned, before it logged what that call claimed (see crash_zygote.py)."""
        pid = int(self._cmd(f"fork {calls}"))
        try:
            said = self._line(HANG)
        finally:
            os.kill(pid, signal.SIGKILL)
            outcome = self._cmd(f"reap {pid}")
        assert said == "paused", (said, outcome, self.errors())
        return outcome

    def run_to_end(self) -> str:
        """Fork a worker and let it finish: "exit N"."""
        pid = int(self._cmd("fork"))
        return self._cmd(f"reap {pid}")

    def close(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.write(b"quit\n")
                self.proc.stdin.close()
            self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()  # else left to the collector: a ResourceWarning in a later test
            self._stderr.close()

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def signed_letters(sender: AgentMail, to: str, n: int) -> list[tuple[str, bytes]]:
    return make_signed_letters(sender, to, n, "crash")


def message_id(path: Path) -> str:
    with open(path, "rb") as f:
        value = BytesHeaderParser().parse(f)["Message-ID"]
    assert value, f"{path} has no Message-ID (torn?)"
    return str(value).strip()


def states(spool_root: Path) -> dict[str, dict[str, str]]:
    """state -> {local id: Message-ID}: each letter's state from spool.db (a fresh connection),
    its Message-ID read straight from its .eml file."""
    spool = Spool(spool_root)
    try:
        return {state: {i: message_id(spool.read.path(state, i)) for i in spool.read.ids(state)} for state in STATES}
    finally:
        spool.db.close()


def assert_one_state_each(tree: dict[str, dict[str, str]]) -> None:
    where = Counter(i for ids in tree.values() for i in ids)
    twice = sorted(i for i, c in where.items() if c > 1)
    assert not twice, f"letters in two states at once: {twice[:5]}"


# --- 1. killed while syncing --------------------------------------------------------------


N_SYNC = 300
BACKLOG = 12  # letters the post office may be ahead of the victims


def test_sigkill_during_sync_files_every_letter_exactly_once(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    letters = signed_letters(alpha, "beta", N_SYNC)
    expected = dict(letters)
    assert len(expected) == N_SYNC
    maildir = home / "postoffice" / "beta"
    watcher = Spool(beta.spool.root)  # the postman's own view of the spool

    def unread() -> int:
        return len(watcher.read.ids("unread"))

    rng = random.Random(SEED)
    pace = random.Random(SEED + 1)
    delivered = threading.Event()
    stop = threading.Event()
    sent = [0]

    def postman() -> None:
        """The MTA keeps delivering while the syncer dies and restarts, staying at most
        BACKLOG letters ahead of what is filed, so the kills land all along the 300 letters."""
        for n, (_, raw) in enumerate(letters):
            while not stop.is_set() and n - unread() >= BACKLOG:
                time.sleep(0.002)
            deliver(maildir, raw)
            sent[0] = n + 1
            time.sleep(pace.uniform(0, 0.004))
        delivered.set()

    def checkpointed() -> int:
        return int((beta.spool.read.checkpoint("local") or ":0").rpartition(":")[2])

    outcomes: list[str] = []
    with Zygote(home, "sync", "beta") as zygote:
        thread = threading.Thread(target=postman, daemon=True)
        thread.start()
        try:
            # Ends on the work done, never on a clock: the long lives below always move the
            # checkpoint, so the postman always gets to the end.
            while not delivered.is_set() or len(outcomes) < 8:
                if rng.random() < 0.25:
                    # Now and then a life long enough to commit all it was given and move the
                    # checkpoint (then killed a random instant later): a syncer killed every
                    # time before its batch commits re-judges the same letters for ever.
                    target = sent[0]
                    outcomes.append(
                        zygote.run_and_kill(
                            rng.uniform(*KILL_DELAY),
                            lambda target=target: checkpointed() >= target,
                            lambda target=target: (
                                f"moved the checkpoint to the {target} letters delivered (it is at "
                                f"{checkpointed()}; {unread()} filed)"
                            ),
                        )
                    )
                else:
                    outcomes.append(zygote.run_and_kill(rng.uniform(*KILL_DELAY)))
        finally:
            stop.set()
            thread.join()
        for _ in range(5):  # and while it works through what is left
            outcomes.append(zygote.run_and_kill(rng.uniform(*KILL_DELAY)))
        errors = zygote.errors()
    assert set(outcomes) == {"signal 9"}, (Counter(outcomes), errors)
    assert len(outcomes) >= 8

    spool = beta.spool.root
    filed_by_victims = unread()

    report = beta.sync()  # a clean run after the last crash
    assert report.quarantined == [] and report.bounces == 0
    assert len(report.accepted) == N_SYNC - filed_by_victims

    tree = states(spool)
    assert_one_state_each(tree)
    assert {s for s, ids in tree.items() if ids} == {"unread"}, {s: len(ids) for s, ids in tree.items()}
    counts = Counter(tree["unread"].values())
    assert [m for m, c in counts.items() if c > 1] == [], "a letter was filed twice"
    assert set(counts) == set(expected), (len(set(expected) - set(counts)), len(set(counts) - set(expected)))
    assert len(tree["unread"]) == N_SYNC
    for letter_id, mid in tree["unread"].items():
        assert beta.spool.read.path("unread", letter_id).read_bytes() == expected[mid], f"{letter_id} is torn"
        meta = beta.spool.read.meta(letter_id)
        assert (meta["message_id"], meta["from"], meta["state"]) == (mid, "alpha", "unread")

    # What a kill left in tmp/ is no letter: never in a state, never shown.
    leftovers = {n[:-4] for n in os.listdir(spool / "tmp") if n.endswith(".eml")}
    assert not leftovers & set(tree["unread"])
    shown = beta.inbox(sync=False)
    assert sorted(x.message_id for x in shown) == sorted(expected)
    assert all(x.sender == "alpha" and x.state == "unread" for x in shown)

    # The post office gave every letter one UID and no UID twice, and the checkpoint covers them
    # all. (A syncer killed among its renames leaves the UIDs it had reserved for the letters
    # still in new/ unused: those get later ones, so the UIDs need not be 1..N without a gap.)
    mailbox = Mailbox(maildir)
    assert os.listdir(maildir / "new") == []
    uids = sorted(int(n.split(":")[0]) for n in os.listdir(maildir / "cur"))
    assert len(uids) == len(set(uids)) == N_SYNC
    assert beta.spool.read.checkpoint("local") == f"{mailbox.uidvalidity}:{uids[-1]}"

    again = beta.sync()
    assert (again.accepted, again.duplicates, again.quarantined) == ([], 0, [])
    # The victims did the bulk of the work: the kills landed in real syncing, all along.
    assert filed_by_victims >= N_SYNC - 2 * BACKLOG, f"the syncers made no progress between kills: {filed_by_victims}"
    print(
        f"\nsync crash: {len(outcomes)} kills, {filed_by_victims}/{N_SYNC} filed by the victims, "
        f"{len(leftovers)} torn files left in tmp/"
    )


# --- 2. killed while consuming ------------------------------------------------------------


N_CONSUME = 200


def test_sigkill_during_consume_leaves_each_letter_in_one_state(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    letters = signed_letters(alpha, "beta", N_CONSUME)
    for _, raw in letters:
        deliver(home / "postoffice" / "beta", raw)
    assert len(beta.sync().accepted) == N_CONSUME
    spool = beta.spool.root
    before = states(spool)["unread"]
    assert sorted(before.values()) == sorted(mid for mid, _ in letters)

    log = home.parent / "claims.log"
    rng = random.Random(SEED + 2)
    kills = 0
    with Zygote(home, "consume", "beta", log=log) as consume, Zygote(home, "done", "beta", log=log) as done:
        # Chosen points first, so the kills this test proves never depend on the machine's
        # speed: each victim dies right after a claiming call, before it could report what it
        # claimed (at most 3 + 10 + 9 + 5 letters, far from emptying the inbox).
        for calls, zygote in [(1, consume), (2, done), (3, consume), (1, done)]:
            assert zygote.kill_at(calls) == "signal 9", zygote.errors()
            kills += 1
        # Then random instants, which land inside the calls (a batch half renamed): a bounded
        # number of tries, however many of them happen to finish first.
        finished = False
        for _ in range(40):
            zygote = consume if rng.random() < 0.5 else done
            delay = rng.uniform(0.0005, 0.010) if rng.random() < 0.8 else rng.uniform(0.02, 0.1)
            outcome = zygote.run_and_kill(delay)
            if outcome == "exit 0":
                finished = True
                break
            assert outcome == "signal 9", (outcome, zygote.errors())
            kills += 1
        if not finished:  # and a last one left to empty the inbox, however slow the machine
            assert consume.run_to_end() == "exit 0", consume.errors()
    assert kills >= 4

    tree = states(spool)
    assert_one_state_each(tree)
    assert tree["unread"] == {}, "an unread letter survived a consumer that reported the inbox empty"
    assert tree["read"] == before, "a letter was lost, duplicated or changed on its way unread -> read"
    assert {s for s, ids in tree.items() if ids} == {"read"}

    claims = log.read_text().split() if log.exists() else []
    twice = [i for i, c in Counter(claims).items() if c > 1]
    assert twice == [], f"handed out twice (at-most-once broken): {twice}"
    assert set(claims) <= set(before)
    # Claimed by a process that died before it could say so: at most one call's worth per kill.
    unreported = set(before) - set(claims)
    assert len(unreported) <= 5 * kills, (len(unreported), kills)
    print(f"\nconsume crash: {kills} kills, {len(unreported)} letters claimed by a victim before it logged them")


# --- 3. killed while sending --------------------------------------------------------------


N_SEND = 60


def test_sigkill_during_send_outbox_then_flush_delivers_each_once(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    rng = random.Random(SEED + 3)
    spool = alpha.spool.root
    outcomes = []

    watcher = Spool(spool)

    def count(*states: str) -> int:
        return sum(len(watcher.read.ids(s)) for s in states)

    with Zygote(home, "send", "alpha", None, "beta") as zygote:
        # Ends on the work done, never on a clock: every long life below adds a letter.
        while len(outcomes) < 30 or count("outbox", "sent") < N_SEND:
            if rng.random() < 0.25:
                # Now and then a life long enough to flush everything queued so far and write one
                # more letter (then killed a random instant later): see
                # test_flush_interrupted_midway_keeps_what_it_delivered.
                target = count("outbox", "sent")
                outcomes.append(
                    zygote.run_and_kill(
                        rng.uniform(*KILL_DELAY),
                        lambda target=target: count("sent") >= target and count("outbox", "sent") > target,
                        lambda target=target: (
                            f"flushed the {target} letters queued and wrote one more ({count('sent')} sent)"
                        ),
                    )
                )
            else:
                outcomes.append(zygote.run_and_kill(rng.uniform(*KILL_DELAY)))
        errors = zygote.errors()
    assert set(outcomes) == {"signal 9"}, (Counter(outcomes), errors)

    tree = states(spool)
    assert_one_state_each(tree)
    mine = {**tree["outbox"], **tree["sent"]}
    assert tree["failed"] == {} and tree["unread"] == {} and tree["quarantine"] == {}
    assert len(mine) >= N_SEND
    assert sorted(Counter(mine.values()).values()) == [1] * len(mine), "one Message-ID under two ids"
    queued = set(tree["outbox"])

    results = alpha.flush()
    assert sorted(r.key for r in results) == sorted(queued)
    assert {r.status for r in results} <= {"sent"}
    after = states(spool)
    assert after["outbox"] == {}
    assert after["sent"] == mine, "flush lost, duplicated or renamed a letter"
    for letter in alpha.sent():
        assert letter.state == "sent" and letter.to == "beta"

    report = beta.sync()
    assert report.quarantined == []
    received = states(beta.spool.root)["unread"]
    assert sorted(received.values()) == sorted(mine.values()), "beta's letters differ from what alpha sent"
    by_mid = {mid: letter_id for letter_id, mid in mine.items()}
    for letter_id, mid in received.items():
        sent_raw = alpha.spool.read.path("sent", by_mid[mid]).read_bytes()
        assert beta.spool.read.path("unread", letter_id).read_bytes() == sent_raw

    # A kill between delivery and outbox -> sent makes flush deliver again; an MTA may also
    # deliver twice. Either way the receiver files each Message-ID once.
    deliveries = len(os.listdir(home / "postoffice" / "beta" / "cur"))
    assert deliveries == len(mine) + report.duplicates
    for letter_id in mine:
        deliver(home / "postoffice" / "beta", alpha.spool.read.path("sent", letter_id).read_bytes())
    again = beta.sync()
    assert (again.accepted, again.duplicates) == ([], len(mine))
    assert states(beta.spool.root)["unread"] == received
    print(
        f"\nsend crash: {len(outcomes)} kills, {len(mine)} letters, {len(queued)} left in the outbox, "
        f"{report.duplicates} delivered twice"
    )


# --- 4. the one window a kill rarely hits: between the commit and the file's rename ------


def test_letter_committed_before_its_file_was_renamed_is_filed_once(
    registry: Registry, alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    """A commit makes the batch's files durable in tmp/, commits their rows (the letters exist
    from then on), then renames each file into letters/. A SIGKILL between the two is a window
    of microseconds; this is the same state made deterministic: the rename into ``letters/``
    fails, so the sync dies with the letter filed, its file still in tmp/, and the checkpoint
    unmoved. The letter is readable at once; a fresh process (a restart) moves the file into
    place, fetches the letter again and drops it as a duplicate: filed once, never twice."""
    recipient = registry.get("beta")
    thread = new_thread_id()
    letter, raw = compose(
        alpha.registry,
        alpha.home,
        "alpha",
        Draft(recipient.name, "question", thread, "quota endpoint returns 500", OPENER),
    )
    rename = os.rename

    def rename_but_not_into_letters(src: object, dst: object) -> None:
        if Path(str(dst)).parent.name == "letters":
            raise OSError("the instant of the kill")
        rename(src, dst)  # type: ignore[arg-type]

    deliver(home / "postoffice" / "beta", raw)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "rename", rename_but_not_into_letters)
        with pytest.raises(OSError, match="the instant of the kill"):
            beta.sync()
    (filed,) = beta.spool.read.thread_ids(thread)
    assert beta.spool.read.locate(filed) == "unread" and beta.spool.read.path("unread", filed).parent.name == "tmp"
    assert beta.spool.read.raw(filed) == raw, "not the state this test is about"
    assert beta.spool.read.checkpoint("local") in (None, f"{Mailbox(home / 'postoffice' / 'beta').uidvalidity}:0")

    restarted = AgentMail(registry, Identity("beta"), home)
    report = restarted.sync()
    assert (report.accepted, report.duplicates) == ([], 1)
    assert restarted.spool.read.path("unread", filed) == restarted.spool.root / "letters" / f"{filed}.eml"
    assert [x.message_id for x in restarted.inbox(sync=False)] == [letter.message_id]
    assert [x.message_id for x in restarted.thread(thread)] == [letter.message_id]
    assert [row.thread for row in restarted.status()] == [thread]
    assert restarted.sync().accepted == []
    assert states(beta.spool.root)["unread"] == {filed: letter.message_id}


# --- 5. a flush interrupted half-way ------------------------------------------------------


def test_flush_interrupted_midway_keeps_what_it_delivered(registry: Registry, home: Path) -> None:
    """A SIGKILL lands at a random instant; this is the same state made deterministic: the
    post office of the last letter's recipient is broken (a file where its Maildir should be),
    so the flush stops with an OSError right after delivering all the letters before it."""
    bus.add(home, registry, "gamma")
    alpha = AgentMail(load(registry.root), Identity("alpha"), home)
    letters = []
    for i, to in enumerate(["beta"] * 9 + ["gamma"]):
        recipient = alpha.registry.get(to)
        letter, raw = compose(
            alpha.registry,
            alpha.home,
            "alpha",
            Draft(recipient.name, "question", new_thread_id(), f"queued {i}", f"queued letter {i}\n"),
        )
        letters.append(alpha.spool.write.store("outbox", letter, raw, extra=letter.extra))  # as _dispatch does
    (home / "postoffice").mkdir(exist_ok=True)
    (home / "postoffice" / "gamma").write_bytes(b"not a maildir")
    with pytest.raises(OSError):
        alpha.flush()
    arrived = home / "postoffice" / "beta" / "new"
    assert len(os.listdir(arrived)) == 9  # the post office took these nine
    tree = states(alpha.spool.root)
    assert_one_state_each(tree)
    # Each letter the post office took should be on record as sent, so no retry repeats it.
    assert sorted(tree["sent"]) == sorted(x.id for x in letters[:9]), f"{len(tree['outbox'])} still queued"
    (home / "postoffice" / "gamma").unlink()
    alpha.flush()
    assert len(os.listdir(arrived)) == 9, "the retry delivered them again"


# --- 6. a retry after a crash delivers a letter twice --------------------------------------


def test_letter_delivered_twice_in_one_fetch_is_filed_once(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    """A sender killed between its delivery and outbox -> sent delivers the letter again on its
    next flush; both copies can arrive in one fetch batch, before either is committed."""
    letters = signed_letters(alpha, "beta", 6)
    for _, raw in letters + letters[:3] + letters[:1]:
        deliver(home / "postoffice" / "beta", raw)
    report = beta.sync()
    assert (len(report.accepted), report.duplicates) == (6, 4)
    assert sorted(states(beta.spool.root)["unread"].values()) == sorted(mid for mid, _ in letters)


def test_a_torn_uid_counter_never_reuses_a_uid(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    """.uidnext is overwritten in place (issue 11: no new file per sync); a crash that tears it
    leaves garbage or a wrong number, and the next letters still get fresh UIDs, none lost."""
    for index in range(3):
        alpha.send("beta", f"Before {index}", "The quota endpoint fails since v1.2; every user is affected.")
    assert len(beta.inbox()) == 3
    maildir = home / "postoffice" / "beta"
    for torn in (b"\x00\x00garbage\xff", b"000000000001", b"-7"):
        (maildir / ".uidnext").write_bytes(torn)
        alpha.send("beta", f"After {torn!r}", "The quota endpoint fails since v1.2; every user is affected.")
        subjects = [letter.subject for letter in beta.inbox()]
        assert f"After {torn!r}" in subjects
    uids = sorted(int(p.name.split(":")[0]) for p in (maildir / "cur").iterdir())
    assert uids == list(range(1, 7))  # six letters, six distinct UIDs in order
    assert len(beta.inbox()) == 6


# --- 7. killed at every commit point of a sync ----------------------------------------------


KILL_POINT = Path(__file__).parents[1] / "helpers" / "kill_point.py"
# Every place a sync batch can stop between "fetched" and "checkpoint moved" (in the order a
# batch passes them): files durable in tmp/ · rows committed · first file renamed into letters/
# · all renamed · checkpoint written. A kill before the commit must lose nothing (fetched
# again); a kill after it must double nothing (the refetch is a duplicate).
SYNC_POINTS = ("batch-durable", "batch-committed", "batch-publishing", "batch-published", "checkpoint-set")
PER_ROUND = 60  # two batches of the local post office (50 + 10): the second hit always exists


def test_sync_killed_at_every_commit_point_loses_and_doubles_nothing(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    # the second occurrence of each point (a later batch) only under CI: tests/depth.py
    rounds = [(point, nth) for point in SYNC_POINTS for nth in ((1, 2) if THOROUGH else (1,))]
    letters = signed_letters(alpha, "beta", PER_ROUND * len(rounds))
    expected = dict(letters)
    env = dict(os.environ, AGENTMAIL_HOME=str(home))
    delivered: list[str] = []
    for n, (point, nth) in enumerate(rounds):
        for mid, raw in letters[n * PER_ROUND : (n + 1) * PER_ROUND]:
            deliver(home / "postoffice" / "beta", raw)
            delivered.append(mid)
        victim = subprocess.run(
            [sys.executable, str(KILL_POINT), "sync", point, str(nth), "beta"],
            env=env,
            capture_output=True,
            timeout=HANG,
        )
        assert victim.returncode == -signal.SIGKILL, (point, nth, victim.returncode, victim.stderr[-2000:])
        tree = states(beta.spool.root)
        assert_one_state_each(tree)
        filed = Counter(tree["unread"].values())
        assert [m for m, c in filed.items() if c > 1] == [], f"filed twice after a kill at {point} #{nth}"
        assert set(filed) <= set(delivered) and tree["quarantine"] == {}
        for letter_id, mid in tree["unread"].items():  # complete, readable, byte for byte
            assert beta.spool.read.path("unread", letter_id).read_bytes() == expected[mid], (point, nth, letter_id)

    report = AgentMail(beta.registry, Identity("beta"), home).sync()  # a clean restart
    assert report.quarantined == []
    tree = states(beta.spool.root)
    assert_one_state_each(tree)
    assert sorted(tree["unread"].values()) == sorted(expected), "a letter was lost or doubled"
    for letter_id in tree["unread"]:
        assert (beta.spool.root / "letters" / f"{letter_id}.eml").exists(), "a rename a kill cut was never finished"
    mailbox = Mailbox(home / "postoffice" / "beta")
    assert beta.spool.read.checkpoint("local") == f"{mailbox.uidvalidity}:{len(letters)}"
    again = beta.sync()
    assert (again.accepted, again.duplicates, again.quarantined) == ([], 0, [])


# --- 8. killed at the commit points of a send ---------------------------------------------

# On the local post office a letter is filed in the outbox with no flush (the copy in the post
# office is the durable one): the order is what a kill can cut. Outbox row committed, nothing
# delivered · delivered, still in the outbox. Either way flush makes it one letter at beta.
SEND_POINTS = ("stored", "submitted")


@pytest.mark.parametrize("point", SEND_POINTS)
def test_send_killed_at_each_commit_point_loses_and_doubles_nothing(
    point: str, alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    victim = subprocess.run(
        [sys.executable, str(KILL_POINT), "send", point, "1", "alpha", OPENER],
        env=dict(os.environ, AGENTMAIL_HOME=str(home)),
        capture_output=True,
        timeout=HANG,
    )
    assert victim.returncode == -signal.SIGKILL, (point, victim.returncode, victim.stderr[-2000:])
    tree = states(alpha.spool.root)
    assert_one_state_each(tree)
    assert tree["sent"] == {} and len(tree["outbox"]) == 1, tree
    [(letter_id, mid)] = tree["outbox"].items()
    raw = alpha.spool.read.path("outbox", letter_id).read_bytes()
    new = home / "postoffice" / "beta" / "new"
    delivered = len(os.listdir(new)) if new.is_dir() else 0
    assert delivered == (1 if point == "submitted" else 0)

    assert [(r.key, r.status) for r in alpha.flush()] == [(letter_id, "sent")]
    report = beta.sync()
    assert report.quarantined == [] and report.duplicates == delivered
    received = states(beta.spool.root)["unread"]
    assert list(received.values()) == [mid], "lost or doubled"
    assert beta.spool.read.path("unread", next(iter(received))).read_bytes() == raw
    assert states(alpha.spool.root)["sent"] == {letter_id: mid}


def test_send_killed_once_its_sent_record_is_committed_leaves_one_letter_sent(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    """The move to sent/ and the record's flush are one commit (``make_durable``): a kill right
    after it finds the letter sent, delivered once, and nothing left for a flush to send."""
    victim = subprocess.run(
        [sys.executable, str(KILL_POINT), "send", "made-durable", "1", "alpha", OPENER],
        env=dict(os.environ, AGENTMAIL_HOME=str(home)),
        capture_output=True,
        timeout=HANG,
    )
    assert victim.returncode == -signal.SIGKILL, (victim.returncode, victim.stderr[-2000:])
    tree = states(alpha.spool.root)
    assert_one_state_each(tree)
    assert tree["outbox"] == {} and len(tree["sent"]) == 1, tree
    assert alpha.flush() == []
    report = beta.sync()
    assert report.quarantined == [] and report.duplicates == 0
    assert list(states(beta.spool.root)["unread"].values()) == list(tree["sent"].values())


# --- 8b. killed between the steps of a delivery -----------------------------------------------

# The post office's copy is the sender's spool file, hard-linked into tmp/, flushed there, then
# renamed into new/ and new/ flushed (transport/local.py). A kill after each step: the letter is
# in new/ only once its bytes were flushed, and flush makes it one letter at beta either way.
# (call, which post-office call of that name, whether the letter is in new/ at the kill)
DELIVERY_STEPS = (("link", 1, False), ("fsync", 1, False), ("rename", 1, True), ("fsync", 2, True))


@pytest.mark.parametrize(("call", "nth", "visible"), DELIVERY_STEPS)
def test_send_killed_between_the_steps_of_a_linked_delivery_loses_and_doubles_nothing(
    call: str, nth: int, visible: bool, alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    victim = subprocess.run(
        [sys.executable, str(KILL_POINT), "deliver", call, str(nth), "alpha", OPENER],
        env=dict(os.environ, AGENTMAIL_HOME=str(home)),
        capture_output=True,
        timeout=HANG,
    )
    assert victim.returncode == -signal.SIGKILL, (call, nth, victim.returncode, victim.stderr[-2000:])
    tree = states(alpha.spool.root)
    assert_one_state_each(tree)
    assert tree["sent"] == {} and len(tree["outbox"]) == 1, tree
    [(letter_id, mid)] = tree["outbox"].items()
    mine = alpha.spool.read.path("outbox", letter_id)
    raw = mine.read_bytes()
    maildir = home / "postoffice" / "beta"
    in_new = os.listdir(maildir / "new")
    assert len(in_new) == (1 if visible else 0), "in new/ before its bytes were flushed"
    [there] = [maildir / "new" / n for n in in_new] or [maildir / "tmp" / n for n in os.listdir(maildir / "tmp")]
    assert os.stat(there).st_ino == os.stat(mine).st_ino  # one file: the spool's, linked

    assert [(r.key, r.status) for r in alpha.flush()] == [(letter_id, "sent")]
    report = beta.sync()
    assert report.quarantined == [] and report.duplicates == (1 if visible else 0)
    received = states(beta.spool.root)["unread"]
    assert list(received.values()) == [mid], "lost or doubled"
    assert beta.spool.read.path("unread", next(iter(received))).read_bytes() == raw
    assert states(alpha.spool.root)["sent"] == {letter_id: mid}


# --- 9. killed between filing a letter and indexing it -----------------------------------------

# The search index is in spool.db, its rows written in the transaction that files the letter:
# a kill inside that transaction (its row in, its index rows not yet) leaves neither, and a kill
# right after the commit (where the client used to feed a separate index) leaves both. Either
# way every letter in the spool is searchable at once, and none the spool lacks.
INDEX_POINTS = (("filed-unindexed", 5, 0), ("batch-committed", 1, 10))


def _seqs(spool_root: Path) -> tuple[set[int], set[int], set[int]]:
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(spool_root / "spool.db")) as db:
        return tuple(  # type: ignore[return-value]
            {r[0] for r in db.execute(sql)}
            for sql in ("SELECT seq FROM letters", "SELECT seq FROM found", "SELECT rowid FROM words")
        )


@pytest.mark.parametrize(("point", "nth", "filed"), INDEX_POINTS)
def test_sync_killed_between_filing_and_indexing_leaves_them_in_step(
    point: str, nth: int, filed: int, alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    letters = signed_letters(alpha, "beta", 10)
    for _mid, raw in letters:
        deliver(home / "postoffice" / "beta", raw)
    victim = subprocess.run(
        [sys.executable, str(KILL_POINT), "sync", point, str(nth), "beta"],
        env=dict(os.environ, AGENTMAIL_HOME=str(home)),
        capture_output=True,
        timeout=HANG,
    )
    assert victim.returncode == -signal.SIGKILL, (point, victim.returncode, victim.stderr[-2000:])
    in_spool, found, words = _seqs(beta.spool.root)
    assert len(in_spool) == filed and in_spool == found == words, (point, in_spool, found, words)
    tree = states(beta.spool.root)
    hits = beta.search("crash letter", sync=False, limit=100)
    assert sorted(h.id for h in hits) == sorted(tree["unread"]), "the index and the spool disagree"

    beta.sync()  # a clean restart files what the kill lost
    in_spool, found, words = _seqs(beta.spool.root)
    assert len(in_spool) == 10 and in_spool == found == words
    assert len(beta.search("crash letter", sync=False, limit=100)) == 10
