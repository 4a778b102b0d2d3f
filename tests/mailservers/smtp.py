"""A real SMTP submission server (aiosmtpd) that delivers into a :class:`MailStore`.

It behaves like a submission port: AUTH PLAIN/LOGIN, or an OAuth2 token by XOAUTH2 or
OAUTHBEARER (RFC 7628, the error challenge included), required before MAIL, delivery by
the envelope recipient (plus tags honoured), 550 at RCPT for unknown recipients, and
the store's injected faults answered at DATA.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import ssl
import weakref
from collections import defaultdict
from typing import Any, Literal

from aiosmtpd.smtp import MISSING, SMTP, AuthResult, Envelope, LoginPassword, Session

from .store import AcceptedMessage, MailStore

TlsMode = Literal["implicit", "starttls", "none"]

# aiosmtpd logs every connection at INFO and every client hang-up as a warning.
logging.getLogger("mail.log").setLevel(logging.ERROR)


# RFC 7628 §3.2.2's error status, sent base64-encoded as a 334 challenge (Gmail sends the same for XOAUTH2).
TOKEN_ERROR = json.dumps({"status": "invalid_token", "schemes": "bearer", "scope": "mail"}).encode()


def token_login(mechanism: str, payload: bytes) -> tuple[str, str] | None:
    """(user, token) of an XOAUTH2 (``user=U^Aauth=Bearer T^A^A``) or OAUTHBEARER
    (``n,a=U,^A...auth=Bearer T^A^A``) client response; None when it is malformed."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.endswith("\x01\x01"):
        return None
    fields = text[:-2].split("\x01")
    user = ""
    if mechanism == "OAUTHBEARER":
        gs2, fields = fields[0], fields[1:]
        parts = gs2.split(",")
        if len(parts) != 3 or parts[0] != "n" or not parts[1].startswith("a="):
            return None
        user = parts[1][2:].replace("=2C", ",").replace("=3D", "=")
    pairs = dict(f.partition("=")[::2] for f in fields)
    user = pairs.get("user", user)
    auth = pairs.get("auth", "")
    if not user or not auth.startswith("Bearer ") or len(auth) <= 7:
        return None
    return user, auth[7:]


class _Submission(SMTP):
    """aiosmtpd with RFC 4954's AUTH line of up to 12288 octets: an OAuth2 token is ~2 KB."""

    line_length_limit = 12288
    command_size_limits: dict[str, int] = defaultdict(lambda: SMTP.command_size_limit)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.command_size_limits["AUTH"] = self.line_length_limit

    async def smtp_AUTH(self, arg: str) -> None:
        # the store's auth_delay: a penalty before any answer to AUTH, as Dovecot's SASL gives
        await self.event_handler.store.auth_penalty(lambda: self.transport is None or self.transport.is_closing())
        await super().smtp_AUTH(arg)


