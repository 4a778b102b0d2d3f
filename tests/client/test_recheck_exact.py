"""Exact answers of ``quarantine recheck`` and ``quarantine drop`` (client/recheck.py: ``recheck``,
``_again``, ``chosen``; mutation group ``recheck_cmd``): which quarantined letters a ref names,
in every spelling, and what a recheck answers and leaves behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.client.recheck import chosen
from agentmail.config.registry import Registry
from agentmail.errors import NotFound
from agentmail.model import Letter
from agentmail.transport.local import deliver

from ..conftest import OPENER
from .test_quarantine_recheck import _forgery


def forged(registry: Registry, home: Path, alpha: AgentMail, beta: AgentMail, subject: str) -> tuple[str, str]:
    """A real letter filed at beta and a forgery reusing its Message-ID quarantined there: (the
    forgery's id, the Message-ID)."""
    real = alpha.send("beta", subject, OPENER)
    deliver(home / "postoffice" / "beta", _forgery(registry, real.message_id))
    beta.sync()
    (held,) = (q for q in beta.quarantined(sync=False) if q.message_id == real.message_id)
    return held.id, real.message_id


def test_a_shared_message_id_names_the_quarantined_letter_in_every_spelling(
    registry: Registry, home: Path, alpha: AgentMail, beta: AgentMail
) -> None:
    held, message_id = forged(registry, home, alpha, beta, "Quota 500s")
    bare = message_id.strip("<>")
    for ref in (message_id, bare, f"  {message_id} ", f"<{bare}", f"{bare}>"):
        assert chosen(beta.spool, (ref,)) == [held], ref


def test_several_refs_name_each_letter_once_in_id_order(
    registry: Registry, home: Path, alpha: AgentMail, beta: AgentMail
) -> None:
    first, first_mid = forged(registry, home, alpha, beta, "Quota 500s")
    second, _ = forged(registry, home, alpha, beta, "Second")
    assert chosen(beta.spool, (second, first_mid, first)) == sorted((first, second))
    assert [r["id"] for r in beta.recheck_quarantine(second, first)] == sorted((first, second))


def test_a_ref_that_names_no_quarantined_letter_is_not_found_word_for_word(
    registry: Registry, home: Path, alpha: AgentMail, beta: AgentMail
) -> None:
    held, _ = forged(registry, home, alpha, beta, "Quota 500s")
    (filed,) = beta.inbox(sync=False)
    for ref in ("NO-SUCH-ID", filed.id, "<>", "   "):
        with pytest.raises(NotFound) as caught:
            chosen(beta.spool, (held, ref))
        assert str(caught.value) == f"no quarantined letter {ref!r} (see 'agentmail quarantine')"


def test_all_of_them_but_the_dismissed_and_an_id_names_a_dismissed_one(
    registry: Registry, home: Path, alpha: AgentMail, beta: AgentMail
) -> None:
    first, _ = forged(registry, home, alpha, beta, "Quota 500s")
    second, _ = forged(registry, home, alpha, beta, "Second")
    assert chosen(beta.spool, ()) == [first, second]
    assert beta.dismiss_quarantined(first) == [first]
    assert chosen(beta.spool, ()) == [second]
    assert chosen(beta.spool, (first,)) == [first]
    (result,) = beta.recheck_quarantine()
    assert (result["id"], result["outcome"], result["reason"]) == (second, "quarantined", "unauthenticated")


def test_a_recheck_answers_each_forgery_with_its_verdict_and_keeps_it(
    registry: Registry, home: Path, alpha: AgentMail, beta: AgentMail
) -> None:
    first, _ = forged(registry, home, alpha, beta, "Quota 500s")
    second, _ = forged(registry, home, alpha, beta, "Second")
    before = {q.id: (q.reason, q.detail) for q in beta.quarantined(sync=False)}
    results = beta.recheck_quarantine()
    assert results == [
        {"id": i, "outcome": "quarantined", "reason": before[i][0], "detail": before[i][1], "filed_as": None}
        for i in (first, second)
    ]
    assert {q.id: (q.reason, q.detail) for q in beta.quarantined(sync=False)} == before


def test_a_placeholder_is_answered_with_its_old_verdict_and_the_next_letter_is_judged(
    registry: Registry, home: Path, alpha: AgentMail, beta: AgentMail
) -> None:
    """A letter never downloaded has nothing to judge: its entry answers as it stands, and the
    letters after it are rechecked all the same."""
    placeholder = b"X-Agentmail-Not-Downloaded: 99999999 bytes (local 7)\r\n\r\n"
    stub = Letter(
        message_id="<big@bus.test>", sender="", sender_address="alpha@bus.test", to="beta",
        to_address="beta@bus.test", type="", thread="", subject="", body="", date="",
        reason="too-large", detail="99999999 bytes, not downloaded",
    )  # fmt: skip
    big = beta.spool.write.store("quarantine", stub, placeholder, index=False)
    held, _ = forged(registry, home, alpha, beta, "Quota 500s")
    assert big.id < held
    first, second = beta.recheck_quarantine()
    assert first == {
        "id": big.id, "outcome": "quarantined", "reason": "too-large",
        "detail": "99999999 bytes, not downloaded", "filed_as": None,
    }  # fmt: skip
    assert (second["id"], second["outcome"], second["reason"]) == (held, "quarantined", "unauthenticated")
