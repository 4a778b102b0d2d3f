"""Attacks on the guarantees the send, receive and start-up speed-ups claim to keep
(docs/threat/attacks-session7y.md): the new-thread quota counted incrementally in a long-lived
process, beside a CLI send and another machine; its watch of a marker folder when the kernel
refuses inotify; a receiver killed the moment ``wait()`` handed it a letter."""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import Refused, Timeout
from agentmail.transport import inotify, local

from ..conftest import OPENER

HANG = 300  # seconds: only a hung child takes this long, however busy the machine
QUOTA = r"new-thread quota reached: alpha opened 4 threads"


def _capped(home: Path, cap: int) -> Registry:
    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test", endpoints={"new_threads_per_hour": 0})
    bus.set_setting(home / "registry", "new_threads_per_hour", [str(cap)])
    return registry_mod.load(home / "registry")


def _second_home(home: Path) -> Path:
    """Another machine of alpha on the same post office: its secrets, its own spool."""
    other = home.parent / "home-b"
    other.mkdir()
    shutil.copytree(home / "secrets", other / "secrets")
    (home / "postoffice").mkdir(exist_ok=True)
    (other / "postoffice").symlink_to(home / "postoffice", target_is_directory=True)
    return other


def _watched(mail: AgentMail) -> list[inotify.Watch | None]:
    transport = mail.transport
    assert isinstance(transport, local.LocalTransport)
    return [m.watch for m in transport._markers.values()]


def test_a_long_lived_sender_counts_a_cli_send_and_another_machine_beside_it(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept window (this home's openers) and the watched marker folder (the post office's)
    of a process that has counted three times already still see a thread opened by a CLI process of
    the same home and one opened by another machine: the sixth send is refused."""
    monkeypatch.setattr(local, "WATCH_FROM", 1)  # the hour folder watched from its second count
    reg = _capped(home, 5)
    other = _second_home(home)
    api = AgentMail(reg, Identity("alpha"), home)
    try:
        for subject in ("One", "Two", "Three"):  # counts: no folder yet, listed, listed and watched
            assert api.send("beta", subject, OPENER).state == "sent"
        assert [w is not None for w in _watched(api)] == [True]
        done = subprocess.run(
            [sys.executable, "-m", "agentmail", "--as", "alpha", "send", "beta", "-s", "Four", "-b", OPENER],
            env=dict(os.environ, AGENTMAIL_HOME=str(home)),
            capture_output=True,
            text=True,
            timeout=HANG,
        )
        assert done.returncode == 0, done.stderr
        far = AgentMail(reg, Identity("alpha"), other)
        assert far.send("beta", "Five", OPENER).state == "sent"
        far.close()
        with pytest.raises(Refused, match=r"new-thread quota reached: alpha opened 5 threads"):
            api.send("beta", "Six", OPENER)
        assert [w is not None for w in _watched(api)] == [True]  # (the count came by the watch)
    finally:
        api.close()


def _refusing_libc(real: object, where: str, code: int) -> object:
    """The C library with inotify refused the way an exhausted kernel refuses it: EMFILE from
    inotify_init1 (the per-user limit of instances), or ENOSPC from inotify_add_watch (of watches)."""

    def refuse(*_args: object) -> int:
        ctypes.set_errno(code)
        return -1

    class Refusing:
        def __getattr__(self, name: str) -> object:
            return refuse if name == where else getattr(real, name)

    return Refusing()


@pytest.mark.parametrize(("where", "code"), [("inotify_init1", errno.EMFILE), ("inotify_add_watch", errno.ENOSPC)])
def test_a_kernel_that_refuses_inotify_leaves_the_quota_counted_by_listing(
    where: str, code: int, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No inotify instance or watch to be had: every send lists the marker folder instead, none
    fails, and the quota refuses exactly at its cap, another machine's threads included."""
    real = inotify.libc()
    monkeypatch.setattr(inotify, "libc", lambda: _refusing_libc(real, where, code))
    monkeypatch.setattr(local, "WATCH_FROM", 1)
    reg = _capped(home, 4)
    other = _second_home(home)
    api = AgentMail(reg, Identity("alpha"), home)
    far = AgentMail(reg, Identity("alpha"), other)
    try:
        for n, mail in enumerate((api, api, far, api)):
            assert mail.send("beta", f"Thread {n}", OPENER).state == "sent"
        assert _watched(api) == [None]  # listed at every count: no watch was to be had
        for mail in (api, far):
            with pytest.raises(Refused, match=QUOTA):
                mail.send("beta", "One too many", OPENER)
    finally:
        api.close()
        far.close()


_WAIT_THEN_DIE = """
import os, signal, sys
from agentmail import AgentMail
letter, _how = AgentMail.from_env("beta").wait(timeout=float(sys.argv[1]))
print(letter.id, letter.message_id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # the moment wait() handed the letter over: nothing after it ran
"""


def test_a_receiver_killed_as_wait_returns_finds_the_letter_once_after_restart(registry: Registry, home: Path) -> None:
    """Whatever moved off the wake path (the cur/ flush, the warm-up) left nothing the letter
    needs undone when ``wait()`` returns: killed right then, the restarted receiver has it
    once, is handed it again (it was never marked done), and nothing arrives twice."""
    alpha = AgentMail(registry, Identity("alpha"), home)
    sent = alpha.send("beta", "Waited for", OPENER)
    alpha.close()
    victim = subprocess.run(
        [sys.executable, "-c", _WAIT_THEN_DIE, "60"],
        env=dict(os.environ, AGENTMAIL_HOME=str(home)),
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert victim.returncode == -signal.SIGKILL, victim.stderr[-2000:]
    letter_id, message_id = victim.stdout.split()
    assert message_id == sent.message_id
    beta = AgentMail(registry, Identity("beta"), home)
    try:
        assert [x.message_id for x in beta.inbox()] == [sent.message_id]
        again, _how = beta.wait(timeout=0)
        assert again.id == letter_id  # handed over again: the kill came before anything marked it
        report = beta.sync()
        assert (report.accepted, report.quarantined) == ([], [])
        beta.done(letter_id)
        with pytest.raises(Timeout):
            beta.wait(timeout=0)
        assert [x.message_id for x in beta.inbox()] == []
    finally:
        beta.close()
