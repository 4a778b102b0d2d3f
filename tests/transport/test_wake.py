"""Waiting is woken by the mechanism, not by luck or a short loop (issue 15).

Every safety-net loop is set to ten minutes here, so only the wake itself (inotify, IMAP IDLE)
can finish these tests within pytest's timeout; a ``wait`` that slept instead fails them. No
test asserts a duration: a letter is sent only once the waiter is provably waiting (its watch
exists, the server saw IDLE), and success is awaited with a wide margin.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentmail.cli import watch as watch_mod
from agentmail.cli.watch import Watcher
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.transport import inotify, local

from ..conftest import OPENER, eventually
from ..mailservers import MailServers
from .test_transport_smtpimap import make_bus, servers  # noqa: F401  (the fixture)

NEVER = 600.0  # a safety net this long never fires within the test's timeout


@pytest.fixture
def watching(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Set whenever the local transport has started an inotify watch (is about to block on it);
    the local transport's re-check and the watcher's slice are set to ten minutes."""
    started = threading.Event()
    real = inotify.watch

    def watch(directory: Path) -> inotify.Watch | None:
        found = real(directory)
        assert found is not None, "inotify is not available here"
        started.set()
        return found

    monkeypatch.setattr(inotify, "watch", watch)
    monkeypatch.setattr(local, "RECHECK", NEVER)
    monkeypatch.setattr(watch_mod, "SLICE", {"local": NEVER})
    yield started


def _in_thread(target: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_an_inotify_watch_wakes_on_a_delivery(tmp_path: Path) -> None:
    maildir = tmp_path / "box"
    (maildir / "new").mkdir(parents=True)
    watcher = inotify.Watch(maildir / "new")
    try:
        deliverer = _in_thread(lambda: local.deliver(maildir, b"Subject: x\r\n\r\nhi\r\n"))
        assert watcher.wait(NEVER) is True
        deliverer.join()
    finally:
        watcher.close()
    assert watcher.fd == -1


def test_the_local_wait_is_woken_by_inotify(alpha: AgentMail, beta: AgentMail, watching: threading.Event) -> None:
    beta.sync()

    def send_once_waiting() -> None:
        assert watching.wait(60)
        alpha.send("beta", "Wake", OPENER, type="question")

    sender = _in_thread(send_once_waiting)
    letter, mechanism = beta.wait(NEVER, type="question")
    sender.join()
    assert (letter.subject, mechanism) == ("Wake", "inotify")


def test_the_local_wait_times_out_with_none(beta: AgentMail) -> None:
    beta.sync()
    assert beta.transport.wait(beta.spool.read.checkpoint("local"), 0.05) is None


def test_a_letter_already_there_returns_at_once_from_the_spool(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Already here", OPENER)
    assert beta.wait(NEVER)[1] == "spool"


def test_watch_runs_a_new_letter_on_the_inotify_wake(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path, watching: threading.Event
) -> None:
    out = tmp_path / "runs.txt"
    watcher = Watcher(beta, f'echo "$AGENTMAIL_THREAD" >> {out}', log=lambda _: None)
    assert watcher.slice == NEVER
    runner = _in_thread(watcher.run)
    try:
        assert watching.wait(60)  # the watcher handled what was there and now blocks on inotify
        sent = alpha.send("beta", "Quota 500s", OPENER)
        assert eventually(out.exists), "the watcher never woke for the letter"
    finally:
        watcher.stop()
        alpha.send("beta", "Wake it up to see stop()", OPENER)  # stop() is seen when the wait returns
        runner.join(60)
    assert not runner.is_alive()
    assert out.read_text().split() == [sent.thread]


def _idles(ms: MailServers) -> int:
    return ms.store.counts["imap.IDLE"]


def test_the_imap_wait_is_woken_by_idle(home: Path, servers: MailServers) -> None:  # noqa: F811
    reg = make_bus(home, servers)
    with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
        beta.sync()
        before = _idles(servers)

        def send_once_idling() -> None:
            assert eventually(lambda: _idles(servers) > before)
            alpha.send("beta", "Wake", OPENER, type="question")

        sender = _in_thread(send_once_idling)
        letter, mechanism = beta.wait(NEVER, type="question")
        sender.join()
    assert (letter.subject, mechanism) == ("Wake", "idle")


def test_watch_over_imap_runs_a_new_letter_on_the_idle_wake(
    home: Path,
    servers: MailServers,  # noqa: F811
    tmp_path: Path,
) -> None:
    reg = make_bus(home, servers)
    out = tmp_path / "runs.txt"
    with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
        watcher = Watcher(beta, f'echo "$AGENTMAIL_THREAD" >> {out}', log=lambda _: None)
        watcher.slice = NEVER  # only IDLE can wake it within the test
        before = _idles(servers)
        runner = _in_thread(watcher.run)
        try:
            assert eventually(lambda: _idles(servers) > before), "the watcher never entered IDLE"
            sent = alpha.send("beta", "Quota 500s", OPENER)
            assert eventually(out.exists), "IDLE never woke the watcher"
        finally:
            watcher.stop()
            alpha.send("beta", "Wake it up to see stop()", OPENER)
            runner.join(60)
        assert not runner.is_alive()
    assert out.read_text().split() == [sent.thread]
