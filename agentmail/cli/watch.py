"""``agentmail watch --exec CMD``: run a command for each new letter, for runtimes without hooks.

CMD runs once per authenticated letter, through the shell, with the letter in its
environment (``AGENTMAIL_LETTER_ID``, ``_MESSAGE_ID``, ``_THREAD``, ``_TYPE``, ``_FROM``, and
``AGENTMAIL_PLATFORM``/``_AGENT``/``_HOME``/``_REGISTRY`` so an ``agentmail`` inside CMD acts
as this mailbox). Three things keep it safe to leave running:

- **Idempotent**: the Message-ID is recorded (atomically, under the mailbox's spool) *before*
  CMD starts, so a restart never runs a handled letter again — at most once, like
  ``inbox --consume``. A run cut short by a crash is reported, not repeated.
- **Bounded**: at most ``jobs`` runs at once; one watcher per mailbox (a lock); a second one
  stands by and takes over when the first stops (``--once`` is refused instead).
- **Budgeted**: at most ``budget`` runs per thread per hour. Two watchers answering each other
  stop after a handful of letters instead of driving each other forever; a letter over budget
  stays unread for a person or an agent to see.

It wakes on the transport's own signal (inotify on the local post office, IDLE over IMAP).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._fs import locked, write_atomic
from ..errors import ConfigError, TransportError
from ..frame import inline

if TYPE_CHECKING:
    from ..client.facade import AgentMail
    from ..model import Letter

WINDOW = 3600.0  # the budget counts runs per thread over this many seconds
KEEP = 86400.0  # handled letters no longer unread are forgotten after this long
# Longest single wait, so stop() is seen: short on the local post office (inotify is free), long
# over IMAP, where each wait is a SELECT and an IDLE round trip. Ctrl-C and SIGTERM interrupt it.
SLICE = {"local": 1.0}
SLICE_DEFAULT = 30.0
STANDBY = 1.0  # how often a standby watcher tries the lock (a flock has no timeout to wait with)


def _key(letter: Letter) -> str:
    """A handled letter: its verified sender and Message-ID (another sender reusing the Message-ID
    is another letter), or its id here when it has no Message-ID."""
    return f"{letter.sender} {letter.message_id}" if letter.message_id else f"id:{letter.id}"


def _handled(handled: dict[str, dict[str, Any]], letter: Letter) -> bool:
    """Was ``letter`` handled? Its own key, or a record of an older watcher (by Message-ID alone)
    naming this very letter here."""
    older = handled.get(letter.message_id)
    return _key(letter) in handled or (older is not None and older.get("id") == letter.id)


class State:
    """Handled letters (``_key``) and recent run times per thread, in one atomically replaced file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handled: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, list[float]] = {}
        try:
            data = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            return
        if isinstance(data, dict):
            self.handled = {str(k): v for k, v in (data.get("handled") or {}).items() if isinstance(v, dict)}
            self.runs = {
                str(k): [float(t) for t in v] for k, v in (data.get("runs") or {}).items() if isinstance(v, list)
            }

    def save(self) -> None:
        write_atomic(self.path, json.dumps({"handled": self.handled, "runs": self.runs}).encode())

    def budget_left(self, thread: str, budget: int, now: float) -> bool:
        recent = [t for t in self.runs.get(thread, []) if now - t < WINDOW]
        self.runs[thread] = recent
        return len(recent) < budget

    def prune(self, unread: set[str], now: float) -> None:
        self.handled = {k: v for k, v in self.handled.items() if k in unread or now - float(v.get("at", 0)) < KEEP}
        self.runs = {k: v for k, v in self.runs.items() if v and now - max(v) < WINDOW}


