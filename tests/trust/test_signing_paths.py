"""signing's remaining paths, each against real signatures: a length-limited (l=) signature, a
DKIM-Signature whose tags do not parse, the MIME-coverage check of a trusted MTA's signature,
and a process that imported dkimpy before agentmail."""

from __future__ import annotations

import subprocess
import sys

import dkim

from agentmail.trust import signing
from tests.helpers.letters import burst_bytes

PRIVATE, PUBLIC = signing.generate_keypair()
KEY = signing.PinnedKey("bus.test", "am1", "ed25519", PUBLIC)


def unsigned() -> bytes:
    return burst_bytes(message_id="<01p.alpha@bus.test>")


def test_a_signature_limiting_the_body_length_is_refused() -> None:
    raw = unsigned()
    header = dkim.sign(
        raw,
        b"am1",
        b"bus.test",
        PRIVATE.encode(),
        signature_algorithm=b"ed25519-sha256",
        canonicalize=signing.CANONICALIZATION,
        include_headers=signing._INCLUDE,
        length=True,
        linesep=b"\r\n",
    )
    assert b"l=" in header
    result = signing.verify(header + raw, KEY)
    assert result == signing.DkimResult(False, "the signature limits the body length (l=), which is refused")


def test_a_signature_whose_tags_do_not_parse_is_unreadable() -> None:
    good = signing.sign(unsigned(), "bus.test", "am1", PRIVATE)
    junk = b"DKIM-Signature: v=1; a=ed25519-sha256; d=bus.test; s=am1; this is no tag list\r\n"
    result = signing.verify(junk + good, KEY)
    assert result.ok  # the good signature below still counts
    result = signing.verify(junk + unsigned(), KEY)
    assert not result.ok and result.detail.startswith("unreadable signature (")


def test_the_mime_coverage_of_a_trusted_mtas_signature() -> None:
    raw = unsigned()
    assert signing.aligned_coverage_problem(signing.sign(raw, "bus.test", "am1", PRIVATE), "bus.test") is None
    assert signing.aligned_coverage_problem(raw, "bus.test") == (
        "no DKIM-Signature by bus.test to vouch for the MIME headers"
    )
    other = signing.sign(raw, "elsewhere.test", "am1", PRIVATE)
    junk = b"DKIM-Signature: this is no tag list\r\n"
    assert signing.aligned_coverage_problem(junk + other, "bus.test") == (
        "no DKIM-Signature by bus.test to vouch for the MIME headers"
    )  # neither an unreadable signature nor another domain's vouches
    narrow = dkim.sign(
        raw,
        b"am1",
        b"bus.test",
        PRIVATE.encode(),
        signature_algorithm=b"ed25519-sha256",
        include_headers=[b"from", b"to", b"subject", b"content-type"],
        linesep=b"\r\n",
    )
    assert signing.aligned_coverage_problem(narrow + raw, "bus.test") == (
        "bus.test's signature: the signature does not cover the content-transfer-encoding header"
    )
    no_mime = b"From: alpha@bus.test\r\nTo: beta@bus.test\r\nSubject: s\r\n\r\nbody\r\n"
    assert signing.aligned_coverage_problem(no_mime, "bus.test") is None  # RFC 2045's defaults: nothing to re-declare


_DKIM_FIRST = r"""
import dkim  # a host process that uses dkimpy itself, before agentmail is imported
from agentmail.letter import wire
from agentmail.trust import signing
private, public = signing.generate_keypair()
raw = wire.render(wire.draft_letter("alpha@bus.test", "Alpha", "beta@bus.test", "report", "thr-abc123def0",
                                    "Burst", "Fired.", message_id="<1.alpha@bus.test>"))
signed = signing.sign(raw, "bus.test", "am1", private)
print(signing.verify(signed, signing.PinnedKey("bus.test", "am1", "ed25519", public)).ok)
print(signing.verify(signed[:-3] + b"!\r\n", signing.PinnedKey("bus.test", "am1", "ed25519", public)).detail)
"""


