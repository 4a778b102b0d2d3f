"""DKIM for agent letters (wraps dkimpy and PyNaCl): every platform signs with its own
ed25519 key; receivers check the signature against the key pinned in the registry.

No DNS is involved for pinned keys: dkimpy asks our ``dnsfunc``, which answers from the
registry. Beyond what dkimpy checks, a signature counts only if it is by the pinned d=/s=,
has no ``l=``, uses an allowed algorithm, signs the body exactly (``c=*/simple``) and
over-signs every header that matters — the MIME headers included, so a relay can neither add
a copy of a signed header above the original nor re-declare how the body decodes. A signature
that leaves the MIME headers out entirely is an older agentmail's, and says so.
"""

from __future__ import annotations

import base64
import functools
import importlib
import re
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._value import Frozen

if TYPE_CHECKING:
    from ..config.registry import Platform, Registry


def _dns_lookup(name: bytes, timeout: int = 5) -> Any:
    """dkimpy's DNS lookup, loaded on first use: only a key marked ``lookup = "dns"`` needs it."""
    global _real_get_txt
    if _real_get_txt is None:
        sys.modules.pop("dkim.dnsplug", None)
        _real_get_txt = importlib.import_module("dkim.dnsplug").get_txt
    return _real_get_txt(name, timeout=timeout)


_real_get_txt: Callable[..., Any] | None = None
# dkimpy imports dnspython eagerly (a large part of every signing or verifying process's start), though a
# pinned key never touches DNS. A stand-in module defers that import until a lookup happens.
if "dkim" not in sys.modules and "dkim.dnsplug" not in sys.modules:
    _stub = types.ModuleType("dkim.dnsplug")
    _stub.get_txt = _dns_lookup  # type: ignore[attr-defined]
    sys.modules["dkim.dnsplug"] = _stub

# dkimpy itself (with logging, which it loads) is imported by the functions that call it: signing and
# the pinned pass are dkim_lean's, so a send and a read of agentmail's own letters never load it.
from nacl.exceptions import BadSignatureError  # noqa: E402
from nacl.signing import SigningKey, VerifyKey  # noqa: E402

from ..config.credentials import read_private_key_with_source  # noqa: E402
from ..errors import ConfigError  # noqa: E402
from ..letter.mime import MIME_HEADERS, header_counts, is_mime_header  # noqa: E402
from ..letter.wire import PEOPLE_HEADERS, SIGNED_HEADERS  # noqa: E402
from . import dkim_lean  # noqa: E402

ALGORITHMS = (b"ed25519-sha256", b"rsa-sha256")
# each twice: over-signed (an absent header is signed as absent, so adding one breaks the signature)
_INCLUDE = [h.lower().encode() for h in (*SIGNED_HEADERS, *PEOPLE_HEADERS) for _ in (0, 1)]
_REQUIRED = tuple(h.lower().encode() for h in SIGNED_HEADERS)
_IF_PRESENT = tuple(h.lower().encode() for h in PEOPLE_HEADERS)  # letters signed before people lack them
_MIME = tuple(h.lower().encode() for h in MIME_HEADERS)
# Headers relaxed, body simple: relaxed body canonicalisation would let a relay turn a tab into
# a space or re-indent a line (every run of white space hashes alike) without breaking it.
CANONICALIZATION = (b"relaxed", b"simple")


class PinnedKey(Frozen):
    domain: str
    selector: str
    algorithm: str  # ed25519 | rsa
    public_key: str  # base64 p= value; "" means "look it up in DNS"

    def txt_record(self) -> bytes:
        return f"v=DKIM1; k={self.algorithm}; p={self.public_key}".encode()


class DkimResult(Frozen):
    ok: bool
    detail: str


def generate_keypair() -> tuple[str, str]:
    """(private seed, public key), both base64 — the formats dkimpy and DNS TXT use."""
    key = SigningKey.generate()
    return base64.b64encode(bytes(key)).decode(), base64.b64encode(bytes(key.verify_key)).decode()


@functools.lru_cache(maxsize=8)  # a pure function: a process signing many letters derives it once
def public_key_of(private_b64: str) -> str:
    return base64.b64encode(bytes(_signing_key(private_b64).verify_key)).decode()


@functools.lru_cache(maxsize=8)  # the key's public half is derived once a process, not once a letter
def _signing_key(private_b64: str) -> SigningKey:
    return SigningKey(base64.b64decode(private_b64))


