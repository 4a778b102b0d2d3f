"""signing.covered_by: what a trusted MTA's dkim=pass for a domain vouches for (a person's
letter, DESIGN §5) is only what every signature of that domain covers; anything unreadable
vouches for nothing."""

from __future__ import annotations

from agentmail.trust.signing import covered_by


def test_only_the_domains_own_signatures_count_and_their_common_headers() -> None:
    raw = (
        b"DKIM-Signature: v=1; d=other.test; h=from:to:subject:cc\r\n"
        b"DKIM-Signature: v=1; d=people.test; h=from:to:subject\r\n"
        b"DKIM-Signature: v=1; d=People.Test; h=From : to\r\n"
        b"From: carol@people.test\r\n\r\nbody\r\n"
    )
    assert covered_by(raw, "people.test") == ("from", "to")
    assert covered_by(raw, "other.test") == ("cc", "from", "subject", "to")


def test_an_unreadable_signature_vouches_for_nothing() -> None:
    doubled = b"DKIM-Signature: v=1; d=people.test; d=people.test; h=from\r\nFrom: c@people.test\r\n\r\nb\r\n"
    assert covered_by(doubled, "people.test") == ()  # a tag given twice: no tag list at all
    assert covered_by(b"no colon here\r\n\r\nbody\r\n", "people.test") == ()  # headers dkimpy cannot split
    assert covered_by(b"From: c@people.test\r\n\r\nb\r\n", "people.test") == ()  # no signature


def test_the_common_headers_whichever_signature_comes_first() -> None:
    narrow_first = (
        b"DKIM-Signature: v=1; d=people.test; h=from:to\r\n"
        b"DKIM-Signature: v=1; d=people.test; h=from:to:subject\r\n"
        b"From: carol@people.test\r\n\r\nbody\r\n"
    )
    assert covered_by(narrow_first, "people.test") == ("from", "to")


def test_a_name_that_is_not_ascii_is_read_with_a_replacement_character() -> None:
    raw = b"DKIM-Signature: v=1; d=people.test; h=from:\xffx\r\nFrom: carol@people.test\r\n\r\nbody\r\n"
    assert covered_by(raw, "people.test") == ("from", "\ufffdx")


def test_a_name_with_white_space_inside_is_another_header() -> None:
    """dkimpy signs "content- type" as a header of that name (none): it covers no Content-Type."""
    raw = (
        b"DKIM-Signature: v=1; d=people.test; h=from : to:\r\n content- type:subject\r\n"
        b"From: carol@people.test\r\nContent-Type: text/plain\r\n\r\nbody\r\n"
    )
    assert covered_by(raw, "people.test") == ("content- type", "from", "subject", "to")