class Watcher:
    def __init__(
        self, am: AgentMail, command: str, *, jobs: int = 4, budget: int = 6, log: Callable[[str], None] | None = None
    ) -> None:
        if jobs < 1 or budget < 1:
            raise ValueError("jobs and budget must be at least 1")
        self.am, self.command, self.jobs, self.budget = am, command, jobs, budget
        self.dir = am.spool.root / "watch"
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._queued: set[str] = set()
        self.state: State | None = None
        self.started = 0
        self.slice = SLICE.get(am.transport.name, SLICE_DEFAULT)

    def stop(self) -> None:
        self._stop.set()

    def _say(self, line: str) -> None:
        self.log(inline(line))  # one line each: no text of a letter's starts another

    @contextmanager
    def _exclusive(self, deadline: float | None, once: bool) -> Iterator[bool]:
        """The mailbox's watch lock for the block (yields True), one consumer at a time. Held by
        another watcher: ``once`` is refused; else this one stands by, taking the lock when the
        other stops, and yields False if it was stopped or ran out of time before then."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with ExitStack() as held:
            path = self.dir / "lock"
            try:
                held.enter_context(locked(path, wait=False))
            except BlockingIOError as exc:
                if once:
                    raise ConfigError(f"another watcher is running for {self.am.me.mailbox} (lock {path})") from exc
                self._say(f"agentmail watch: another watcher is running for {self.am.me.mailbox}; "
                          "standing by to take over when it stops")  # fmt: skip
                if not self._standby(held, path, deadline):
                    yield False
                    return
                self._say(f"agentmail watch: the other watcher stopped; taking over {self.am.me.mailbox}")
            yield True

    def _standby(self, held: ExitStack, path: Path, deadline: float | None) -> bool:
        """Try the lock every STANDBY seconds until it is free (True), or a stop or the deadline."""
        while not self._stop.is_set():
            try:
                held.enter_context(locked(path, wait=False))
                return True
            except BlockingIOError:
                left = STANDBY if deadline is None else min(STANDBY, deadline - time.monotonic())
                if left <= 0:
                    return False
                try:
                    self._stop.wait(left)
                except KeyboardInterrupt:  # stopped while standing by: it never held the mailbox
                    return False
        return False

    def run(self, *, timeout: float | None = None, once: bool = False) -> int:
        """Watch until ``stop()``, ``timeout`` seconds, or (``once``) the unread letters of now
        have been handled; returns how many runs were started. Running commands are waited for.
        While another watcher holds the mailbox, this one stands by (``once``: refused)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._exclusive(deadline, once) as mine:
            if not mine:
                return 0
            with ThreadPoolExecutor(self.jobs, thread_name_prefix="agentmail-watch") as pool:
                try:  # from here on a stop is clean, even one that lands while the state is first saved
                    self._resume()
                    while not self._stop.is_set():
                        self._dispatch(pool)
                        if once:
                            break
                        left = self.slice if deadline is None else min(self.slice, deadline - time.monotonic())
                        if left <= 0:
                            break
                        self._wait(left)
                except KeyboardInterrupt:
                    self._say("agentmail watch: stopping; waiting for running commands")
                    self._stop.set()
                    pool.shutdown(wait=True, cancel_futures=True)  # queued, never started: not marked handled
        return self.started

    def _resume(self) -> None:
        """Load the state; a run the last watcher left running is marked, never run again."""
        self.state = State(self.dir / "state.json")
        for key, entry in self.state.handled.items():
            if entry.get("status") == "running":  # the last watcher died mid-run: say so, never re-run
                entry["status"] = "interrupted"
                self._say(
                    f"agentmail watch: {entry.get('id', key)} was running when the last watcher stopped; not run again"
                )
        self.state.save()

    def _wait(self, seconds: float) -> None:
        transport = self.am.transport
        try:
            transport.wait(self.am.spool.read.checkpoint(transport.name), seconds)
        except TransportError as exc:
            self._say(f"agentmail watch: {exc}; retrying")
            self._stop.wait(seconds)

    def _dispatch(self, pool: ThreadPoolExecutor) -> None:
        try:
            self.am.sync()
        except TransportError as exc:
            self._say(f"agentmail watch: sync failed: {exc}")
        letters = self.am.inbox(sync=False)
        assert self.state is not None
        with self._lock:
            self.state.prune({_key(x) for x in letters} | {x.message_id for x in letters}, time.time())
            for letter in letters:
                key = _key(letter)
                if _handled(self.state.handled, letter) or key in self._queued:
                    continue
                elsewhere = self._claimed_elsewhere(letter)
                if elsewhere is None:  # the server unreachable: tried again at the next look
                    continue
                if elsewhere:
                    self.state.handled[key] = {"id": letter.id, "status": "another machine", "at": time.time()}
                    self.state.save()
                    continue
                self._queued.add(key)
                pool.submit(self._run_one, letter)

    def _claimed_elsewhere(self, letter: Letter) -> bool | None:
        """Claim the letter for this mailbox where every machine of the platform sees it (the
        transport's reply claim, under a key of its own, marked final at once so it is never
        taken over): True when another machine's watcher has it, None when the server cannot be
        asked now. The lock above is one machine's; this is what keeps two machines' watchers
        from both running a letter. Called from the watcher's own thread, the transport's user."""
        if not letter.message_id:
            return False
        key, holder = f"{_key(letter)} watch {self.am.me.mailbox}", f"{self.am.me.mailbox} watch-{os.getpid()}"
        try:
            got = self.am.transport.claim_reply(letter.message_id, key, holder)
            if got.holder is None:
                self.am.transport.reply_sent(letter.message_id, key, holder)
        except TransportError as exc:
            self._say(f"agentmail watch: {letter.id} not run yet: it could not be claimed on the server ({exc})")
            return None
        return got.holder is not None

    def _claim(self, letter: Letter) -> bool:
        """Record the letter as handled before its command starts (False: over budget)."""
        assert self.state is not None
        now, key = time.time(), _key(letter)
        with self._lock:
            self._queued.discard(key)
            if self._stop.is_set():
                return False  # stopping: leave it unhandled for the next watcher
            if not self.state.budget_left(letter.thread, self.budget, now):
                self.state.handled[key] = {"id": letter.id, "status": "over-budget", "at": now}
                self.state.save()
                self._say(
                    f"agentmail watch: {letter.id} in {letter.thread} not run: the thread had {self.budget} runs "
                    "in the last hour; the letter stays unread"
                )
                return False
            self.state.handled[key] = {"id": letter.id, "status": "running", "at": now}
            self.state.runs.setdefault(letter.thread, []).append(now)
            self.state.save()
            self.started += 1
        return True

    def _env(self, letter: Letter) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "AGENTMAIL_LETTER_ID": letter.id,
                "AGENTMAIL_MESSAGE_ID": letter.message_id,
                "AGENTMAIL_THREAD": letter.thread,
                "AGENTMAIL_TYPE": letter.type,
                "AGENTMAIL_FROM": letter.sender,
                "AGENTMAIL_PLATFORM": self.am.me.platform,
                "AGENTMAIL_HOME": str(self.am.home),
                "AGENTMAIL_REGISTRY": str(self.am.registry.root),
            }
        )
        if self.am.me.agent:
            env["AGENTMAIL_AGENT"] = self.am.me.agent
        else:
            env.pop("AGENTMAIL_AGENT", None)
        return env

    def _run_one(self, letter: Letter) -> None:
        if not self._claim(letter):
            return
        started = time.monotonic()
        try:
            code = subprocess.run(self.command, shell=True, env=self._env(letter), stdin=subprocess.DEVNULL).returncode
            status = f"exit {code}"
        except OSError as exc:
            status = f"failed to start: {exc.strerror or exc}"
        assert self.state is not None
        with self._lock:
            self.state.handled[_key(letter)].update(status=status, seconds=round(time.monotonic() - started, 3))
            self.state.save()
        if status != "exit 0":
            self._say(f"agentmail watch: {letter.id} ({letter.type} in {letter.thread}): {status}")
