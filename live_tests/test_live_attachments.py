"""Evidence and patches across the real mail system (issue 13): a letter with a log and a
two-commit patch crosses Postfix/Dovecot, verifies against the pinned key, `agentmail apply`
(the CLI, in a test repository) applies it, and mutt lists the attachments as a person sees them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TIMEOUT, LiveBus, receive
from mutt_screen import muttrc, run_on_pty

from agentmail.stages import evidence
from agentmail.trust import signing
from agentmail.trust.authenticity import pinned_key


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "GIT_CONFIG_GLOBAL": "/dev/null"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout


def _repos(tmp: Path) -> tuple[Path, Path]:
    """(the fixer's checkout with two new commits, the receiver's clone without them)."""
    fixer, target = tmp / "fixer", tmp / "target"
    fixer.mkdir()
    _git(fixer, "init", "-q", "-b", "main")
    (fixer / "quota.py").write_text("LIMIT = 5\n")
    _git(fixer, "add", ".")
    _git(fixer, "commit", "-qm", "first")
    _git(tmp, "clone", "-q", str(fixer), str(target))
    (fixer / "quota.py").write_text("LIMIT = 10\n")
    _git(fixer, "commit", "-qam", "Raise the quota limit")
    (fixer / "plan.py").write_text("PLANS = ['free']\n")
    _git(fixer, "add", ".")
    _git(fixer, "commit", "-qm", "Handle the free plan")
    return fixer, target


def _cli(bus: LiveBus, home: Path, platform: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL_")}
    env.update(AGENTMAIL_HOME=str(home), AGENTMAIL_REGISTRY=str(bus.registry_dir), GIT_CONFIG_GLOBAL="/dev/null",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@x")  # fmt: skip
    return subprocess.run([sys.executable, "-m", "agentmail", "--as", platform, *args], env=env, capture_output=True,
                          text=True, timeout=TIMEOUT + 30, cwd=cwd)  # fmt: skip


def test_a_log_and_two_patches_cross_the_mail_system_verify_and_apply(bus: LiveBus, token: str, tmp_path: Path) -> None:
    # its own home: its thread never counts against the session's new-thread quota
    registry, home = bus.variant("attachments")
    sender = bus.client(bus.cfg.sender, home=home, registry=registry)
    receiver = bus.client(bus.cfg.receiver, home=home, registry=registry)
    fixer, target = _repos(tmp_path)
    log = tmp_path / "run.log"
    log.write_text(f"2026-12-01 ERROR quota 500 {token}\n")
    items = (evidence.from_file(log, 10**6), *evidence.from_patches("HEAD~2..HEAD", fixer))
    sent = sender.send(receiver.me.platform, f"Fix attached {token}", f"Log and fix attached ({token}).",
                       type="fix-notice", attachments=items)  # fmt: skip
    assert sent.state == "sent", sent.extra
    [letter] = receive(receiver, sent.thread)
    assert letter.state == "unread" and letter.sender == sender.me.platform
    assert [(a["name"], a["type"], a["size"]) for a in letter.extra["attachments"]] == [
        (i.name, i.type, i.size) for i in items
    ]
    assert [a.get("description") for a in letter.extra["attachments"][1:]] == [
        "Raise the quota limit",
        "Handle the free plan",
    ]
    raw = receiver.raw(letter.id)  # as Dovecot delivered it: the pinned signature still holds
    assert signing.verify(raw, pinned_key(bus.registry.platforms[sender.me.platform])).ok
    assert receiver.attachments(letter.id) == items

    check = _cli(bus, home, receiver.me.platform, target, "apply", "--check", letter.id)
    assert check.returncode == 0, check.stderr
    # Every commit is listed before anything lands (issue 23), then the verdict.
    assert check.stdout.splitlines()[0] == "commit 1/2: Raise the quota limit", check.stdout
    assert "  A plan.py" in check.stdout.splitlines() and check.stdout.strip().endswith(
        "2 patch(es) would apply cleanly"
    )
    applied = _cli(bus, home, receiver.me.platform, target, "apply", letter.id)
    assert applied.returncode == 0, applied.stderr
    assert _git(target, "log", "--format=%s") == "Handle the free plan\nRaise the quota limit\nfirst\n"
    assert (target / "quota.py").read_text() == "LIMIT = 10\n"

    mutt = shutil.which(os.environ.get("LIVE_BUS_MUTT", "mutt"))
    if mutt is None:
        pytest.skip("mutt is not installed (apt-get install mutt)")
    listed = _mutt_attachments(bus, home, mutt, receiver.me.platform, token, tmp_path)
    assert [name for name, _ in listed[1:]] == [i.name for i in items], listed
    assert [kind for _, kind in listed] == ["text/plain", "text/x-log", "text/x-diff", "text/x-diff"], listed


def _mutt_attachments(
    bus: LiveBus, home: Path, mutt: str, platform: str, token: str, tmp: Path
) -> list[tuple[str, str]]:
    """Open the mailbox in mutt on a pseudo-terminal, as a person would, open the letter with
    ``token`` in its subject and its attachment menu (``v``), and read the menu off the screen:
    [(file name, type)] per part, each line drawn with a marker attach_format."""
    rc = muttrc(bus, home, platform, tmp / "muttrc", 'set attach_format = "ATT<%f><%m/%M>"')

    def menu(screen: bytes) -> list[tuple[str, str]]:
        text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|[\x00-\x08\x0e-\x1f]", b"\n", screen)
        return re.findall(r"ATT<([^<>\n]*)><([a-z0-9.+-]+/[a-z0-9.+-]+)>", text.decode(errors="replace"))

    keys = f"push '<limit>~s {token}<enter><view-attachments>'"
    screen, _ = run_on_pty(mutt, rc, keys, tmp, term="vt100", cols=200, enough=lambda s: len(menu(s)) >= 4)
    found = menu(screen)
    assert found, f"mutt showed no attachment menu; its screen ended with: {screen[-600:]!r}"
    return found
