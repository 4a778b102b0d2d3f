"""Attacks on the duplicate check's look-up handed to the facts (``Receiver._seen``,
``SpoolReader.known_and_hashed``/``holds_bytes``, ``gather(seen=...)``): hostile batches of
replays, forgeries reusing a filed Message-ID, letters whose From names another platform or
none, filed in one batch or across syncs. Beside every judging the old duplicate check (the
s6-base ``_filed_already``, written out below) and the facts asked afresh: both must agree."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.client import receiver as receiver_module
from agentmail.client.facade import AgentMail
from agentmail.client.receiver import Receiver
from agentmail.errors import NotFound
from agentmail.letter import wire
from agentmail.spool.views import SpoolReader
from agentmail.stages.facts import Facts
from agentmail.transport.local import deliver

from ..conftest import make_signed_letters
from ..depth import examples, suppressed


def _old_has_bytes(read: SpoolReader, raw: bytes, sender: str | None = None, message_id: str | None = None) -> bool:
    """s6-base ``SpoolReader.has_bytes``, statement for statement."""
    sql = read.sql()
    if sender and message_id:
        existing = read.known(sender, message_id)
        if existing:
            try:
                if read.raw(existing) == raw:
                    return True
            except (NotFound, OSError):
                pass
    digest = hashlib.sha256(raw).hexdigest()[:40]
    row = sql.execute("SELECT 1 FROM letters WHERE rawkey=? LIMIT 1", (digest,)).fetchone()
    return row is not None


def _old_filed_already(receiver: Receiver, raw: bytes) -> bool:
    """s6-base ``Receiver._filed_already``."""
    quick = wire.quick_identity(raw)
    platform = receiver.registry.by_address(quick[0]) if quick else None
    if quick and platform:
        return _old_has_bytes(receiver.spool.read, raw, platform.name, quick[1])
    return _old_has_bytes(receiver.spool.read, raw)


def _variants(raw: bytes) -> dict[str, bytes]:
    return {
        "real": raw,
        "forged-body": raw.replace(b"\nletter ", b"\nLETTER "),
        "extra-header": b"X-Junk: a replay with other bytes\r\n" + raw,  # unsigned: DKIM may still pass
        "from-beta": raw.replace(b"<alpha@bus.test>", b"<beta@bus.test>", 1),
        "from-nobody": raw.replace(b"<alpha@bus.test>", b"<mallory@elsewhere.test>", 1),
        "from-sibling": raw.replace(b"<alpha@bus.test>", b"<alpha+bob@bus.test>", 1),
        "no-message-id": raw.replace(b"Message-ID:", b"X-Old-Id:", 1),
    }


_PLAN = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(sorted(_variants(b""))), st.booleans()), min_size=1, max_size=12
)


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every judging checked against the old duplicate check, every reused look-up against asking afresh."""
    differences: list[str] = []
    judged = Receiver._judged
    real_gather = receiver_module.gather

    def checked_judged(self: Receiver, raw: bytes) -> Any:
        old = _old_filed_already(self, raw)
        verdict, facts = judged(self, raw)
        if old != (verdict is None):
            differences.append(f"duplicate check: old {old}, new {verdict is None}")
        return verdict, facts

    def checked_gather(*args: Any, seen: Any = None, **kwargs: Any) -> Facts:
        facts = real_gather(*args, seen=seen, **kwargs)
        if seen is not None and facts != (fresh := real_gather(*args, **kwargs)):
            differences.append(f"facts: reused {facts} != afresh {fresh}")
        return facts

    monkeypatch.setattr(Receiver, "_judged", checked_judged)
    monkeypatch.setattr(receiver_module, "gather", checked_gather)
    return differences


@settings(
    max_examples=examples(25), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(plan=_PLAN)
def test_hostile_batches_judge_and_gather_as_the_old_check_and_a_fresh_look_up(
    alpha: AgentMail, beta: AgentMail, watched: list[str], plan: list[tuple[int, str, bool]]
) -> None:
    letters = make_signed_letters(alpha, "beta", 3, "attack")
    maildir = beta.receiver.transport.mailbox.dir  # type: ignore[attr-defined]
    for index, variant, sync_after in plan:
        deliver(maildir, _variants(letters[index][1])[variant])
        if sync_after:
            beta.receiver.sync()
    beta.receiver.sync()
    assert watched == []


def test_a_replay_in_the_same_batch_after_its_original_is_judged_against_the_filed_one(
    alpha: AgentMail, beta: AgentMail, watched: list[str]
) -> None:
    """Letter k files what letter k+1 asks about, in one batch: the reused answer is the fresh one."""
    ((message_id, raw),) = make_signed_letters(alpha, "beta", 1, "replay")
    maildir = beta.receiver.transport.mailbox.dir  # type: ignore[attr-defined]
    for variant in ("real", "real", "extra-header", "forged-body", "from-sibling"):
        deliver(maildir, _variants(raw)[variant])
    report = beta.receiver.sync()
    assert watched == []
    assert report.fetched == 5 and len(report.accepted) == 1
    assert [letter.message_id for letter in beta.inbox()] == [message_id]