def sign(raw: bytes, domain: str, selector: str, private_b64: str) -> bytes:
    """``raw`` with a DKIM-Signature header on top (relaxed/simple, ed25519-sha256, no l=): the
    bytes ``dkim.sign`` writes (dkim_lean, held to them by a differential test), in a third of
    its time. No pin check: ``sign_as`` is what a platform's letters go through."""
    key = _signing_key(private_b64)
    header = dkim_lean.signature_header(
        raw, domain.encode(), selector.encode(), _INCLUDE, int(time.time()), lambda digest: key.sign(digest).signature
    )
    return header + raw


def sign_as(registry: Registry, home: Path, me: Platform, unsigned: bytes) -> bytes:
    """``unsigned`` signed with platform ``me``'s private key, after checking it against the key
    the registry pins: every letter a platform writes (to agents or to people) is signed here.
    ConfigError for a key that is missing, damaged or not the pinned one."""
    key, source = read_private_key_with_source(home, me.name)
    _check_key_matches_pin(registry, me, key, source)
    try:
        return sign(unsigned, me.dkim_domain or me.domain, me.selector, key)
    except Exception as exc:  # a key PyNaCl cannot take, headers the signer cannot read
        raise ConfigError(f"cannot sign with the key of {me.name}: {exc.__class__.__name__}") from None


def _check_key_matches_pin(registry: Registry, me: Platform, key: str, source: str) -> None:
    """A letter signed with a key other than the pinned one lands in the reader's quarantine
    while this side says "sent": refuse before signing instead."""
    if me.key_lookup != "pinned":
        return
    try:
        matches = public_key_of(key) == me.public_key
    except Exception:  # not base64, not 32 bytes: no key at all
        matches = False
    if not matches:
        raise ConfigError(
            f"the private key of {me.name} ({source}) does not match the public key pinned in "
            f"{registry.root / 'platforms' / (me.name + '.toml')} (s={me.selector}): "
            f"every reader would quarantine the letter. Restore the key that belongs to this registry, or use "
            f"the registry that belongs to this key; to start over with a new key run 'agentmail keygen --as "
            f"{me.name}' and commit the new entry"
        )


def _coverage_problem(signed: list[bytes], counts: dict[bytes, int], over_sign: bool) -> str | None:
    """Why a signature listing ``signed`` (h=, lowercased) does not vouch for every MIME header
    of a letter with these header ``counts``; None when it does."""
    if over_sign and not any(name in signed for name in _MIME):
        return (
            f"the signature does not cover the MIME headers ({', '.join(MIME_HEADERS)}): the sender's "
            "agentmail is too old and must be upgraded, since unsigned MIME headers let a relay change "
            "how the body reads"
        )
    present = [name for name in counts if is_mime_header(name)]
    for name in sorted({*_MIME, *present}):
        needed = counts.get(name, 0) + (1 if over_sign else 0)
        if needed and signed.count(name) < needed:
            how = "over-sign" if over_sign and signed.count(name) else "cover"
            return f"the signature does not {how} the {name.decode()} header"  # header_counts: ASCII names
    return None


def aligned_coverage_problem(raw: bytes, domain: str) -> str | None:
    """For a letter let in by a trusted MTA's aligned dkim=pass: does every DKIM-Signature of
    ``domain`` cover each MIME header present, and the whole body (no ``l=``: an appended
    attachment part would be unsigned)? None when one exists and all do, or when the letter has
    no MIME header at all. (Not over-signed: an MTA such as OpenDKIM lists each
    once; a second copy is refused anyway, by mime.header_problem.)"""
    import dkim

    counts = header_counts(raw)
    mime_present = any(is_mime_header(name) for name in counts)
    found = False
    for tags in _signatures_of(dkim.DKIM(raw).headers, domain):
        found = True
        if b"l" in tags:  # a body hash over the first l= bytes: a part or text appended after it is unsigned
            return f"{domain}'s signature limits the body length (l=), so what follows it is unsigned"
        if not mime_present:
            continue  # nothing for a relay to re-declare: RFC 2045's defaults apply
        problem = _coverage_problem(_signed_names(tags), counts, over_sign=False)
        if problem:
            return f"{domain}'s signature: {problem}"
    return None if found or not mime_present else f"no DKIM-Signature by {domain} to vouch for the MIME headers"


