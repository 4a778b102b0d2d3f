"""TLS and sign-in for both protocols (DESIGN §2): the verified TLS context, the SASL login by
password or OAuth2 token (XOAUTH2, OAUTHBEARER: RFC 7628), and a failed connection or login
told in one line that says what to do.
"""

from __future__ import annotations

import asyncio
import base64
import re
import socket
import ssl
from collections.abc import Sequence

import aiosmtplib
import imapclient
from imapclient.exceptions import LoginError

from ..config.credentials import Login
from ..config.registry import Endpoint
from ..errors import AgentmailError, ConfigError, TransportError
from . import diagnose

HANDSHAKE_TIMEOUT = 5.0  # connect, greeting, TLS: a wrong TLS mode fails in seconds
# The login has its own: a server's auth penalty (Dovecot's grows to 15 s with each failure from
# one address) delays a refusal, which must still be read as one, not as an outage.
LOGIN_TIMEOUT = 30.0
TIMEOUT = 30.0  # one command once logged in (a large DATA or FETCH)
# SASL names of the bus.toml ``auth`` values that send a token (RFC 7628, Google's XOAUTH2).
SASL = {"xoauth2": "XOAUTH2", "oauthbearer": "OAUTHBEARER"}
BEARER_RE = re.compile(r"[A-Za-z0-9\-._~+/]+=*")  # RFC 6750 §2.1 b64token: all a token may be


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Verification on, always; ``ca_file`` trusts a private CA on top of the system's."""
    context = ssl.create_default_context()
    if ca_file:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load the CA file {ca_file}: {exc}") from exc
    return context


def smtp_client(endpoint: Endpoint, context: ssl.SSLContext) -> aiosmtplib.SMTP:
    """A submission client, not connected yet: TLS as ``endpoint`` says, the handshake timeout."""
    return aiosmtplib.SMTP(
        hostname=endpoint.host,
        port=endpoint.port,
        use_tls=endpoint.tls == "implicit",
        start_tls=endpoint.tls == "starttls",
        tls_context=context,
        timeout=HANDSHAKE_TIMEOUT,
        local_hostname="agentmail.localhost",
    )


def imap_connect(endpoint: Endpoint, context: ssl.SSLContext) -> imapclient.IMAPClient:
    """An IMAP connection in TLS as ``endpoint`` says, not logged in; raises what it meets (the
    caller closes nothing: a failure leaves no socket open)."""
    # The connect timeout covers the greeting and the TLS handshake too: a wrong TLS mode fails in
    # seconds. Commands once logged in get the longer read timeout.
    client = imapclient.IMAPClient(
        endpoint.host,
        port=endpoint.port,
        ssl=endpoint.tls == "implicit",
        ssl_context=context,
        timeout=imapclient.SocketTimeout(HANDSHAKE_TIMEOUT, TIMEOUT),
    )
    try:
        # imaplib writes a command and its CRLF (or an APPEND literal) in two sends: without
        # NODELAY, Nagle and the server's delayed ACK stall each such command ~40 ms.
        client.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if endpoint.tls == "starttls":
            client.socket().settimeout(HANDSHAKE_TIMEOUT)
            client.starttls(context)
    except BaseException:
        try:
            client.shutdown()
        except Exception:
            pass
        raise
    return client


def endpoint_name(endpoint: Endpoint) -> str:
    return f"{endpoint.host}:{endpoint.port}"


def _cert_error(endpoint: Endpoint, exc: BaseException, what: str = "smtp") -> ConfigError:
    reason = getattr(exc, "verify_message", None) or str(exc)
    issuer = diagnose.peer_issuer(endpoint.host, endpoint.port, endpoint.tls, what)
    by = f"; it is issued by {issuer}" if issuer else ""
    return ConfigError(
        f"the TLS certificate of {endpoint_name(endpoint)} is not trusted ({reason}{by}): put that CA's "
        f"certificate in the registry with 'agentmail bus set ca_file PATH/TO/ca.pem' (it is copied "
        f"beside bus.toml and stored as the top-level key ca_file, relative to the registry)"
    )


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def secret_noun(auth: str) -> str:
    """What the secret of ``auth`` is called in messages: ``password`` or ``XOAUTH2 token``."""
    return f"{SASL[auth]} token" if auth in SASL else "password"


