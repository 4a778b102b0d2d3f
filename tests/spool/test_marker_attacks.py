"""Attacks on the post office's opener markers, counted by name (docs/threat/attacks-session6.md)."""

from __future__ import annotations

from pathlib import Path

from agentmail import ages
from agentmail.model import opener_key
from agentmail.transport.claim_marks import Claims
from agentmail.transport.local import LocalTransport, deliver
from agentmail.transport.uid_mailbox import Mailbox

NAMES = {"alpha@bus.test": "alpha"}.get
HOUR = 3_600_000


def test_a_marker_named_with_digits_int_cannot_read_is_not_counted_and_breaks_no_count(tmp_path: Path) -> None:
    """Names another writer of the post office chose: a superscript or a fraction is a digit to
    ``str.isdigit`` but no number to ``int``; the count goes on without them."""
    transport = LocalTransport(tmp_path / "postoffice", "alpha", NAMES)
    transport._record_opener(b"Message-ID: <1.alpha@bus.test>\r\nX-Agentmail-Type: report\r\n\r\nbody\r\n")
    (folder,) = (tmp_path / "postoffice" / ".opened" / "alpha").iterdir()
    for when in ("\u00b2", "1\u00bd", "\u2460"):
        (folder / f"{when}-{opener_key('<x@bus.test>')}").write_text("<x@bus.test>")
    cutoff = ages.now_ms() - HOUR
    assert set(transport.opener_keys_since(cutoff) or {}) == {opener_key("<1.alpha@bus.test>")}
    assert set(transport.openers_since(cutoff) or {}) == {"<1.alpha@bus.test>"}


def test_claim_files_named_with_digits_int_cannot_read_break_no_claim(tmp_path: Path) -> None:
    """The post office's reply claims, beside files another writer named ``<key>.²``: a claim,
    its holder and a prune go on as without them."""
    claims = Claims(tmp_path / ".claims")
    assert claims.claim("<1.beta@bus.test>", "alpha/main") is None
    key = Claims.key("<1.beta@bus.test>")
    for junk in (f"{key}.\u00b2", f"{key}.\u00b3.sent", f"{key}.1.\u00bd"):
        (tmp_path / ".claims" / junk).write_text("mallory\n\u00b2\n")
    assert claims.holder("<1.beta@bus.test>") == "alpha/main"
    assert claims.claim("<1.beta@bus.test>", "alpha/other") == "alpha/main"
    assert claims.prune() is not None


def test_a_maildir_name_of_twelve_digits_int_cannot_read_leaves_the_uids_as_they_were(tmp_path: Path) -> None:
    office = tmp_path / "postoffice"
    deliver(office / "alpha", b"From: x@bus.test\r\nMessage-ID: <1@bus.test>\r\n\r\nbody\r\n")
    box = Mailbox(office / "alpha")
    box.assign()
    (office / "alpha" / "cur" / ("\u00b2" * 12 + ":2,")).write_bytes(b"junk")
    assert box._past_cur() == 2
