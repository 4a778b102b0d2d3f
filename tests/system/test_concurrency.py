"""Many processes on one mailbox (DESIGN §7): "concurrent consumers never both claim one letter",
one syncer per mailbox commits a fetch, and agents sharing a platform each get their own copy.

Real processes (tests/helpers/consume_worker.py), started together on a go line, racing on the
test's AGENTMAIL_HOME; no mocks. The assertions read the spool files themselves.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections import Counter
from email.parser import BytesHeaderParser
from pathlib import Path

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.spool import STATES, Spool
from agentmail.transport.local import deliver

from ..conftest import make_signed_letters

WORKER = Path(__file__).parents[1] / "helpers" / "consume_worker.py"
NOTE_BODY = "Handover: the quota fix is on branch fix-quota; CI is green; please verify and close.\n"


# --- helpers ------------------------------------------------------------------------------


class Workers:
    """Start processes, wait until each is ready, release them at once, collect their JSON."""

    def __init__(self, home: Path, specs: list[tuple[str, str, str | None]]) -> None:
        self.home = home
        self.outs: list[Path] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        env = dict(os.environ, AGENTMAIL_HOME=str(home))
        for n, (mode, platform, agent) in enumerate(specs):
            out = home.parent / f"worker-{n}-{mode}.json"
            err = open(home.parent / f"worker-{n}-{mode}.err", "wb")  # noqa: SIM115
            self.outs.append(out)
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, str(WORKER), mode, platform, agent or "-", str(out)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    env=env,
                    bufsize=0,
                )
            )
            err.close()
        for n, proc in enumerate(self.procs):
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            line = proc.stdout.readline() if ready else b""
            assert line.strip() == b"ready", f"worker {n} did not start: {self.stderr(n)}"

    def stderr(self, n: int) -> str:
        path = self.outs[n].with_name(self.outs[n].name.replace(".json", ".err"))
        return path.read_text(errors="replace")[-3000:]

    def go(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()

    def after_first_call(self) -> None:
        """Consumers: wait until every one has made its first call, then let them all go on."""
        for n, proc in enumerate(self.procs):
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], 300)
            line = proc.stdout.readline() if ready else b""
            assert line.strip() == b"first", f"worker {n} made no first call: {self.stderr(n)}"
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(b"on\n")
            proc.stdin.flush()

    def stop_syncers(self) -> None:
        for out in self.outs:
            out.with_name(out.name + ".stop").touch()

    def results(self, timeout: float = 300) -> list[dict]:
        found = []
        try:
            for n, proc in enumerate(self.procs):
                code = proc.wait(timeout)
                assert code == 0, f"worker {n} exited {code}: {self.stderr(n)}"
                found.append(json.loads(self.outs[n].read_text()))
        finally:
            for proc in self.procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        return found


def signed_letters(sender: AgentMail, to: str, n: int) -> list[tuple[str, bytes]]:
    return make_signed_letters(sender, to, n, "concurrency")


def message_ids(folder: Path) -> list[str]:
    """The Message-ID of every letter in state ``folder.name`` of the spool ``folder.parent``:
    the state from spool.db (a fresh connection), the Message-ID read from each .eml file."""
    spool = Spool(folder.parent)
    try:
        found = []
        for letter_id in spool.read.ids(folder.name):
            with open(spool.read.path(folder.name, letter_id), "rb") as f:
                found.append(str(BytesHeaderParser().parse(f)["Message-ID"]).strip())
        return sorted(found)
    finally:
        spool.db.close()


def ids_in(spool_root: Path, state: str) -> set[str]:
    spool = Spool(spool_root)
    try:
        return set(spool.read.ids(state))
    finally:
        spool.db.close()


# --- many consumers, one inbox ------------------------------------------------------------


N_CONSUME = 200


def test_concurrent_consumers_never_claim_one_letter_twice(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    for _, raw in signed_letters(alpha, "beta", N_CONSUME):
        deliver(home / "postoffice" / "beta", raw)
    assert len(beta.sync().accepted) == N_CONSUME
    everything = ids_in(beta.spool.root, "unread")
    assert len(everything) == N_CONSUME

    # Three at-most-once consumers (inbox --consume) and three at-least-once ones (inbox + done),
    # all walking the same unread/ in the same order, released at the same instant; each makes
    # its first call (at most 10 letters) before any makes a second, so the three consumers
    # claim 10 letters each from a contested inbox whatever the scheduler does.
    workers = Workers(home, [("consume", "beta", None), ("done", "beta", None)] * 3)
    started = time.monotonic()
    workers.go()
    workers.after_first_call()
    results = workers.results()
    elapsed = time.monotonic() - started

    claims = [letter_id for r in results for letter_id in r["ids"]]
    twice = sorted(i for i, c in Counter(claims).items() if c > 1)
    assert twice == [], f"{len(twice)} letters claimed by two consumers, e.g. {twice[:3]}"
    assert set(claims) == everything, f"{len(everything - set(claims))} letters claimed by nobody"
    assert ids_in(beta.spool.root, "unread") == set()
    assert ids_in(beta.spool.root, "read") == everything
    for state in set(STATES) - {"read"}:
        assert ids_in(beta.spool.root, state) == set(), state
    mids = message_ids(beta.spool.root / "read")
    assert len(mids) == len(set(mids)) == N_CONSUME
    busy = [len(r["ids"]) for r in results]
    assert all(busy[0::2]), f"a consumer claimed nothing: {busy}"
    print(f"\nconsumers: claims per worker {busy} in {elapsed:.2f}s")


# --- many syncers, one mailbox ------------------------------------------------------------


N_SYNC_FIRST, N_SYNC_MORE = 80, 120


def test_concurrent_syncers_commit_each_letter_once(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    letters = signed_letters(alpha, "beta", N_SYNC_FIRST + N_SYNC_MORE)
    maildir = home / "postoffice" / "beta"
    for _, raw in letters[:N_SYNC_FIRST]:
        deliver(maildir, raw)

    workers = Workers(home, [("sync", "beta", None)] * 4)
    workers.go()
    for _, raw in letters[N_SYNC_FIRST:]:  # and more mail arrives while they race
        deliver(maildir, raw)
        time.sleep(0.008)
    workers.stop_syncers()
    results = workers.results()

    accepted = [mid for r in results for mid in r["accepted"]]
    twice = sorted(m for m, c in Counter(accepted).items() if c > 1)
    assert twice == [], f"{len(twice)} letters committed by two syncers, e.g. {twice[:3]}"
    assert sorted(accepted) == sorted(mid for mid, _ in letters)
    filed = message_ids(beta.spool.root / "unread")
    assert sorted(filed) == sorted(mid for mid, _ in letters), "the spool holds a letter twice or lacks one"
    assert ids_in(beta.spool.root, "quarantine") == set()
    assert sum(r["duplicates"] for r in results) == 0  # the lock serialises: nobody even refetched
    again = beta.sync()
    assert (again.accepted, again.duplicates) == ([], 0)
    print(
        f"\nsyncers: accepted per worker {[len(r['accepted']) for r in results]}, "
        f"rounds {[r['rounds'] for r in results]}"
    )


# --- two agents of one platform -----------------------------------------------------------


N_AGENTS = 100


def test_two_agents_of_one_platform_each_get_every_letter_once(
    registry: Registry, alpha: AgentMail, home: Path
) -> None:
    alice = AgentMail(registry, Identity("beta", "alice"), home)
    bob = AgentMail(registry, Identity("beta", "bob"), home)
    # Both agents read from the start. A new agent otherwise starts where a sibling stopped
    # (DESIGN §7): whichever agent's first sync ran second would skip the letters below.
    alice.from_start()
    bob.from_start()
    letters = signed_letters(alpha, "beta", N_AGENTS)
    maildir = home / "postoffice" / "beta"
    for _, raw in letters[: N_AGENTS // 2]:
        deliver(maildir, raw)
    for_alice = bob.note("handover for alice", NOTE_BODY, to_agent="alice")
    for_anyone = alice.note("handover for whoever is next", NOTE_BODY)
    assert (for_alice.state, for_anyone.state) == ("sent", "sent")

    # Two processes per agent: the agents race on the shared post office, and each agent's two
    # syncers race on its own spool.
    workers = Workers(home, [("sync", "beta", "alice"), ("sync", "beta", "bob")] * 2)
    workers.go()
    for _, raw in letters[N_AGENTS // 2 :]:
        deliver(maildir, raw)
        time.sleep(0.002)
    workers.stop_syncers()
    results = workers.results()

    from_alpha = {mid for mid, _ in letters}
    got = {name: message_ids(home / "spool" / f"beta@{name}" / "unread") for name in ("alice", "bob")}
    for name, mids in got.items():
        assert [m for m, c in Counter(mids).items() if c > 1] == [], f"{name} has a letter twice"
    # alice: every letter from alpha, and bob's note to her; her own note is in her sent/ only.
    assert set(got["alice"]) == from_alpha | {for_alice.message_id}
    # bob: every letter from alpha, and alice's note to anyone; never the note addressed to alice.
    assert set(got["bob"]) == from_alpha | {for_anyone.message_id}
    bob_files = [m for state in STATES for m in message_ids(home / "spool" / "beta@bob" / state)]
    assert bob_files.count(for_alice.message_id) == 1  # the copy he sent, in sent/
    assert message_ids(home / "spool" / "beta@bob" / "sent") == [for_alice.message_id]
    assert [n.message_id for n in alice.notes()] == [for_alice.message_id]
    assert [n.message_id for n in bob.notes()] == [for_anyone.message_id]

    alice_accepted = [m for r in results[0::2] for m in r["accepted"]]
    bob_accepted = [m for r in results[1::2] for m in r["accepted"]]
    assert sorted(alice_accepted) == sorted(got["alice"])
    assert sorted(bob_accepted) == sorted(got["bob"])
    # bob sent alice's note: his sync recognises its bytes as his own copy (a duplicate), or
    # skips it as a note for a sibling; either way at most once, and never files it.
    assert sum(r["skipped"] for r in results[1::2]) <= 1
    assert ids_in(home / "spool" / "beta", "unread") == set()  # the platform's own mailbox got nothing
    # Nothing was taken from anyone: the post office still holds every letter for the next agent.
    assert len(os.listdir(maildir / "cur")) == N_AGENTS + 2