def problem(
    endpoint: Endpoint, what: str, exc: BaseException, login: Login | None = None, auth: str = "password"
) -> AgentmailError:
    """What a failure to connect or log in means: a ConfigError (fix something; retrying will not
    help, so a letter is never queued behind it) or a TransportError (try again later)."""
    where = endpoint_name(endpoint)
    chain = _chain(exc)
    if isinstance(exc, AgentmailError):
        return exc
    if isinstance(exc, aiosmtplib.SMTPAuthenticationError | LoginError) and login is not None:
        code = getattr(exc, "code", 0)
        if 400 <= code < 500:
            return TransportError(f"{where} could not check the login now ({code}); try again later")
        detail = f" ({code} {getattr(exc, 'message', '')})" if code else ""
        if auth in SASL:
            return ConfigError(
                f"{where} refused the {login.named(secret_noun(auth))}{detail}: the token has expired or was "
                f"revoked, or is not for this mailbox; see what the token command prints, then 'agentmail doctor'"
            )
        return ConfigError(
            f"{where} refused the {login.origin}{detail}; fix the password there, then 'agentmail doctor'"
        )
    cert = next((e for e in chain if isinstance(e, ssl.SSLCertVerificationError)), None)
    if cert is not None:
        return _cert_error(endpoint, cert, what)
    text = " ".join(str(e) for e in chain)
    if "STARTTLS" in text and ("not supported" in text or "does not support" in text):
        return ConfigError(
            f'{where} offers no STARTTLS (tls = "starttls" in [{what}]); {diagnose.port_hint(endpoint.port, what)}'
        )
    bad_tls = next((e for e in chain if isinstance(e, ssl.SSLError)), None)
    if bad_tls is not None and endpoint.tls == "implicit":
        return ConfigError(
            f'{where} does not speak TLS at connect (tls = "implicit" in [{what}] failed: '
            f"{getattr(bad_tls, 'reason', None) or bad_tls}); it probably wants STARTTLS: "
            f"{diagnose.port_hint(endpoint.port, what)}"
        )
    unresolved = next((e for e in chain if isinstance(e, socket.gaierror)), None)
    if unresolved is not None:  # a typo, or no network: said in words, not as the resolver's errno
        return TransportError(
            f"cannot reach {where}: the name {endpoint.host} does not resolve ({unresolved.strerror or 'no address'}); "
            f"check the host in bus.toml [{what}] ('agentmail bus set {what} HOST:PORT') and the network"
        )
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return TransportError(
            f"nothing is listening on {where} (connection refused); is the server up, "
            f"and is this its {what.upper()} port?"
        )
    if any(isinstance(e, TimeoutError | socket.timeout | asyncio.TimeoutError) for e in chain):
        if endpoint.tls != "implicit" and diagnose.speaks_tls_at_connect(endpoint.host, endpoint.port):
            return ConfigError(
                f"{where} said nothing within {HANDSHAKE_TIMEOUT:g}s but answers a TLS handshake: "
                f'it wants implicit TLS (set tls = "implicit" in [{what}]; '
                f"{diagnose.port_hint(endpoint.port, what)})"
            )
        return TransportError(f"{where} did not answer within {HANDSHAKE_TIMEOUT:g}s (timed out)")
    return TransportError(f"cannot reach {where}: {exc.__class__.__name__}: {exc}")


def login_timed_out(endpoint: Endpoint) -> TransportError:
    return TransportError(f"{endpoint_name(endpoint)} did not answer the login within {LOGIN_TIMEOUT:g}s (timed out)")


