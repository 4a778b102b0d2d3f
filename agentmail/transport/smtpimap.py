"""The ``smtp+imap`` transport: submit with aiosmtplib, pull with imapclient (DESIGN §2).

Submission: TLS as configured (certificates verified; ``ca_file`` adds a private CA), AUTH,
all queued letters over one connection. A 250 moves a letter to sent; a 4xx, a timeout or an
unreachable server leaves it queued; a 5xx fails it with the server's words.

Pull: ``BODY.PEEK[]`` (never sets \\Seen, so a human's mail client is undisturbed), sizes
checked with RFC822.SIZE before download, batched FETCH, and a checkpoint of UIDVALIDITY and
the last committed UID. A changed UIDVALIDITY re-reads the mailbox; the spool drops what it
already holds. Nothing from a letter is ever put into an IMAP command.
"""

from __future__ import annotations

import asyncio
import selectors
import socket
import ssl
import time
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosmtplib
import imapclient
from imapclient.exceptions import IMAPClientError, LoginError

from ..credentials import Login, mailbox_login
from ..errors import ConfigError, TransportError
from ..registry import Endpoint, Registry, is_loopback
from .base import Incoming, OnResult, Outgoing, SubmitResult, Transport

T = TypeVar("T")
BATCH = 200
TIMEOUT = 30.0
IDLE_RENEW = 25 * 60  # RFC 2177: servers may drop an IDLE after 30 minutes


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Verification on, always; ``ca_file`` trusts a private CA on top of the system's."""
    context = ssl.create_default_context()
    if ca_file:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load the CA file {ca_file}: {exc}") from None
    return context


def _where(endpoint: Endpoint) -> str:
    return f"{endpoint.host}:{endpoint.port}"


def _cert_error(endpoint: Endpoint, exc: BaseException) -> ConfigError:
    reason = getattr(exc, "verify_message", None) or str(exc)
    return ConfigError(f"the TLS certificate of {_where(endpoint)} is not trusted ({reason}); "
                       "name its CA with --ca-file / ca_file in bus.toml")  # fmt: skip


