"""Why a connection to a mail server failed, in words that say what to do.

Probes here never send a credential: they connect, maybe say EHLO/STARTTLS, look at what
comes back (a TLS handshake, the certificate's issuer) and hang up. They run only after a
connection already failed, to tell a wrong TLS mode or an untrusted CA from a server that is
simply down.
"""

from __future__ import annotations

import socket
import ssl

PROBE_TIMEOUT = 3.0
_OIDS = {b"\x55\x04\x03": "CN", b"\x55\x04\x0a": "O"}


def port_hint(port: int, what: str) -> str:
    """The TLS mode a well-known port speaks, as advice."""
    implicit = {"smtp": 465, "imap": 993}[what]
    starttls = {"smtp": 587, "imap": 143}[what]
    return f'{implicit} speaks implicit TLS (tls = "implicit"), {starttls} STARTTLS (tls = "starttls")'


def speaks_tls_at_connect(host: str, port: int) -> bool:
    """Does the port complete a TLS handshake right after connect (implicit TLS)?"""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=PROBE_TIMEOUT) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False


def _read_reply(sock: socket.socket, done: bytes) -> bytes:
    data = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            return data
        data += chunk
        lines = data.split(b"\r\n")
        if any(line.startswith(done) for line in lines[:-1]):
            return data


def peer_issuer(host: str, port: int, tls: str, what: str) -> str | None:
    """The issuer of the certificate the server presents (``CN=…, O=…``), or None."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT) as raw:
            if tls == "starttls" and what == "smtp":
                _read_reply(raw, b"220 ")
                raw.sendall(b"EHLO agentmail.localhost\r\n")
                _read_reply(raw, b"250 ")
                raw.sendall(b"STARTTLS\r\n")
                _read_reply(raw, b"220 ")
            elif tls == "starttls":
                _read_reply(raw, b"* ")
                raw.sendall(b"p1 STARTTLS\r\n")
                _read_reply(raw, b"p1 ")
            with context.wrap_socket(raw, server_hostname=host) as wrapped:
                der = wrapped.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError):
        return None
    return issuer_of(der) if der else None


def _tlv(data: bytes, at: int) -> tuple[int, bytes, int]:
    """One DER element at ``at``: (tag, contents, offset after it)."""
    tag, length = data[at], data[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[at : at + count], "big")
        at += count
    return tag, data[at : at + length], at + length


def issuer_of(der: bytes) -> str | None:
    """``CN=…, O=…`` of a DER certificate's issuer; None when it cannot be read."""
    try:
        _, cert, _ = _tlv(der, 0)
        _, tbs, _ = _tlv(cert, 0)
        at = 0
        tag, _, at = _tlv(tbs, at)
        if tag == 0xA0:  # explicit version
            tag, _, at = _tlv(tbs, at)  # serial
        _, _, at = _tlv(tbs, at)  # signature algorithm
        _, issuer, _ = _tlv(tbs, at)
        parts, pos = [], 0
        while pos < len(issuer):
            _, rdn, pos = _tlv(issuer, pos)
            _, pair, _ = _tlv(rdn, 0)
            _, oid, after = _tlv(pair, 0)
            _, value, _ = _tlv(pair, after)
            if oid in _OIDS:
                parts.append(f"{_OIDS[oid]}={value.decode('utf-8', 'replace')}")
        return ", ".join(parts) or None
    except (IndexError, ValueError):
        return None
