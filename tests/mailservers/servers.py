"""Start the test SMTP and IMAP servers together on a background event loop."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import tempfile
import threading
from collections.abc import Coroutine, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from .certs import create_pki
from .imap import ImapServer
from .smtp import SmtpServer, TlsMode
from .store import MailStore

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread; the test thread submits coroutines."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="mailservers", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> None:
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.call(cancel_all())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


class MailServers:
    """A real SMTP submission server and IMAP server on 127.0.0.1 sharing one store.

    Example::

        with MailServers("bus.test", {"alpha@bus.test": "pw1"}) as ms:
            ctx = ssl.create_default_context(cafile=ms.ca_file)
            await aiosmtplib.send(msg, port=ms.smtp_port, start_tls=True, tls_context=ctx, ...)

    ``smtp_tls``/``imap_tls``: ``"implicit"`` (TLS from the first byte), ``"starttls"``
    (clear text until STARTTLS, which is then mandatory before AUTH) or ``"none"``.
    ``ca_file`` is the CA clients should trust. With ``untrusted_cert=True`` the servers
    present a certificate from another CA (``untrusted_ca_file``), so verification
    against ``ca_file`` fails as it must. ``cert_hosts`` are the names in the server
    certificate (leave out ``127.0.0.1`` to test a hostname mismatch). ``smtp_auth=False``
    offers no AUTH (an MX, not a submission port); ``sender_login_check`` refuses a MAIL FROM
    that is not the login's own address (Postfix's ``reject_sender_login_mismatch``).
    """

    def __init__(
        self,
        domain: str = "bus.test",
        users: Mapping[str, str] | None = None,
        *,
        smtp_tls: TlsMode = "starttls",
        imap_tls: TlsMode = "implicit",
        untrusted_cert: bool = False,
        cert_hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
        folders: Iterable[str] = ("Sent",),
        host: str = "127.0.0.1",
        smtp_auth: bool = True,
        sender_login_check: bool = False,
    ) -> None:
        self.host = host
        self.store = MailStore(domain, users or {}, folders=folders)
        self._dir = Path(tempfile.mkdtemp(prefix="agentmail-mailservers-"))
        trusted = create_pki(self._dir, name="trusted", hosts=cert_hosts)
        self.ca_file: Path = trusted.ca_file
        self.untrusted_ca_file: Path | None = None
        presented = trusted
        if untrusted_cert:
            presented = create_pki(self._dir, name="untrusted", hosts=cert_hosts)
            self.untrusted_ca_file = presented.ca_file
        server_ctx = presented.server_context()
        self._loop = _LoopThread()
        self._smtp = SmtpServer(
            self.store,
            tls=smtp_tls,
            ssl_context=server_ctx,
            host=host,
            hostname=f"mail.{domain}",
            auth=smtp_auth,
            sender_login_check=sender_login_check,
        )
        self._imap = ImapServer(self.store, tls=imap_tls, ssl_context=server_ctx, host=host)
        self._started = False

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> MailServers:
        self._loop.start()
        self._started = True
        try:
            self._loop.call(self._smtp.start())
            self._loop.call(self._imap.start())
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._started:
            self._loop.call(self._smtp.stop())
            self._loop.call(self._imap.stop())
            self._loop.close()
            self._started = False
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> MailServers:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- ports and TLS ------------------------------------------------------------------

    @property
    def smtp_tls(self) -> TlsMode:
        return self._smtp.tls

    @property
    def imap_tls(self) -> TlsMode:
        return self._imap.tls

    @property
    def smtp_port(self) -> int:
        return self._smtp.port

    @property
    def imap_port(self) -> int:
        return self._imap.port

    def client_context(self) -> ssl.SSLContext:
        """A verifying client context trusting ``ca_file`` (what a client should use)."""
        return ssl.create_default_context(cafile=str(self.ca_file))

    # -- outages --------------------------------------------------------------------

    def stop_smtp(self) -> None:
        """Take SMTP down: connections refused, open sessions dropped."""
        self._loop.call(self._smtp.stop())

    def start_smtp(self) -> None:
        """Bring SMTP back on the same port."""
        if not self._smtp.running:
            self._loop.call(self._smtp.start())

    def stop_imap(self) -> None:
        """Take IMAP down: connections refused, open sessions (IDLE too) dropped."""
        self._loop.call(self._imap.stop())

    def start_imap(self) -> None:
        """Bring IMAP back on the same port."""
        if not self._imap.running:
            self._loop.call(self._imap.start())