def length_limited(raw: bytes, from_domain: str) -> str | None:
    """The d= of a DKIM-Signature aligned with ``from_domain`` (the same domain, or a parent of
    it) that limits the body length (``l=``), or None. What follows its l= bytes is unsigned: a
    relay may have appended it, so a person's letter vouched by one is refused (as an agent's)."""
    import dkim

    try:
        headers = dkim.DKIM(raw).headers
    except _dkim_errors():
        return None
    for tags in _every_signature(headers):
        signer = tags.get(b"d", b"").strip().lower().decode("ascii", "replace")
        if b"l" in tags and signer and (from_domain == signer or from_domain.endswith("." + signer)):
            return signer
    return None


def covered_by(raw: bytes, domain: str) -> tuple[str, ...]:
    """The header names (lowercased) that every DKIM-Signature of ``domain`` covers: what a
    trusted MTA's dkim=pass for ``domain`` vouches for (a person's letter, DESIGN §5)."""
    import dkim

    covered: set[str] | None = None
    try:
        headers = dkim.DKIM(raw).headers
    except _dkim_errors():  # headers dkimpy cannot split: it vouches for none of them
        return ()
    for tags in _signatures_of(headers, domain):
        names = {h.decode("ascii", "replace") for h in _signed_names(tags)}
        covered = names if covered is None else covered & names
    return tuple(sorted(covered or ()))


def signers(raw: bytes) -> tuple[tuple[str, str], ...]:
    """(d=, s=) of each readable DKIM-Signature, lowercased: whose keys the letter names."""
    import dkim

    try:
        headers = dkim.DKIM(raw).headers
    except _dkim_errors():
        return ()

    def tag(tags: dict[bytes, bytes], name: bytes) -> str:
        return tags.get(name, b"").strip().lower().decode("ascii", "replace")

    return tuple((tag(tags, b"d"), tag(tags, b"s")) for tags in _every_signature(headers))


def _every_signature(headers: list[tuple[bytes, bytes]]) -> Iterator[dict[bytes, bytes]]:
    """The tags of each DKIM-Signature among ``headers`` that parses (one that does not names no one)."""
    import dkim

    for name, value in headers:
        if name.lower() != b"dkim-signature":
            continue
        try:
            tags: dict[bytes, bytes] = dkim.util.parse_tag_value(value)
        except dkim.util.InvalidTagValueList:
            continue
        yield tags


def _signatures_of(headers: list[tuple[bytes, bytes]], domain: str) -> Iterator[dict[bytes, bytes]]:
    """The tag lists of the DKIM-Signatures whose d= is ``domain`` (an unreadable one is none)."""
    wanted = domain.lower().encode()
    return (tags for tags in _every_signature(headers) if tags.get(b"d", b"").strip().lower() == wanted)


def _signed_names(tags: dict[bytes, bytes]) -> list[bytes]:
    """The h= list of a signature, lowercased, in order (a name twice: signed twice). Split as
    dkimpy splits it when it verifies: white space only around the colons, so a name with a
    space inside ("content- type") is a different header, covering nothing we rely on."""
    return [h.strip().lower() for h in re.split(rb"\s*:\s*", tags.get(b"h", b""))]


def _dnsfunc(key: PinnedKey) -> Callable[..., bytes]:
    wanted = f"{key.selector}._domainkey.{key.domain}.".encode()

    def lookup(name: bytes, timeout: int = 5) -> bytes:
        return key.txt_record() if name.lower() == wanted else b""

    return lookup


def _dkim_errors() -> tuple[type[Exception], ...]:
    """What dkimpy lets escape on hostile signatures besides its own DKIMException: binascii.Error
    (a bh= or b= of non-base64 bytes that passed its pattern check), IndexError (an i= equal to
    d=, a continuation line with nothing to continue) and PyNaCl's ValueError (a b= shorter than
    an ed25519 signature). Each is an unreadable signature, not a crash."""
    import dkim

    return (dkim.DKIMException, ValueError, IndexError)


