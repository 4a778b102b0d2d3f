"""Driving mutt as a person would: a muttrc for a platform's IMAP mailbox, and mutt run on a
pseudo-terminal whose screen a check reads. Shared by the live checks that look at a letter
through a real mail client."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Callable
from pathlib import Path

from conftest import TIMEOUT, LiveBus

from agentmail.config.credentials import mailbox_login


def muttrc(bus: LiveBus, home: Path, platform: str, path: Path, *extra: str) -> Path:
    """A muttrc (0600) opening ``platform``'s INBOX over the bus's IMAP, plus ``extra`` lines."""
    imap = bus.registry.bus.imap
    assert imap is not None
    login = mailbox_login(home, platform, bus.registry.platforms[platform].address)
    scheme = "imaps" if imap.tls == "implicit" else "imap"
    user = login.username.replace("%", "%25").replace("@", "%40")
    lines = [
        f'set folder = "{scheme}://{user}@{imap.host}:{imap.port}/"',
        'set spoolfile = "+INBOX"',
        f'set imap_pass = "{login.password}"',
        "set ssl_force_tls = yes",
        f"set ssl_starttls = {'yes' if imap.tls == 'starttls' else 'no'}",
        "set wait_key = no",
        "set quit = yes",
        *extra,
    ]
    if bus.registry.bus.ca_file:
        lines.append(f'set ssl_ca_certificates_file = "{bus.registry.bus.ca_file}"')
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def run_on_pty(
    mutt: str,
    rc: Path,
    keys: str,
    cwd: Path,
    *,
    term: str,
    cols: int,
    enough: Callable[[bytes], bool] = lambda _: False,
) -> tuple[bytes, int]:
    """Run ``mutt -R -F rc -e keys`` on a pseudo-terminal until it exits, ``enough(screen)`` says
    so, or the live timeout passes; (everything it drew, its exit status)."""
    env = {**os.environ, "TERM": term, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": str(cwd)}
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
    proc = subprocess.Popen([mutt, "-R", "-F", str(rc), "-e", keys], stdin=slave, stdout=slave, stderr=slave,
                            env=env, cwd=cwd, start_new_session=True)  # fmt: skip
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + TIMEOUT + 30
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    screen += os.read(master, 65536)
                except OSError:
                    break
            if enough(screen):
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(master)
    return screen, proc.returncode