def test_signing_works_in_a_process_that_imported_dkimpy_first() -> None:
    done = subprocess.run([sys.executable, "-c", _DKIM_FIRST], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True", "the signature does not verify (the body changed after signing)"]


def test_a_header_section_dkimpy_cannot_parse_does_not_verify() -> None:
    good = signing.sign(unsigned(), "bus.test", "am1", PRIVATE)
    result = signing.verify(b"no colon on this line\r\n" + good, KEY)
    assert result == signing.DkimResult(False, "the header section does not parse for DKIM (MessageFormatError)")


def test_the_mime_coverage_check_reads_past_other_headers_and_signatures() -> None:
    """A trusted MTA's signature need not be the first header, nor the first DKIM-Signature: a
    Received line, an unreadable signature, a signature without d= or another domain's may come
    first, and the domain's own is still found (and one without h= covers nothing)."""
    good = signing.sign(unsigned(), "bus.test", "am1", PRIVATE)
    assert signing.aligned_coverage_problem(b"Received: from relay.test\r\n" + good, "bus.test") is None
    assert signing.aligned_coverage_problem(b"DKIM-Signature: this is no tag list\r\n" + good, "bus.test") is None
    assert signing.aligned_coverage_problem(b"DKIM-Signature: v=1; s=am1; h=from\r\n" + good, "bus.test") is None
    assert signing.aligned_coverage_problem(signing.sign(good, "elsewhere.test", "am1", PRIVATE), "bus.test") is None
    no_h = b"DKIM-Signature: v=1; a=ed25519-sha256; d=bus.test; s=am1\r\n" + unsigned()
    assert signing.aligned_coverage_problem(no_h, "bus.test") == (
        "bus.test's signature: the signature does not cover the content-transfer-encoding header"
    )


def test_the_signature_is_folded_with_crlf_like_the_letter() -> None:
    signed = signing.sign(unsigned(), "bus.test", "am1", PRIVATE)
    assert b"\n" not in signed.replace(b"\r\n", b"")


def test_a_letter_without_mime_headers_verifies() -> None:
    """RFC 2045's defaults: a plain letter with no MIME header at all is signed and verifies."""
    plain = (
        b"From: Alpha <alpha@bus.test>\r\nTo: beta@bus.test\r\nSubject: Plain\r\n"
        b"Message-ID: <1p.alpha@bus.test>\r\nDate: Tue, 01 Dec 2026 00:00:00 +0000\r\n\r\nHello.\r\n"
    )
    assert signing.verify(signing.sign(plain, "bus.test", "am1", PRIVATE), KEY).ok


def test_a_signature_leaving_every_mime_header_out_is_an_old_agentmails() -> None:
    raw = unsigned()
    names = [h for h in signing._INCLUDE if h not in (b"mime-version", b"content-type", b"content-transfer-encoding")]
    header = dkim.sign(
        raw,
        b"am1",
        b"bus.test",
        PRIVATE.encode(),
        signature_algorithm=b"ed25519-sha256",
        canonicalize=signing.CANONICALIZATION,
        include_headers=names,
        linesep=b"\r\n",
    )
    assert signing.verify(header + raw, KEY) == signing.DkimResult(
        False,
        "the signature does not cover the MIME headers (MIME-Version, Content-Type, Content-Transfer-Encoding): "
        "the sender's agentmail is too old and must be upgraded, since unsigned MIME headers let a relay change "
        "how the body reads",
    )


def test_a_signature_over_a_letter_without_mime_headers_vouches_for_it() -> None:
    no_mime = b"From: alpha@bus.test\r\nTo: beta@bus.test\r\nSubject: s\r\n\r\nbody\r\n"
    signed = signing.sign(no_mime, "bus.test", "am1", PRIVATE)
    assert signing.aligned_coverage_problem(signed, "bus.test") is None
    limited = dkim.sign(no_mime, b"am1", b"bus.test", PRIVATE.encode(), signature_algorithm=b"ed25519-sha256",
                        length=True, linesep=b"\r\n")  # fmt: skip
    assert "limits the body length" in (signing.aligned_coverage_problem(limited + no_mime, "bus.test") or "")


def test_every_signature_of_the_domain_is_read_on_a_letter_without_mime_headers() -> None:
    """No MIME header to vouch for, but a body-length limit in any of the domain's signatures
    still leaves what follows it unsigned: the second signature is read too."""
    no_mime = b"From: alpha@bus.test\r\nTo: beta@bus.test\r\nSubject: s\r\n\r\nbody\r\n"
    limited = dkim.sign(no_mime, b"am1", b"bus.test", PRIVATE.encode(), signature_algorithm=b"ed25519-sha256",
                        length=True, linesep=b"\r\n")  # fmt: skip
    both = signing.sign(limited + no_mime, "bus.test", "am1", PRIVATE)  # the full one on top
    assert signing.aligned_coverage_problem(both, "bus.test") == (
        "bus.test's signature limits the body length (l=), so what follows it is unsigned"
    )


def test_a_trusted_mtas_signature_need_cover_only_the_mime_headers_present() -> None:
    """A letter with a Content-Type and no MIME-Version or Content-Transfer-Encoding: a signature
    covering the Content-Type vouches for it (the absent ones take RFC 2045's defaults)."""
    raw = (
        b"From: alpha@bus.test\r\nTo: beta@bus.test\r\nSubject: s\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n\r\nbody\r\n"
    )
    header = dkim.sign(raw, b"am1", b"bus.test", PRIVATE.encode(), signature_algorithm=b"ed25519-sha256",
                       include_headers=[b"from", b"to", b"subject", b"content-type"], linesep=b"\r\n")  # fmt: skip
    assert signing.aligned_coverage_problem(header + raw, "bus.test") is None
