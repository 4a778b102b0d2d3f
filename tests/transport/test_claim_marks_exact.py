"""Exact answers of the post office's claim marks (transport/claim_marks.py) where a hostile
``.claims`` folder meets them: what a claim's failure says, word for word, and a planted claim
whose holder is no UTF-8."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.errors import TransportError
from agentmail.transport.claim_marks import Claims


def test_an_unusable_lock_names_the_lock_and_the_systems_reason(tmp_path: Path) -> None:
    claims = Claims(tmp_path / ".claims")
    claims.root.mkdir()
    (claims.root / ".lock").mkdir()
    with pytest.raises(TransportError) as caught:
        claims.claim("<named@x>", "beta R1")
    assert str(caught.value) == (
        f"the post office's claims ({claims.root}) cannot be used (Is a directory: {claims.root / '.lock'})"
    )


def test_a_claims_folder_planted_as_a_file_names_the_folder(tmp_path: Path) -> None:
    claims = Claims(tmp_path / ".claims")
    claims.root.write_bytes(b"x")
    with pytest.raises(TransportError) as caught:
        claims.claim("<named@x>", "beta R1")
    assert str(caught.value) == f"the post office's claims ({claims.root}) cannot be used (File exists: {claims.root})"


def test_a_planted_claim_whose_holder_is_no_utf8_is_read_with_replacement_characters(tmp_path: Path) -> None:
    claims = Claims(tmp_path / ".claims", now=lambda: 1000.0)
    claims.root.mkdir()
    key = Claims.key("<named@x>")
    (claims.root / f"{key}.0").write_bytes(b"be\xfftaR1\n999000\n")
    assert claims.holder("<named@x>") == "be\ufffdtaR1"
    # held (claimed a second ago), by the holder as read: never a crash on its bytes
    assert claims.claim("<named@x>", "alpha R2") == "be\ufffdtaR1"
