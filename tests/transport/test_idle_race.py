"""IDLE as Dovecot really speaks it: two things the live stack showed the wait getting wrong.

1. A letter delivered between the wait's last EXAMINE and its IDLE is announced right after
   "+ idling", in the same TLS record. imaplib's buffered reader takes both lines off the
   socket; imapclient's idle_check() then polls the socket alone, sees nothing, and the wait
   slept until its timeout although the letter was there.
2. A notification that reaches the client in two pieces ("* 720 EXISTS\r\n* " then
   "19 RECENT\r\n"): idle_check() reads with the socket non-blocking and the buffered reader
   drops the first piece when the second read would block, so the next read failed with
   "unexpected response: b'19 RECENT'" and the wait broke off with a transport error.

A scripted IMAP server on 127.0.0.1 (plaintext: loopback only) replays exactly that.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from agentmail.config.credentials import Login
from agentmail.config.registry import Endpoint
from agentmail.transport.smtpimap import SmtpImapTransport


class ScriptedImap:
    """Just enough IMAP for the transport's wait: LOGIN, EXAMINE, IDLE, DONE, LOGOUT.

    The mailbox holds one message (UID 1) until the client enters IDLE; by then a second one
    has "arrived", and the server says so in the same write as the continuation."""

    def __init__(self, pieces: tuple[bytes, ...] | None = None) -> None:
        self.pieces = pieces  # what IDLE sends after its continuation, one write each, apart
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.exists = 1
        self.idles = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn, conn.makefile("rb") as reader:
            conn.sendall(b"* OK [CAPABILITY IMAP4rev1 IDLE AUTH=PLAIN] ready\r\n")
            while True:
                line = reader.readline()
                if not line:
                    return
                tag, _, rest = line.rstrip(b"\r\n").partition(b" ")
                command = rest.split(b" ", 1)[0].upper()
                if command == b"LOGIN":
                    conn.sendall(tag + b" OK [CAPABILITY IMAP4rev1 IDLE] logged in\r\n")
                elif command == b"CAPABILITY":
                    conn.sendall(b"* CAPABILITY IMAP4rev1 IDLE\r\n" + tag + b" OK done\r\n")
                elif command in (b"EXAMINE", b"SELECT"):
                    conn.sendall(
                        b"* FLAGS ()\r\n* %d EXISTS\r\n* 0 RECENT\r\n* OK [UIDVALIDITY 7] ok\r\n"
                        b"* OK [UIDNEXT %d] ok\r\n" % (self.exists, self.exists + 1) + tag + b" OK [READ-ONLY] done\r\n"
                    )
                elif command == b"IDLE" and self.pieces is not None:
                    self.idles += 1
                    conn.sendall(b"+ idling\r\n")
                    for piece in self.pieces:
                        time.sleep(0.3)
                        conn.sendall(piece)
                    if reader.readline().strip().upper() != b"DONE":
                        return
                    conn.sendall(tag + b" OK IDLE terminated\r\n")
                elif command == b"IDLE":
                    self.idles += 1
                    self.exists += 1  # delivered between the EXAMINE and the IDLE
                    conn.sendall(b"+ idling\r\n* %d EXISTS\r\n* 1 RECENT\r\n" % self.exists)
                    if reader.readline().strip().upper() != b"DONE":
                        return
                    conn.sendall(tag + b" OK IDLE terminated\r\n")
                elif command == b"LOGOUT":
                    conn.sendall(b"* BYE bye\r\n" + tag + b" OK bye\r\n")
                    return
                else:
                    conn.sendall(tag + b" OK done\r\n")

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def scripted() -> Iterator[ScriptedImap]:
    server = ScriptedImap()
    yield server
    server.close()


def test_a_change_announced_with_the_idle_continuation_wakes_the_waiter(scripted: ScriptedImap) -> None:
    transport = SmtpImapTransport(
        Endpoint("127.0.0.1", 9, "none"), Endpoint("127.0.0.1", scripted.port, "none"), Login("beta@bus.test", "secret")
    )
    try:
        # The spool holds UID 1; UID 2 arrives as IDLE starts. A wait that slept on a change it
        # had already received would sleep ten minutes: pytest's timeout fails it.
        woke = transport.wait("7:1", 600.0)
    finally:
        transport.close()
    assert woke == "idle" and scripted.idles == 1


def test_a_notification_split_across_two_reads_is_read_whole() -> None:
    server = ScriptedImap(pieces=(b"* 2 EXISTS\r\n* ", b"1 RECENT\r\n"))
    transport = SmtpImapTransport(
        Endpoint("127.0.0.1", 9, "none"), Endpoint("127.0.0.1", server.port, "none"), Login("beta@bus.test", "secret")
    )
    try:
        woke = transport.wait("7:1", 600.0)
        assert transport._client is not None  # still connected: no "unexpected response" broke it
    finally:
        transport.close()
        server.close()
    assert woke == "idle"