def _find_cert_error(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _already_received(client: imapclient.IMAPClient) -> bool:
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


def _until_readable(client: imapclient.IMAPClient, timeout: float) -> None:
    """Block until the server has said something during IDLE, or ``timeout``; read nothing.

    Not imapclient's idle_check: it reads lines with the socket non-blocking, and a line that
    arrives in two pieces loses its first piece (the buffered reader drops it when the second
    read would block), so the next read fails with "unexpected response". Here idle_done()
    reads every line whole, in blocking mode. And a change the server announced together
    with IDLE's continuation is already off the socket, where polling would never see it."""
    if _already_received(client):
        return
    with selectors.DefaultSelector() as selector:
        selector.register(client.socket(), selectors.EVENT_READ)
        selector.select(timeout)


class SmtpImapTransport(Transport):
    name = "imap"

    def __init__(self, smtp: Endpoint, imap: Endpoint, login: Login, *, ca_file: str | None = None,
                 sent_folder: str | None = None, poll_interval: float | None = None) -> None:  # fmt: skip
        for endpoint in (smtp, imap):
            if endpoint.tls == "none" and not is_loopback(endpoint.host):
                raise ConfigError(f"plaintext to {_where(endpoint)} is refused: tls = none is only for loopback")
        self.smtp, self.imap, self.login = smtp, imap, login
        self.context = tls_context(ca_file)
        self.sent_folder = sent_folder
        self.poll_interval = poll_interval
        self._client: imapclient.IMAPClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._smtp_session: aiosmtplib.SMTP | None = None
        self._uidvalidity: str = ""

    @classmethod
    def from_registry(cls, registry: Registry, platform: str, home: Path) -> SmtpImapTransport:
        bus = registry.bus
        assert bus.smtp is not None and bus.imap is not None
        entry = registry.get(platform)
        return cls(bus.smtp, bus.imap, mailbox_login(home, platform, entry.address), ca_file=bus.ca_file,
                   sent_folder=bus.sent_folder, poll_interval=bus.poll_interval)  # fmt: skip

    # --- submission ------------------------------------------------------------------------

    def submit(self, messages: Sequence[Outgoing], on_result: OnResult | None = None) -> list[SubmitResult]:
        if not messages:
            return []
        results = self._run(self._submit(messages, on_result or (lambda _result: None)))
        if self.sent_folder:
            self._copy_to_sent([m.raw for m, r in zip(messages, results, strict=True) if r.status == "sent"])
        return results

    def _smtp_client(self) -> aiosmtplib.SMTP:
        return aiosmtplib.SMTP(
            hostname=self.smtp.host, port=self.smtp.port, use_tls=self.smtp.tls == "implicit",
            start_tls=True if self.smtp.tls == "starttls" else False, tls_context=self.context,
            timeout=TIMEOUT, local_hostname="agentmail.localhost",
        )  # fmt: skip

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run on this transport's own event loop, which outlives a call so a session can too."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coroutine)

    async def _session(self) -> aiosmtplib.SMTP:
        """The authenticated session, reused while the server keeps it open (a NOOP tells)."""
        client = self._smtp_session
        if client is not None and client.is_connected:
            try:
                await client.noop()
                return client
            except (aiosmtplib.SMTPException, OSError, asyncio.TimeoutError):
                client.close()
        self._smtp_session = None
        client = self._smtp_client()
        await client.connect()
        try:
            await client.login(self.login.username, self.login.password)
        except BaseException:
            client.close()  # a refused login must not leave the connection open
            raise
        self._smtp_session = client
        return client

    async def _submit(self, messages: Sequence[Outgoing], on_result: OnResult) -> list[SubmitResult]:
        results: list[SubmitResult] = []

        def record(result: SubmitResult) -> None:
            results.append(result)
            on_result(result)

        try:
            client = await self._session()
        except aiosmtplib.SMTPAuthenticationError as exc:
            raise ConfigError(f"{_where(self.smtp)} refused the login of {self.login.username} ({exc.code})") from None
        except Exception as exc:
            cert = _find_cert_error(exc)
            if cert is not None:
                raise _cert_error(self.smtp, cert) from None
            why = f"cannot reach {_where(self.smtp)}: {exc.__class__.__name__}: {exc}"
            for m in messages:
                record(SubmitResult(m.key, "queued", why))
            return results
        for index, item in enumerate(messages):
            try:
                refused, _response = await client.sendmail(item.envelope.mail_from, list(item.envelope.rcpt_to), item.raw)
            except aiosmtplib.SMTPRecipientsRefused as exc:
                record(self._refused_all(item, [(r.recipient, r.code, r.message) for r in exc.recipients]))
                await self._reset(client)
            except aiosmtplib.SMTPResponseException as exc:
                status = "failed" if 500 <= exc.code < 600 else "queued"
                record(SubmitResult(item.key, status, f"{exc.code} {exc.message}"))
                await self._reset(client)
            except (aiosmtplib.SMTPException, OSError, asyncio.TimeoutError) as exc:
                client.close()
                self._smtp_session = None
                why = f"the connection to {_where(self.smtp)} broke: {exc.__class__.__name__}"
                for m in messages[index:]:
                    record(SubmitResult(m.key, "queued", why))
                return results
            else:
                partial = tuple((addr, f"{code} {msg}") for addr, (code, msg) in refused.items())
                record(SubmitResult(item.key, "sent", "250 accepted", partial))
        return results

    @staticmethod
    def _refused_all(item: Outgoing, refusals: list[tuple[str, int, str]]) -> SubmitResult:
        detail = "; ".join(f"{addr}: {code} {msg}" for addr, code, msg in refusals)
        permanent = all(500 <= code < 600 for _, code, _ in refusals)
        return SubmitResult(item.key, "failed" if permanent else "queued", detail,
                            tuple((a, f"{c} {m}") for a, c, m in refusals))  # fmt: skip

    @staticmethod
    async def _reset(client: aiosmtplib.SMTP) -> None:
        try:
            await client.rset()
        except aiosmtplib.SMTPException:
            pass

    def _copy_to_sent(self, raws: list[bytes]) -> None:
        """So a human sees both directions in a mail client; a failure here never unsends."""
        if not raws or not self.sent_folder:
            return
        try:
            client = self._connect()
            if not client.folder_exists(self.sent_folder):
                client.create_folder(self.sent_folder)
            for raw in raws:
                client.append(self.sent_folder, raw, flags=(imapclient.SEEN,))
        except (IMAPClientError, OSError, TransportError):
            pass

    # --- pulling ---------------------------------------------------------------------------

    def _connect(self) -> imapclient.IMAPClient:
        if self._client is not None:
            return self._client
        try:
            client = imapclient.IMAPClient(self.imap.host, port=self.imap.port, ssl=self.imap.tls == "implicit",
                                           ssl_context=self.context, timeout=TIMEOUT)  # fmt: skip
            # imaplib writes a command and its CRLF (or an APPEND literal) in two sends: without
            # NODELAY, Nagle and the server's delayed ACK stall each such command ~40 ms.
            client.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.imap.tls == "starttls":
                client.starttls(self.context)
            client.login(self.login.username, self.login.password)
        except LoginError:
            raise ConfigError(f"{_where(self.imap)} refused the login of {self.login.username}") from None
        except ssl.SSLCertVerificationError as exc:
            raise _cert_error(self.imap, exc) from None
        except (IMAPClientError, OSError, socket.timeout) as exc:
            cert = _find_cert_error(exc)
            if cert is not None:
                raise _cert_error(self.imap, cert) from None
            raise TransportError(f"cannot reach {_where(self.imap)}: {exc.__class__.__name__}: {exc}") from None
        self._client = client
        return client

    def _select(self) -> tuple[str, int]:
        """(UIDVALIDITY, UIDNEXT) of INBOX, read-only so no flag ever changes."""
        info = self._connect().select_folder("INBOX", readonly=True)
        validity = str(info.get(b"UIDVALIDITY", b""))
        self._uidvalidity = validity
        uidnext = int(info.get(b"UIDNEXT", 0) or 0)
        return validity, uidnext

    @staticmethod
    def _parse(checkpoint: str | None) -> tuple[str, int]:
        if not checkpoint or ":" not in checkpoint:
            return "", 0
        validity, _, last = checkpoint.partition(":")
        return validity, int(last) if last.isdigit() else 0

    def fetch(self, checkpoint: str | None, max_size: int) -> Iterator[list[Incoming]]:
        try:
            yield from self._fetch(checkpoint, max_size)
        except (IMAPClientError, OSError, socket.timeout) as exc:
            self._drop()
            raise TransportError(f"IMAP {_where(self.imap)} failed: {exc.__class__.__name__}: {exc}") from None

    def _fetch(self, checkpoint: str | None, max_size: int) -> Iterator[list[Incoming]]:
        validity, uidnext = self._select()
        seen_validity, last = self._parse(checkpoint)
        if seen_validity != validity:
            last = 0  # the server renumbered the mailbox: read it all, the spool drops duplicates
        if uidnext and uidnext <= last + 1:
            return
        client = self._connect()
        # "UID n:*" always returns at least the last message (RFC 3501 §6.4.8): filter, and sort
        # ourselves rather than trusting the server's order.
        uids = sorted(u for u in client.search(["UID", f"{last + 1}:*"]) if u > last)
        for start in range(0, len(uids), BATCH):
            chunk = uids[start : start + BATCH]
            sizes = client.fetch(chunk, ["RFC822.SIZE"])
            small = [u for u in chunk if int(sizes.get(u, {}).get(b"RFC822.SIZE", 0)) <= max_size]
            bodies = client.fetch(small, ["BODY.PEEK[]"]) if small else {}
            batch = []
            for uid in chunk:
                size = int(sizes.get(uid, {}).get(b"RFC822.SIZE", 0))
                if uid in bodies:
                    raw = bodies[uid].get(b"BODY[]")
                    if raw is None:
                        continue  # expunged between the two FETCHes
                    batch.append(Incoming(str(uid), bytes(raw), size))
                elif uid in sizes:
                    batch.append(Incoming(str(uid), None, size))
            if batch:
                yield batch

    def advance(self, checkpoint: str | None, committed: Sequence[Incoming]) -> str | None:
        seen_validity, last = self._parse(checkpoint)
        if seen_validity != self._uidvalidity:
            last = 0
        top = max([last, *(int(item.key) for item in committed)])
        return f"{self._uidvalidity}:{top}"

    def wait(self, checkpoint: str | None, timeout: float) -> str | None:
        try:
            return self._wait(checkpoint, timeout)
        except (IMAPClientError, OSError, socket.timeout) as exc:
            self._drop()
            raise TransportError(f"IMAP {_where(self.imap)} failed while waiting: {exc.__class__.__name__}: {exc}") from None

    def pending(self, checkpoint: str | None) -> bool:
        try:
            return self._pending(checkpoint)
        except (IMAPClientError, OSError, socket.timeout) as exc:
            self._drop()
            raise TransportError(f"IMAP {_where(self.imap)} failed: {exc.__class__.__name__}: {exc}") from None

    def _pending(self, checkpoint: str | None) -> bool:
        validity, uidnext = self._select()
        seen_validity, last = self._parse(checkpoint)
        return validity != seen_validity or uidnext > last + 1

    def _wait(self, checkpoint: str | None, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        if self._pending(checkpoint):
            return "pending"
        client = self._connect()
        if self.poll_interval or b"IDLE" not in client.capabilities():
            interval = self.poll_interval or 1.0
            while time.monotonic() < deadline:
                time.sleep(min(interval, max(deadline - time.monotonic(), 0)))
                client.noop()
                if self._pending(checkpoint):
                    return "poll"
            return None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            client.idle()
            try:
                _until_readable(client, min(left, IDLE_RENEW))
            finally:
                _done, responses = client.idle_done()  # whole lines, read in blocking mode
            if any(isinstance(r, tuple) and len(r) > 1 and r[1] in (b"EXISTS", b"RECENT") for r in responses):
                return "idle"

    # --- lifecycle -------------------------------------------------------------------------

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.shutdown()
            except Exception:
                pass

    def close(self) -> None:
        session, self._smtp_session = self._smtp_session, None
        if session is not None and self._loop is not None:
            connection = session.transport
            try:
                self._loop.run_until_complete(session.quit())
            except Exception:
                session.close()
            if isinstance(connection, asyncio.Transport):
                # Closing a TLS transport only schedules the socket's close on the loop: abort
                # it and let the loop turn, or closing the loop leaves the socket open.
                connection.abort()
                self._loop.run_until_complete(asyncio.sleep(0))
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        client, self._client = self._client, None
        if client is not None:
            try:
                client.logout()
            except Exception:
                try:
                    client.shutdown()
                except Exception:
                    pass

    def doctor(self) -> list[tuple[str, bool, str]]:
        """Connectivity checks for ``agentmail doctor``; never includes a secret."""
        checks: list[tuple[str, bool, str]] = [("mailbox login", True, f"{self.login.username} (password present)")]
        try:
            client = self._smtp_client()

            async def probe() -> None:
                await client.connect()
                await client.login(self.login.username, self.login.password)
                await client.quit()

            asyncio.run(probe())
            checks.append(("smtp", True, f"{_where(self.smtp)} {self.smtp.tls} TLS, AUTH accepted"))
        except aiosmtplib.SMTPAuthenticationError as exc:
            checks.append(("smtp", False, f"{_where(self.smtp)} refused the login of {self.login.username} ({exc.code}): check the password"))
        except Exception as exc:
            cert = _find_cert_error(exc)
            checks.append(("smtp", False, str(_cert_error(self.smtp, cert)) if cert else
                           f"cannot reach {_where(self.smtp)} ({exc.__class__.__name__}); check host, port and tls mode"))  # fmt: skip
        try:
            client = self._connect()
            checks.append(("imap", True, f"{_where(self.imap)} {self.imap.tls} TLS, login accepted"))
            idle = b"IDLE" in client.capabilities()
            checks.append(("imap idle", idle, "IDLE supported" if idle else "no IDLE: set poll_interval in bus.toml [imap]"))
            if self.sent_folder:
                exists = client.folder_exists(self.sent_folder)
                checks.append(("sent folder", True, f"{self.sent_folder} {'exists' if exists else 'will be created on first send'}"))
        except (ConfigError, TransportError) as exc:
            checks.append(("imap", False, str(exc)))
        return checks

    def __repr__(self) -> str:
        return f"SmtpImapTransport(smtp={_where(self.smtp)}, imap={_where(self.imap)}, login={self.login!r})"


