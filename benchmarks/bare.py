"""The baselines: bare Python doing only the file work a letter needs, standard library only.

Imported by the suite (``deliver``, ``copy_durably``) and run as a script by the bare
interpreter, which has no agentmail installed::

    python bare.py wait MAILDIR      # block on inotify until new/ has a file; print its name
    python bare.py write MAILDIR SRC # deliver SRC's bytes into MAILDIR/new, durably
    python bare.py list MAILDIR      # read every file in new/ and print the names
    python bare.py imap-wait HOST PORT USER CAFILE   # IMAP IDLE until a message arrives; print
                                                     # its sequence number (password: BARE_PASSWORD)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import imaplib
import os
import select
import smtplib
import ssl
import sys
import time
from pathlib import Path

IN_MOVED_TO = 0x80
IN_CREATE = 0x100


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(tmp: Path, final: Path, raw: bytes) -> None:
    """tmp write + fsync + rename: the least a crash-safe writer can do (the caller fsyncs the folder)."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, raw)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, final)


def deliver(maildir: Path, raw: bytes) -> str:
    """Maildir delivery as DESIGN §2 describes it, and nothing more."""
    name = f"{time.time_ns()}.{os.getpid()}.bare"
    write_durably(maildir / "tmp" / name, maildir / "new" / name, raw)
    fsync_dir(maildir / "new")
    return name


def copy_durably(sources: list[Path], target: Path, batch: int = 200) -> None:
    """The same files, each fsynced and renamed into ``target``; the folder fsynced once per
    ``batch``, as the spool does during a sync."""
    (target / "tmp").mkdir(parents=True, exist_ok=True)
    for index, source in enumerate(sources, 1):
        write_durably(target / "tmp" / source.name, target / source.name, source.read_bytes())
        if index % batch == 0 or index == len(sources):
            fsync_dir(target)


def _watch(directory: Path) -> int:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    fd = int(libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK))
    if fd < 0 or libc.inotify_add_watch(fd, os.fsencode(directory), IN_MOVED_TO | IN_CREATE) < 0:
        raise OSError(ctypes.get_errno(), "inotify failed")
    return fd


def next_letter(maildir: Path) -> tuple[str, bytes]:
    """Block on inotify until ``new/`` holds a file: its name and bytes."""
    new = maildir / "new"
    fd = _watch(new)
    while True:
        names = os.listdir(new)
        if names:
            return names[0], (new / names[0]).read_bytes()
        select.select([fd], [], [], 1.0)
        try:
            while os.read(fd, 65536):
                pass
        except BlockingIOError:
            pass


def wait_for_letter(maildir: Path) -> str:
    return next_letter(maildir)[0]


def imap_wait(host: str, port: int, user: str, password: str, cafile: str) -> str:
    """imaplib has no IDLE: send it by hand, then read until the server pushes EXISTS."""
    imap = imaplib.IMAP4_SSL(host, port, ssl_context=ssl.create_default_context(cafile=cafile))
    imap.login(user, password)
    _, data = imap.select("INBOX", readonly=True)
    known = int(data[0] or 0)
    imap.send(b"b1 IDLE\r\n")
    imap.readline()  # "+ idling"
    while True:
        line = imap.readline()
        if not line:
            raise OSError("the IMAP server hung up")
        parts = line.split()
        if len(parts) == 3 and parts[2] == b"EXISTS" and int(parts[1]) > known:
            break
    imap.send(b"DONE\r\n")
    while not imap.readline().startswith(b"b1 "):
        pass
    newest = parts[1].decode()
    imap.fetch(newest, "(BODY.PEEK[])")
    imap.logout()
    return newest


def smtp_session(host: str, port: int, user: str, password: str, cafile: str) -> smtplib.SMTP:
    """Submission the way a bare client does it: STARTTLS, AUTH."""
    smtp = smtplib.SMTP(host, port, local_hostname="bare.localhost", timeout=30)
    smtp.starttls(context=ssl.create_default_context(cafile=cafile))
    smtp.login(user, password)
    return smtp


def main(argv: list[str]) -> int:
    command, maildir = argv[0], Path(argv[1])
    if command == "imap-wait":
        print(imap_wait(argv[1], int(argv[2]), argv[3], os.environ["BARE_PASSWORD"], argv[4]), flush=True)
    elif command == "wait":
        print(wait_for_letter(maildir), flush=True)
    elif command == "write":
        deliver(maildir, Path(argv[2]).read_bytes())
    elif command == "list":
        for name in sorted(os.listdir(maildir / "new")):
            (maildir / "new" / name).read_bytes()
            print(name)
    else:
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
