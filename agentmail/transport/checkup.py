"""What ``agentmail doctor`` finds of an smtp+imap bus (DESIGN §8): the login's source, each
server reached and how (TLS, the SASL mechanism it took), whether the platform may send as
itself, IDLE, the reply claims the server allows (CONDSTORE, keywords) and the sent folder.
Every check connects for real; no line holds a secret.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import aiosmtplib
from imapclient.exceptions import IMAPClientError

from ..config.credentials import Login
from ..config.registry import Endpoint
from ..errors import AgentmailError
from .claim_marks import keeps_keywords, server_claims
from .logins import (
    SASL,
    endpoint_name,
    imap_connect,
    offered,
    problem,
    secret_noun,
    smtp_client,
    smtp_login,
    tls_context,
)


class Checked(Protocol):
    """What ``doctor`` asks of the transport it checks (``smtpimap.SmtpImapTransport``, which
    calls it: named here, so the two modules import one way)."""

    smtp: Endpoint
    imap: Endpoint
    login: Login
    auth: str
    sent_folder: str | None
    _imap_offered: tuple[bytes, ...]

    def _smtp_client(self) -> aiosmtplib.SMTP: ...
    def _connect(self) -> Any: ...
    def _sent_folder(self, client: Any) -> str | None: ...


def doctor(transport: Checked, address: str = "") -> list[tuple[str, bool, str]]:
    """Connectivity checks for ``agentmail doctor``; never includes a secret."""
    noun = secret_noun(transport.auth)
    source = f"{noun} from {transport.login.source or 'the caller'}"
    # the password line as it always was; a token names its mechanism
    how = (
        f"{transport.login.username} ({source})"
        if transport.auth not in SASL
        else f"{transport.login.username}, auth {transport.auth} ({source})"
    )
    try:
        if transport.login.command or transport.login.keyring:
            transport.login.secret()  # the source answers (each connection below asks it again)
        checks: list[tuple[str, bool, str]] = [("mailbox login", True, how)]
    except AgentmailError as exc:  # the error names the source: said once
        who = (
            transport.login.username
            if transport.auth not in SASL
            else f"{transport.login.username}, auth {transport.auth}"
        )
        checks = [("mailbox login", False, f"{who}: {exc}")]
    methods: list[str] = []

    async def probe() -> tuple[bool, str]:
        client = transport._smtp_client()
        await smtp_login(client, transport.smtp, transport.login, transport.auth)
        methods.extend(client.server_auth_methods)
        try:
            if not address:
                return True, ""
            # May this login send as the platform? Postfix's reject_sender_login_mismatch
            # answers at RCPT; nothing is sent (RSET before DATA).
            try:
                await client.mail(address)
                await client.rcpt(address)
            except aiosmtplib.SMTPResponseException as exc:
                return False, f"{exc.code} {exc.message}"
            finally:
                try:
                    await client.rset()
                except aiosmtplib.SMTPException:
                    pass
            return True, ""
        finally:
            connection = client.transport
            try:
                await client.quit()
            except aiosmtplib.SMTPException:
                client.close()
            finally:
                if isinstance(connection, asyncio.Transport):
                    # QUIT only schedules the socket's close: abort it and let the loop turn
                    # before the loop is closed below, or the socket outlives it.
                    connection.abort()
                    await asyncio.sleep(0)

    loop = asyncio.new_event_loop()
    try:
        may_send, refusal = loop.run_until_complete(probe())
        used = f"AUTH {SASL[transport.auth]}" if transport.auth in SASL else "AUTH with the password"
        checks.append(
            (
                "smtp",
                True,
                f"{endpoint_name(transport.smtp)} {transport.smtp.tls} TLS, {used} accepted (EHLO offers AUTH {offered(methods)})",
            )
        )
        if address:
            own = transport.login.username.lower() == address.lower()
            detail = (
                f"{transport.login.username} is the platform's own address"
                if own and may_send
                else f"login {transport.login.username} may send as {address}"
                if may_send
                else f"the server refuses {address} as sender for login {transport.login.username} ({refusal}): log in "
                f"as {address} (AGENTMAIL_USERNAME) or let that login send as it"
            )
            checks.append(("sender", may_send, detail))
    except AgentmailError as exc:
        checks.append(("smtp", False, str(exc)))
    except Exception as exc:
        checks.append(("smtp", False, str(problem(transport.smtp, "smtp", exc, transport.login, transport.auth))))
    finally:
        loop.close()
    try:
        client = transport._connect()
        used = f"AUTHENTICATE {SASL[transport.auth]}" if transport.auth in SASL else "LOGIN with the password"
        caps = " ".join(c.decode("ascii", "replace") for c in transport._imap_offered if c.startswith(b"AUTH="))
        checks.append(
            (
                "imap",
                True,
                f"{endpoint_name(transport.imap)} {transport.imap.tls} TLS, {used} accepted (CAPABILITY offers {caps or 'no AUTH='})",
            )
        )
        idle = b"IDLE" in client.capabilities()
        checks.append(
            ("imap idle", idle, "IDLE supported" if idle else "no IDLE: set poll_interval in bus.toml [imap]")
        )
        kept = keeps_keywords(client.select_folder("INBOX", readonly=False))
        client.select_folder("INBOX", readonly=True)
        checks.append(("imap claims", True, server_claims(b"CONDSTORE" in client.capabilities(), kept)))
        checks.append(
            (
                "imap keywords",
                True,
                "$AgentmailVerified / $AgentmailQuarantined are set on INBOX letters"
                if kept
                else "the server keeps no keywords (PERMANENTFLAGS without \\*): a person reading this "
                "mailbox sees no $AgentmailVerified / $AgentmailQuarantined marks",
            )
        )
        folder = transport._sent_folder(client)
        if folder is None:
            checks.append(
                (
                    "sent folder",
                    True,
                    "none: no folder is marked \\Sent and bus.toml sets no sent_folder; sent letters are not copied",
                )
            )
        else:
            exists = client.folder_exists(folder)
            how = "from bus.toml" if transport.sent_folder else "marked \\Sent by the server"
            checks.append(
                ("sent folder", True, f"{folder} ({how}) {'exists' if exists else 'will be created on first send'}")
            )
    except AgentmailError as exc:
        checks.append(("imap", False, str(exc)))
    except (IMAPClientError, OSError) as exc:
        checks.append(("imap", False, str(problem(transport.imap, "imap", exc, transport.login, transport.auth))))
    return checks


def reach(smtp: Endpoint, imap: Endpoint, ca_file: str | None) -> list[tuple[str, bool, str]]:
    """Each server reached and its TLS certificate checked, without a login: what ``doctor`` can
    still tell before the mailbox's credentials exist."""
    try:
        context = tls_context(ca_file)
    except AgentmailError as exc:
        return [("smtp", False, str(exc)), ("imap", False, str(exc))]
    untried = "the login is not tried (no credentials yet)"

    async def smtp_probe() -> list[str]:
        client = smtp_client(smtp, context)
        try:
            await client.connect()
            if client.last_ehlo_response is None:
                await client.ehlo()
            return list(client.server_auth_methods)
        finally:
            connection = client.transport
            client.close()
            if isinstance(connection, asyncio.Transport):
                connection.abort()  # the socket closed before the loop is
                await asyncio.sleep(0)

    checks: list[tuple[str, bool, str]] = []
    loop = asyncio.new_event_loop()
    try:
        methods = loop.run_until_complete(smtp_probe())
        checks.append(
            (
                "smtp",
                True,
                f"{endpoint_name(smtp)} {smtp.tls} TLS reached (EHLO offers AUTH {offered(methods)}); {untried}",
            )
        )
    except Exception as exc:
        checks.append(("smtp", False, str(problem(smtp, "smtp", exc))))
    finally:
        loop.close()
    try:
        client = imap_connect(imap, context)
        try:
            caps = " ".join(c.decode("ascii", "replace") for c in client.capabilities() if c.startswith(b"AUTH="))
        finally:
            client.shutdown()
        checks.append(
            (
                "imap",
                True,
                f"{endpoint_name(imap)} {imap.tls} TLS reached (CAPABILITY offers {caps or 'no AUTH='}); {untried}",
            )
        )
    except Exception as exc:
        checks.append(("imap", False, str(problem(imap, "imap", exc))))
    return checks