def bearer_token(login: Login, secret: str, auth: str) -> str:
    """The secret as an OAuth2 access token, refused (never shown) when it cannot be one: a
    password given with ``auth = xoauth2``, or a helper's JSON instead of its token."""
    if not BEARER_RE.fullmatch(secret):
        raise ConfigError(
            f"the secret from {login.source or 'the caller'} is not an OAuth2 access token (RFC 6750: letters, "
            f"digits, -._~+/ and = at the end), but auth is {auth}: give the command that prints the "
            f'access token alone, or set auth = "password"'
        )
    if not login.username or any(ord(c) < 0x20 or ord(c) == 0x7F for c in login.username):
        raise ConfigError(f"the login {login.username!r} cannot be sent in SASL {SASL[auth]} (empty, or a control)")
    return secret


def oauthbearer_response(username: str, token: str, host: str, port: int) -> bytes:
    """RFC 7628 §3.1's initial client response: the GS2 header naming the user, host, port and
    the bearer token, each ended by ^A."""
    user = username.replace("=", "=3D").replace(",", "=2C")
    return f"n,a={user},\x01host={host}\x01port={port}\x01auth=Bearer {token}\x01\x01".encode()


def offered(methods: Sequence[str]) -> str:
    return " ".join(m.upper() for m in methods) or "none"


async def _smtp_authenticate(client: aiosmtplib.SMTP, endpoint: Endpoint, login: Login, auth: str) -> None:
    if auth not in SASL:
        await client.login(login.username, login.secret())
        return
    name = SASL[auth]
    if auth not in client.server_auth_methods:
        raise ConfigError(
            f"{endpoint_name(endpoint)} does not offer AUTH {name} (it offers {offered(client.server_auth_methods)}): "
            f"set auth to what the server takes ('agentmail bus set auth ...')"
        )
    token = bearer_token(login, login.secret(), auth)  # asked for now: a fresh token each connection
    if auth == "xoauth2":
        await client.auth_xoauth2(login.username, token)
        return
    response = await client.execute_command(
        b"AUTH",
        b"OAUTHBEARER",
        base64.b64encode(oauthbearer_response(login.username, token, endpoint.host, endpoint.port)),
    )
    if response.code == 334:  # RFC 7628 §3.2.3: the error is a challenge; a lone ^A ends the exchange
        response = await client.execute_command(base64.b64encode(b"\x01"))
    if response.code != 235:
        raise aiosmtplib.SMTPAuthenticationError(response.code, response.message)


async def smtp_login(client: aiosmtplib.SMTP, endpoint: Endpoint, login: Login, auth: str = "password") -> None:
    """Connect and authenticate, or raise what :func:`problem` makes of the failure."""
    connection: asyncio.BaseTransport | None = None
    try:
        await client.connect()
        connection = client.transport  # a timeout later closes the client and forgets it
        if client.last_ehlo_response is None:
            await client.ehlo()
        if not client.supports_extension("auth"):
            hint = (
                ' before TLS: set tls = "starttls" in [smtp]'
                if endpoint.tls == "none"
                else ": it looks like an MX (port 25), not a submission server; use the submission port "
                "(587 STARTTLS or 465 implicit TLS)"
            )
            raise ConfigError(f"{endpoint_name(endpoint)} offers no AUTH{hint}")
        client.timeout = LOGIN_TIMEOUT
        try:
            await _smtp_authenticate(client, endpoint, login, auth)
        except TimeoutError as exc:
            raise login_timed_out(endpoint) from exc
    except BaseException as exc:
        connection = client.transport or connection
        client.close()
        if isinstance(exc, Exception):
            if isinstance(connection, asyncio.Transport):
                # close() only schedules the socket's close on the loop (and a TLS transport waits
                # for the peer): abort it and let the loop turn, or the socket outlives the loop.
                connection.abort()
                await asyncio.sleep(0)
            raise problem(endpoint, "smtp", exc, login, auth) from exc
        raise