class _Handler:
    """aiosmtpd hooks; each returns the SMTP reply line. ``auth_XOAUTH2``/``auth_OAUTHBEARER``
    are aiosmtpd's custom mechanisms (offered beside its own PLAIN and LOGIN)."""

    def __init__(self, store: MailStore, *, sender_login_check: bool = False, auth: bool = True) -> None:
        self.store = store
        self.sender_login_check = sender_login_check
        self.auth = auth

    async def handle_EHLO(
        self, server: SMTP, session: Session, envelope: Envelope, hostname: str, responses: list[str]
    ) -> list[str]:
        session.host_name = hostname
        if self.auth:
            return responses
        return [r for r in responses if not r.startswith("250-AUTH")]  # an MX offers no AUTH

    async def auth_XOAUTH2(self, server: SMTP, args: list[str]) -> AuthResult:
        return await self._token_auth(server, args, "XOAUTH2")

    async def auth_OAUTHBEARER(self, server: SMTP, args: list[str]) -> AuthResult:
        return await self._token_auth(server, args, "OAUTHBEARER")

    async def _token_auth(self, server: SMTP, args: list[str], mechanism: str) -> AuthResult:
        if len(args) > 1:
            try:
                payload = base64.b64decode(args[1], validate=True)
            except (binascii.Error, ValueError):
                return AuthResult(success=False, handled=False, message="501 5.5.2 Can't decode base64")
        else:
            got = await server.challenge_auth("")
            if got is MISSING:
                return AuthResult(success=False, handled=True)
            assert isinstance(got, bytes)
            payload = got
        parsed = token_login(mechanism, payload)
        account = self.store.authenticate_token(*parsed, "smtp", mechanism) if parsed else None
        if account is not None:
            self.store.bump("smtp.auth")
            self.store.bump(f"smtp.auth.{mechanism}")
            return AuthResult(success=True, auth_data=account)
        self.store.bump("smtp.auth_failed")
        # RFC 7628 §3.2.2: the failure is a challenge; the client's next line ends the exchange
        reply = await server.challenge_auth(TOKEN_ERROR)
        if reply is MISSING:  # "*": aiosmtpd has answered 501 already
            return AuthResult(success=False, handled=True)
        return AuthResult(success=False, handled=False, message="535 5.7.8 Username and token not accepted")

    async def handle_MAIL(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        mail_options: list[str],
    ) -> str:
        # Checked here, not with aiosmtpd's auth_required: that flag insists on TLS
        # (or warns on every connection), and implicit TLS is invisible to it.
        if not session.authenticated:
            return "530 5.7.0 Authentication required"
        if self.sender_login_check and address.lower() != str(session.auth_data).lower():
            # Postfix's reject_sender_login_mismatch
            return f"553 5.7.1 <{address}>: Sender address rejected: not owned by user {session.auth_data}"
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 2.1.0 OK"

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        if self.store.account_for(address) is None:
            self.store.bump("smtp.refused")
            return f"550 5.1.1 <{address}>: Recipient address rejected: User unknown"
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 2.1.5 OK"

    async def handle_NOOP(self, server: SMTP, session: Session, envelope: Envelope, arg: str) -> str:
        self.store.bump("smtp.NOOP")
        return "250 2.0.0 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if self.store.take_drop():
            if isinstance(server.transport, asyncio.Transport):
                server.transport.abort()
            return "421 4.3.2 connection dropped"  # never reaches the client
        fault = self.store.take_data_fault()
        if fault is not None:
            return f"{fault[0]} {fault[1]}"
        data = envelope.original_content or b""
        login = session.auth_data if isinstance(session.auth_data, str) else None
        self.store.record_accepted(AcceptedMessage(envelope.mail_from or "", tuple(envelope.rcpt_tos), data, login))
        for rcpt in envelope.rcpt_tos:
            self.store.deliver(rcpt, data, envelope.mail_from or "")
        self.store.bump("smtp.accepted")
        return "250 2.0.0 OK queued"


class SmtpServer:
    """Listens on ``host:port`` on the running loop; can go down and come back."""

    def __init__(
        self,
        store: MailStore,
        *,
        tls: TlsMode,
        ssl_context: ssl.SSLContext,
        host: str = "127.0.0.1",
        hostname: str = "mail.test",
        auth: bool = True,
        sender_login_check: bool = False,
    ) -> None:
        self.store = store
        self.auth = auth
        self.tls = tls
        self.host = host
        self.port = 0
        self._ssl_context = ssl_context
        self._hostname = hostname
        self._handler = _Handler(store, sender_login_check=sender_login_check, auth=auth)
        self._server: asyncio.Server | None = None
        self._live: weakref.WeakSet[SMTP] = weakref.WeakSet()

    def _authenticate(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        mechanism: str,
        auth_data: Any,
    ) -> AuthResult:
        if isinstance(auth_data, LoginPassword):
            login = auth_data.login.decode("utf-8", "replace")
            password = auth_data.password.decode("utf-8", "replace")
            account = self.store.authenticate(login, password)
            if account is not None:
                self.store.bump("smtp.auth")
                return AuthResult(success=True, auth_data=account)
        self.store.bump("smtp.auth_failed")
        # handled=False makes aiosmtpd send 535; handled=True would send nothing.
        return AuthResult(success=False, handled=False)

    def _protocol(self) -> SMTP:
        self.store.bump("smtp.connect")
        offered = set(self.store.mechanisms)
        smtp = _Submission(
            self._handler,
            hostname=self._hostname,
            ident="agentmail-test-smtpd",
            decode_data=False,
            enable_SMTPUTF8=True,
            authenticator=self._authenticate,
            tls_context=self._ssl_context if self.tls == "starttls" else None,
            require_starttls=self.tls == "starttls",
            # Implicit TLS is invisible to aiosmtpd, so it would refuse AUTH there.
            auth_require_tls=self.tls == "starttls",
            auth_exclude_mechanism=[m for m in ("PLAIN", "LOGIN", "XOAUTH2", "OAUTHBEARER") if m not in offered],
            loop=asyncio.get_running_loop(),
        )
        self._live.add(smtp)
        return smtp

    async def start(self) -> int:
        """Listen (on the previous port after a stop); returns the port."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._protocol,
            host=self.host,
            port=self.port,
            ssl=self._ssl_context if self.tls == "implicit" else None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        """Stop listening and drop every open connection, as a crashed MTA would."""
        if self._server is None:
            return
        self._server.close()
        for smtp in list(self._live):
            if isinstance(smtp.transport, asyncio.Transport):
                smtp.transport.abort()
        await self._server.wait_closed()
        self._server = None

    @property
    def running(self) -> bool:
        return self._server is not None
