"""``SpoolReader.known_and_hashed`` asks in one statement what ``has_bytes`` asks in two (the
(sender, Message-ID) look-up, then the bytes' hash): ``holds_bytes`` given its answers says what
``has_bytes`` says, for any bytes, sender and Message-ID (a woken sync's duplicate check)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.spool import Spool

from ..depth import examples, suppressed
from .test_spool import _letter, _spool

MESSAGE_IDS = ["<1.alpha@bus.test>", "<2.alpha@bus.test>", "<3.alpha@bus.test>", "<9.alpha@bus.test>", "<x>"]


def _filed(tmp_path: Path) -> tuple[Spool, list[bytes]]:
    """Letters filed every way a duplicate is found: indexed, quarantined (by hash), one whose file is lost."""
    spool = _spool(tmp_path)
    raws: list[bytes] = []
    for n, state in ((1, "unread"), (2, "read"), (3, "lost")):
        letter, raw = _letter(n)
        filed = spool.write.store("unread" if state == "lost" else state, letter, raw)
        if state == "lost":
            (spool.root / "letters" / f"{filed.id}.eml").unlink()
        raws.append(raw)
    letter, raw = _letter(4)
    spool.write.store("quarantine", letter.replace(reason="unsigned"), raw, index=False)
    raws.append(raw)
    return spool, raws


@settings(
    max_examples=examples(200), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(
    pick=st.integers(0, 4),
    tail=st.binary(max_size=8),
    sender=st.sampled_from(["alpha", "beta", "Alpha", "alpha "]),
    message_id=st.sampled_from(MESSAGE_IDS) | st.text(max_size=20),
)
def test_one_statement_answers_as_has_bytes_does(
    tmp_path: Path, pick: int, tail: bytes, sender: str, message_id: str
) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as where:
        spool, raws = _filed(Path(where))
        _same_answers(spool, (raws[pick] if pick < len(raws) else b"") + tail, sender, message_id)


def _same_answers(spool: Spool, raw: bytes, sender: str, message_id: str) -> None:
    existing, hashed = spool.read.known_and_hashed(sender, message_id, raw)
    assert existing == spool.read.known(sender, message_id)
    if sender and message_id:
        assert spool.read.holds_bytes(raw, existing, hashed) is spool.read.has_bytes(raw, sender, message_id)
    assert spool.read.holds_bytes(raw, None) is spool.read.has_bytes(raw)


def test_the_cases_the_draw_must_reach(tmp_path: Path) -> None:
    spool, raws = _filed(tmp_path)
    assert spool.read.holds_bytes(raws[0], *spool.read.known_and_hashed("alpha", MESSAGE_IDS[0], raws[0])) is True
    assert spool.read.holds_bytes(raws[3], *spool.read.known_and_hashed("alpha", MESSAGE_IDS[3], raws[3])) is True
    other = raws[0] + b"x"  # a filed Message-ID, other bytes
    assert spool.read.holds_bytes(other, *spool.read.known_and_hashed("alpha", MESSAGE_IDS[0], other)) is False
    lost = raws[2]  # its file gone: not the same letter
    assert spool.read.holds_bytes(lost, *spool.read.known_and_hashed("alpha", MESSAGE_IDS[2], lost)) is False
