"""DKIM with a key published in DNS (registry ``lookup = "dns"``): the real lookup path — our
deferred import of dkimpy's resolver plug, dkimpy, dnspython — against a DNS server on 127.0.0.1
that answers TXT records built from real keys. Only where dnspython sends its query is changed."""

from __future__ import annotations

import base64
import socket
import sys
import threading
import types
from collections.abc import Iterator

import dns.message
import dns.rcode
import dns.resolver
import dns.rrset
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from agentmail.trust import signing
from tests.helpers.letters import burst_bytes

PRIVATE, PUBLIC = signing.generate_keypair()
OTHER_PRIVATE, OTHER_PUBLIC = signing.generate_keypair()
DNS_KEY = signing.PinnedKey("bus.test", "am1", "ed25519", "")  # "" = look the key up in DNS


class TxtServer:
    """A UDP DNS server answering TXT queries from ``records`` (name -> TXT), NXDOMAIN otherwise."""

    def __init__(self) -> None:
        self.records: dict[str, bytes] = {}
        self.queries: list[str] = []
        self.stopping = False
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            wire_query, peer = self.sock.recvfrom(4096)
            if self.stopping:
                return
            query = dns.message.from_wire(wire_query)
            name = query.question[0].name.to_text()
            self.queries.append(name)
            answer = dns.message.make_response(query)
            txt = self.records.get(name)
            if txt is None:
                answer.set_rcode(dns.rcode.NXDOMAIN)
            else:
                # TXT strings are at most 255 bytes each: an RSA key spans several
                chunks = " ".join(f'"{txt[i : i + 255].decode()}"' for i in range(0, len(txt), 255))
                answer.answer.append(dns.rrset.from_text(name, 300, "IN", "TXT", chunks))
            self.sock.sendto(answer.to_wire(), peer)

    def close(self) -> None:
        self.stopping = True
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as poke:  # wakes the blocked recvfrom
            poke.sendto(b"", ("127.0.0.1", self.port))
        self.thread.join(timeout=30)
        self.sock.close()


@pytest.fixture
def dns_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[TxtServer]:
    server = TxtServer()
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = ["127.0.0.1"]
    resolver.port = server.port
    resolver.search = []
    monkeypatch.setattr(dns.resolver, "default_resolver", resolver)
    monkeypatch.setattr(signing, "_real_get_txt", None)  # the first lookup of a process loads the plug
    # ... in the state agentmail.trust.signing leaves a process it was imported into before dkimpy: its
    # stand-in plug in sys.modules, which the first lookup must replace by dkimpy's own
    stand_in = types.ModuleType("dkim.dnsplug")
    stand_in.get_txt = signing._dns_lookup  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dkim.dnsplug", stand_in)
    yield server
    server.close()


def signed(private: str = PRIVATE, selector: str = "am1") -> bytes:
    return signing.sign(burst_bytes(), "bus.test", selector, private)


def test_a_key_published_in_dns_verifies_the_letter(dns_server: TxtServer) -> None:
    dns_server.records["am1._domainkey.bus.test."] = signing.PinnedKey(
        "bus.test", "am1", "ed25519", PUBLIC
    ).txt_record()
    result = signing.verify(signed(), DNS_KEY)
    assert result == signing.DkimResult(True, "dkim=pass d=bus.test s=am1")
    assert dns_server.queries == ["am1._domainkey.bus.test."]  # asked DNS, for the signature's selector
    assert signing.verify(signed(), DNS_KEY).ok  # a second lookup: the plug loaded once serves it
    assert len(dns_server.queries) == 2


def test_a_different_key_in_dns_does_not_verify(dns_server: TxtServer) -> None:
    dns_server.records["am1._domainkey.bus.test."] = f"v=DKIM1; k=ed25519; p={OTHER_PUBLIC}".encode()
    result = signing.verify(signed(), DNS_KEY)
    assert result == signing.DkimResult(False, "the signature does not verify against the pinned key")


def test_no_key_in_dns_fails_closed(dns_server: TxtServer) -> None:
    result = signing.verify(signed(), DNS_KEY)  # NXDOMAIN
    assert result == signing.DkimResult(False, "the signature does not verify against the pinned key")
    assert dns_server.queries == ["am1._domainkey.bus.test."]


def test_a_short_rsa_key_in_dns_is_refused(dns_server: TxtServer) -> None:
    """The 2048-bit floor holds for keys found in DNS too (an RSA-signed letter, a 1024-bit key)."""
    import dkim

    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    public_der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    dns_server.records["am1._domainkey.bus.test."] = b"v=DKIM1; k=rsa; p=" + base64.b64encode(public_der)
    raw = burst_bytes(message_id="<01r.alpha@bus.test>")
    header = dkim.sign(
        raw,
        b"am1",
        b"bus.test",
        pem,
        signature_algorithm=b"rsa-sha256",
        canonicalize=signing.CANONICALIZATION,
        include_headers=signing._INCLUDE,
        linesep=b"\r\n",
    )
    result = signing.verify(header + raw, signing.PinnedKey("bus.test", "am1", "rsa", ""))
    assert not result.ok
    assert "KeyFormatError" in result.detail and "1024" in result.detail


def test_the_lookup_hands_the_timeout_on_to_the_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    """dkimpy's timeout (5 s unless told) reaches the resolver: without it a lookup could wait on
    dnspython's own lifetime, not the verifier's. Only the resolver is replaced, by one that
    answers the real key and notes the timeout it was given."""
    given: list[object] = []

    def get_txt(name: bytes, timeout: object) -> bytes:
        given.append(timeout)
        return signing.PinnedKey("bus.test", "am1", "ed25519", PUBLIC).txt_record()

    monkeypatch.setattr(signing, "_real_get_txt", get_txt)
    assert signing.verify(signed(), DNS_KEY) == signing.DkimResult(True, "dkim=pass d=bus.test s=am1")
    signing._dns_lookup(b"am1._domainkey.bus.test.", timeout=7)
    signing._dns_lookup(b"am1._domainkey.bus.test.")
    assert given == [5, 7, 5]
