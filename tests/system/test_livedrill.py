"""Figure 10's raw receiver (``benchmarks.livedrill.collect``) against a scripted IMAP server on
loopback: a letter announced in a SEARCH's answer is fetched without IDLE, and the server's
keep-alive lines during IDLE do not push the receiver's deadline back."""

from __future__ import annotations

import imaplib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from benchmarks import livedrill

LETTER = b"Message-ID: <%d@bus.test>\r\nSubject: drill tok\r\n\r\ndrill letter tok %d\r\n"
Script = Callable[[bytes, bytes, list[bytes]], bytes]


@contextmanager
def scripted(answer: Script, still_here: bool = False) -> Iterator[imaplib.IMAP4]:
    """An imaplib client on a loopback server that answers each command line with
    ``answer(tag, command, arguments)`` (the bytes to send back, tagged line included); in
    IDLE, with ``still_here``, it says ``* OK Still here`` again and again until DONE."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, conn.makefile("rb") as lines:
            conn.sendall(b"* OK scripted\r\n")
            while not stop.is_set() and (line := lines.readline()):
                tag, command, *args = line.split()
                if command.upper() == b"CAPABILITY":
                    conn.sendall(b"* CAPABILITY IMAP4rev1 IDLE\r\n" + tag + b" OK done\r\n")
                elif command.upper() in (b"LOGIN", b"NOOP"):
                    conn.sendall(tag + b" OK done\r\n")
                elif command.upper() == b"EXAMINE":
                    conn.sendall(b"* 1 EXISTS\r\n" + tag + b" OK [READ-ONLY] examined\r\n")
                elif command.upper() == b"IDLE":
                    conn.sendall(b"+ idling\r\n" + answer(tag, b"IDLE", args))
                    done = threading.Event()
                    talker = threading.Thread(target=keep_alive, args=(conn, done), daemon=True)
                    if still_here:
                        talker.start()
                    while not stop.is_set() and lines.readline().strip() != b"DONE":
                        pass
                    done.set()
                    if still_here:
                        talker.join()
                    conn.sendall(tag + b" OK idle done\r\n")
                elif command.upper() == b"LOGOUT":
                    conn.sendall(b"* BYE\r\n" + tag + b" OK bye\r\n")
                    return
                else:
                    conn.sendall(answer(tag, command.upper(), args))

    def keep_alive(conn: socket.socket, done: threading.Event) -> None:
        while not done.wait(0.01):
            conn.sendall(b"* OK Still here\r\n")

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    imap = imaplib.IMAP4("127.0.0.1", listener.getsockname()[1], timeout=30)
    try:
        imap.login("drill1@bus.test", "secret")
        imap.select("INBOX", readonly=True)  # as the drill's receiver: letter 1 is there
        yield imap
    finally:
        stop.set()
        imap.shutdown()
        listener.close()
        server.join(timeout=30)


def fetched(tag: bytes, uids: list[int]) -> bytes:
    out = b""
    for uid in uids:
        body = LETTER % (uid, uid)
        out += b"* %d FETCH (UID %d BODY[] {%d}\r\n" % (uid, uid, len(body)) + body + b")\r\n"
    return out + tag + b" OK fetched\r\n"


@pytest.mark.timeout(120)
def test_a_letter_announced_in_the_last_search_is_fetched_without_idle() -> None:
    """The server files letter 2 while answering the SEARCH that found nothing new, and says so
    only in that answer (``* 2 EXISTS`` after the results, as Dovecot may): IDLE would never
    announce it again, so the receiver searches once more instead of waiting in IDLE."""
    mailbox = [1]
    idled: list[bytes] = []

    def answer(tag: bytes, command: bytes, args: list[bytes]) -> bytes:
        if command == b"IDLE":
            idled.append(tag)
            return b""  # nothing new ever comes
        if args[0].upper() == b"SEARCH":
            low = int(args[2].split(b":")[0])
            found = [uid for uid in mailbox if uid >= low] or mailbox[-1:]  # "N:*" names the last one
            told = b""
            if low == 2 and mailbox == [1]:
                mailbox.append(2)  # filed after the search ran
                told = b"* 2 EXISTS\r\n"
            return b"* SEARCH " + b" ".join(b"%d" % u for u in found) + b"\r\n" + told + tag + b" OK searched\r\n"
        return fetched(tag, [int(uid) for uid in args[1].split(b",")])

    with scripted(answer) as imap:
        seen = livedrill.collect(imap, 0, 2, b"tok", time.monotonic() + 20)
    assert seen == {"Message-ID: <1@bus.test>": 1, "Message-ID: <2@bus.test>": 1}
    assert idled == []


@pytest.mark.timeout(120)
def test_keep_alive_lines_in_idle_do_not_push_the_deadline_back() -> None:
    """A server that only says "still here" during IDLE, again and again: the receiver gives up
    at its deadline (a TimeoutError the drill reports), not never."""

    def answer(tag: bytes, command: bytes, args: list[bytes]) -> bytes:
        if command == b"IDLE":
            return b""
        return b"* SEARCH\r\n" + tag + b" OK searched\r\n"

    with scripted(answer, still_here=True) as imap, pytest.raises(TimeoutError, match="no letter by the deadline"):
        livedrill.collect(imap, 0, 1, b"tok", time.monotonic() + 1)