def verify(raw: bytes, key: PinnedKey, counts: dict[bytes, int] | None = None) -> DkimResult:
    """Does ``raw`` carry a valid signature by exactly this pinned key? ``counts``:
    ``header_counts(raw)``, when the caller has it already. A letter as agentmail signs it
    passes without dkimpy (dkim_lean); everything else, and every failure, is dkimpy's to judge."""
    counts = header_counts(raw) if counts is None else counts
    if _lean_pass(raw, key, counts):
        return DkimResult(True, f"dkim=pass d={key.domain} s={key.selector}")
    import dkim  # only here: dkim_lean passes every letter agentmail signs

    try:
        checker = dkim.DKIM(raw, minkey=2048)
    except _dkim_errors() as exc:
        return DkimResult(False, f"the header section does not parse for DKIM ({exc.__class__.__name__})")
    count = sum(1 for name, _ in checker.headers if name.lower() == b"dkim-signature")
    if count == 0:
        return DkimResult(False, "the letter carries no DKIM signature")
    problems: list[str] = []
    for idx in range(count):
        try:
            prep = checker.verify_headerprep(idx)
        except _dkim_errors() as exc:
            problems.append(f"unreadable signature ({str(exc)[:160]})")
            continue
        sig, include, sig_header = prep[0], prep[1], prep[2][idx]
        # verify_headerprep refused a signature without v=, a=, b=, bh=, d=, h= or s=, and an a=
        # outside rsa-sha1, rsa-sha256 and ed25519-sha256 (dkimpy's validate_signature_fields)
        problem = _policy_problem(sig, include, counts, key)
        if problem:
            problems.append(problem)
            continue
        try:
            ok = checker.verify_sig(sig, include, sig_header, _dnsfunc(key) if key.public_key else _dns_lookup)
        except _dkim_errors() as exc:
            why = (
                "the body changed after signing"
                if "body hash" in str(exc)
                else f"{exc.__class__.__name__}: {str(exc)[:120]}"
            )
            problems.append(f"the signature does not verify ({why})")
            continue
        if ok:
            return DkimResult(True, f"dkim=pass d={key.domain} s={key.selector}")
        problems.append("the signature does not verify against the pinned key")
    return DkimResult(False, "; ".join(problems))  # one problem per signature, and there is one at least


def _policy_problem(
    sig: dict[bytes, bytes], include: list[bytes], counts: dict[bytes, int], key: PinnedKey
) -> str | None:
    """Why a signature that dkimpy may well verify is still not one agentmail accepts: another
    key's, l=, another algorithm, the MIME or identity headers not (over-)signed, the body
    canonicalised loosely. None when it is acceptable."""
    if sig[b"d"].lower() != key.domain.encode() or sig[b"s"] != key.selector.encode():
        return (
            f"signature by d={sig[b'd'].decode(errors='replace')} "
            f"s={sig[b's'].decode(errors='replace')}, not the pinned "
            f"d={key.domain} s={key.selector}"
        )
    if b"l" in sig:
        return "the signature limits the body length (l=), which is refused"
    if sig[b"a"] not in ALGORITHMS:
        return f"the signature algorithm {sig[b'a'].decode()} is not allowed"
    signed = [h.lower() for h in include]
    mime = _coverage_problem(signed, counts, over_sign=True)
    if mime:
        return mime
    weak = [h.decode() for h in _REQUIRED if signed.count(h) <= counts.get(h, 0)]
    weak += [h.decode() for h in _IF_PRESENT if counts.get(h, 0) and signed.count(h) <= counts[h]]
    if weak:
        return f"the signature does not over-sign {', '.join(weak)}"
    body_canon = sig.get(b"c", b"simple/simple").partition(b"/")[2] or b"simple"
    if body_canon.lower() != b"simple":
        return (
            "the signature canonicalises the body loosely (c=.../relaxed), so white space "
            "in it could change unnoticed; agentmail signs the body exactly (c=.../simple)"
        )
    return None


def _lean_pass(raw: bytes, key: PinnedKey, counts: dict[bytes, int]) -> bool:
    """True when dkim_lean can tell that dkimpy would pass ``raw`` for this pinned ed25519 key."""
    public = _verify_key(key.public_key) if key.algorithm == "ed25519" else None
    if public is None:
        return False

    def confirmed(digest: bytes, signature: bytes) -> bool:
        try:
            public.verify(digest, signature)
        except BadSignatureError:
            return False
        return True

    return bool(
        dkim_lean.pinned_pass(
            raw,
            key.domain.encode(),
            key.selector.encode(),
            int(time.time()),
            lambda sig, include: _policy_problem(sig, include, counts, key) is None,
            confirmed,
        )
    )


@functools.lru_cache(maxsize=64)  # a receiver checks many letters against a few pinned keys
def _verify_key(public_key: str) -> VerifyKey | None:
    """The pinned ed25519 key, when its p= is base64 of 32 bytes with nothing else in it (dkimpy
    decodes leniently, skipping what is not base64: such a p= is left to dkimpy)."""
    try:
        raw = base64.b64decode(public_key, validate=True)
    except ValueError:
        return None
    return VerifyKey(raw) if len(raw) == 32 else None
