"""IMAP steps imapclient does not take, or not right: what the socket already holds, a wait
for the server's next word during IDLE, imaplib's command counter, a search for one of our
letters by Message-ID, a server lost while copying said once, and the conditional STORE of a reply claim (CONDSTORE, RFC 7162)."""

from __future__ import annotations

import re
import selectors
import ssl
from typing import Any, NoReturn

from ..config.registry import Endpoint
from ..errors import TransportError
from .logins import endpoint_name


def already_received(client: Any) -> bool:
    """Has the server sent something that is already off the socket (in imaplib's buffered
    reader or the TLS layer)? Never blocks."""
    sock = client.socket()
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    reader = getattr(getattr(client, "_imap", None), "file", None)
    peek = getattr(reader, "peek", None)
    if peek is None:
        return False
    previous = sock.gettimeout()
    sock.setblocking(False)
    try:
        return bool(peek(1))
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return False
    finally:
        sock.settimeout(previous)


_MESSAGE_ID = re.compile(rb"(?im)^Message-ID:[ \t]*(<[!-;=?-~]+>)[ \t]*\r?$")


def holds_copy(client: Any, raw: bytes) -> bool:
    """Does the selected folder hold a letter with ``raw``'s Message-ID (one of ours: written
    plainly, so it is searched for as it is)?"""
    found = _MESSAGE_ID.search(raw[: raw.find(b"\r\n\r\n") if b"\r\n\r\n" in raw else len(raw)])
    return found is not None and bool(client.search(["HEADER", "Message-ID", found.group(1).decode()]))


def command_tag(client: Any) -> int:
    """imaplib's command counter: unchanged means no command went since."""
    return int(getattr(getattr(client, "_imap", None), "tagnum", -1))


def until_readable(client: Any, timeout: float) -> None:
    """Block until the server has said something during IDLE, or ``timeout``; read nothing.

    Not imapclient's idle_check: it reads lines with the socket non-blocking, and a line that
    arrives in two pieces loses its first piece (the buffered reader drops it when the second
    read would block), so the next read fails with "unexpected response". Here idle_done()
    reads every line whole, in blocking mode. And a change the server announced together
    with IDLE's continuation is already off the socket, where polling would never see it."""
    if already_received(client):
        return
    with selectors.DefaultSelector() as selector:
        selector.register(client.socket(), selectors.EVENT_READ)
        selector.select(timeout)


def store_unless_modified(client: Any, uid: int, modseq: int, keywords: list[str], imap_at: Endpoint) -> bool:
    """``UID STORE uid (UNCHANGEDSINCE modseq) +FLAGS.SILENT (keywords)``: True when the
    server applied it, False when the letter changed since ``modseq`` ([MODIFIED]).
    imapclient 4.1 has no UNCHANGEDSINCE: the command goes through its imaplib."""
    imap = client._imap
    imap.untagged_responses.pop("MODIFIED", None)
    typ, data = imap.uid("STORE", str(uid), f"(UNCHANGEDSINCE {modseq})", "+FLAGS.SILENT", f"({' '.join(keywords)})")
    modified = imap.untagged_responses.pop("MODIFIED", None)
    imap.untagged_responses.pop("FETCH", None)
    if typ != "OK":
        raise TransportError(f"IMAP {endpoint_name(imap_at)} refused the claim's STORE: {data!r}"[:300])
    return not modified


def raise_unreachable(imap: Endpoint, exc: BaseException) -> NoReturn:
    """A copy left for later met a server it cannot reach now: said as a TransportError, once."""
    if isinstance(exc, TransportError):
        raise exc
    raise TransportError(
        f"IMAP {endpoint_name(imap)} failed copying to the sent folder: {exc.__class__.__name__}: {exc}"
    ) from exc
