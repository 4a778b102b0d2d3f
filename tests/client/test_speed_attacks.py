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
import time
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import Refused, Timeout
from agentmail.transport import inotify, local, open_transport
from agentmail.transport.claim_marks import STALE_AFTER
from agentmail.transport.smtpimap import SmtpImapTransport

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


# --- one reply per letter across machines, whatever the kill -----------------------------------

_REPLY_KILLED_AT = """
import os, signal, sys
from agentmail.spool import db
from agentmail.client.facade import AgentMail
am = AgentMail.from_env("beta", agent="laptop")
(letter,) = am.inbox()
db.crash_point = lambda point: point == sys.argv[1] and os.kill(os.getpid(), signal.SIGKILL)
am.reply(letter, "Reproduced; fixing.", type="ack")
"""


@pytest.mark.parametrize("point", ["submitted", "claims-marked", "made-durable"])
def test_a_reply_killed_after_its_delivery_is_never_answered_again_by_another_machine(
    point: str, registry: Registry, home: Path, tmp_path: Path
) -> None:
    """Machine A's reply reached alpha, then A was killed (still in the outbox, or recorded sent
    in the one durable commit) and came back. Its claim on the server must say the letter is
    answered: machine B, past the time a dead home's claim is taken over, is refused."""
    from ..client.test_many_machines import _second_home

    with AgentMail(registry, Identity("alpha"), home) as alpha:
        mid = alpha.send("beta", "Quota", OPENER).message_id
    other = _second_home(home, tmp_path, "machine2", share_postoffice=True)
    transport = open_transport(registry_mod.load(other / "registry"), "beta", other)
    assert isinstance(transport, local.LocalTransport)
    later = [time.time()]
    transport.claims.now = lambda: later[0]
    b = AgentMail(registry_mod.load(other / "registry"), Identity("beta", "ci"), other, transport=transport)
    (letter,) = b.inbox()  # B has the letter too, before A answers it
    killed = subprocess.run(
        [sys.executable, "-c", _REPLY_KILLED_AT, point],
        env={**os.environ, "AGENTMAIL_HOME": str(home)},
        capture_output=True,
        timeout=HANG,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    box = home / "postoffice" / "alpha"

    def replies() -> int:  # distinct replies (a letter submitted again is one: the receiver drops the copy)
        found = [p.read_bytes() for d in ("new", "cur") for p in (box / d).glob("*")]
        return len(
            {
                raw.split(b"Message-ID: ", 1)[1].split(b"\r\n", 1)[0]
                for raw in found
                if f"In-Reply-To: {mid}".encode() in raw
            }
        )

    assert replies() == 1
    with AgentMail(registry_mod.load(home / "registry"), Identity("beta", "laptop"), home) as a:  # A back
        a.flush()
        a.sync()
        assert len(a.spool.read.ids("sent")) == 1 and a.spool.read.ids("outbox") == a.spool.read.ids("failed") == []
    later[0] = time.time() + STALE_AFTER + 5
    with b:
        assert b.reply(letter, "Mine now.", type="ack") is None, "answered twice"
        assert "already answered (by beta@laptop, letter" in (b.why_refused(letter) or "")
    assert replies() == 1


def test_over_imap_a_reply_killed_after_its_claim_was_marked_is_recorded_sent_and_answered_once(
    home: Path, tmp_path: Path
) -> None:
    """The kill between the claim marked answered and the move to sent, over smtp+imap (the
    claim is keywords on the answered letter; the spool's move is no durable commit there): the
    machine back submits it again as its own answered claim, records it sent (not failed), and
    the other machine, past the stale time, is refused."""
    from ..client.test_many_machines import _replies_sent, _second_home
    from ..mailservers import MailServers
    from ..transport.test_transport_smtpimap import USERS, make_bus

    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as servers:
        reg = make_bus(home, servers)
        with AgentMail(reg, Identity("alpha"), home) as alpha:
            mid = alpha.send("beta", "Quota", OPENER).message_id
        other = _second_home(home, tmp_path, "machine2")
        transport = SmtpImapTransport.from_registry(registry_mod.load(other / "registry"), "beta", other)
        later = [time.time()]
        transport.now = lambda: later[0]
        with AgentMail(registry_mod.load(other / "registry"), Identity("beta", "ci"), other, transport=transport) as b:
            (letter,) = b.inbox()
            killed = subprocess.run(
                [sys.executable, "-c", _REPLY_KILLED_AT, "claims-marked"],
                env={**os.environ, "AGENTMAIL_HOME": str(home)},
                capture_output=True,
                timeout=HANG,
            )
            assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
            later[0] = time.time() + STALE_AFTER + 5
            assert b.reply(letter, "Mine now.", type="ack") is None, "answered twice"
        with AgentMail(registry_mod.load(home / "registry"), Identity("beta", "laptop"), home) as a:
            a.flush()
            assert len(a.spool.read.ids("sent")) == 1 and a.spool.read.ids("outbox") == a.spool.read.ids("failed") == []
        sent = [
            m.data
            for m in servers.store.accepted
            if m.login == "beta@bus.test" and f"In-Reply-To: {mid}".encode() in m.data
        ]
        assert len({raw.split(b"Message-ID: ", 1)[1].split(b"\r\n", 1)[0] for raw in sent}) == 1, _replies_sent(
            servers, mid
        )


def test_a_letter_that_lands_while_the_waiter_warms_up_is_handed_over_not_waited_out(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm-up runs after the sync found nothing and before the block: a letter delivered
    inside it is past the sync, so the block must see it (pending against the checkpoint), not
    wait for the next one. Twice: the second wait of the thread skips the warm-up."""
    from agentmail.client.receiver import Receiver

    warming = Receiver._warm_receiving
    sent: list[str] = []

    def warm_while_a_letter_lands(self: Receiver) -> None:
        sent.append(alpha.send("beta", f"During the warm-up {len(sent)}", OPENER).message_id)
        warming(self)

    monkeypatch.setattr(Receiver, "_warm_receiving", warm_while_a_letter_lands)
    for n in range(2):
        letter, _how = beta.wait(timeout=HANG)
        assert letter.message_id == sent[n]
        beta.done(letter.id)


def test_a_claim_mark_the_post_office_refuses_leaves_the_reply_recorded_sent_once(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mark now comes before the record: a post office that cannot take it (a full disk, a
    folder made read-only) must not leave a delivered reply in the outbox, raised as unsent and
    submitted again at every flush. The reply is recorded sent; its claim stays open (taken over
    after the stated time, as an IMAP server that cannot be asked leaves it)."""
    from agentmail.transport.claim_marks import Claims

    def refuse(self: Claims, message_id: str, holder: str) -> bool:
        raise PermissionError(13, "Permission denied", str(self.root))

    monkeypatch.setattr(Claims, "sent", refuse)
    alpha.send("beta", "Quota", OPENER)
    (letter,) = beta.inbox()
    reply = beta.reply(letter, "Reproduced; fixing.", type="ack")
    assert reply is not None and reply.state == "sent"
    assert beta.spool.read.ids("outbox") == [] and len(beta.spool.read.ids("sent")) == 1
    assert beta.flush() == []
    assert [x.in_reply_to for x in alpha.inbox()] == [letter.message_id]
