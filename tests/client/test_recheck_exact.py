"""Exact answers of ``quarantine recheck`` and ``quarantine drop`` (client/recheck.py: ``recheck``,
``_again``, ``chosen``; mutation group ``recheck_cmd``): which quarantined letters a ref names,
in every spelling, and what a recheck answers and leaves behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail import bounds
from agentmail.client import recheck as recheck_module
from agentmail.client.facade import AgentMail
from agentmail.client.recheck import chosen
from agentmail.config.registry import Registry
from agentmail.errors import NotFound
from agentmail.model import Letter, ulid_ms
from agentmail.transport.local import deliver

from ..conftest import OPENER
from ..stages.test_addressed import signed_to
from ..stages.test_parties import box, three, written_into  # noqa: F401  (the fixture)
from ..stages.test_preemption import ANSWER, _message_id, _opener_and_answer
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


def _stub(message_id: str, reason: str, detail: str, subject: str = "stub") -> Letter:
    """A quarantine entry's record as a test files it by hand, beside bytes that say otherwise."""
    return Letter(
        message_id=message_id, sender="alpha", sender_address="alpha@bus.test", to="beta",
        to_address="beta@bus.test", type="report", thread="thr-abc123def0", subject=subject, body="",
        date="", reason=reason, detail=detail,
    )  # fmt: skip


def test_a_young_waiting_answer_rechecked_waits_on_unfiled_and_its_entry_is_kept(three: Registry, home: Path) -> None:
    _opener, answer, _thread = _opener_and_answer(three, home)
    beta = box(three, home, "beta")
    deliver(home / "postoffice" / "beta", answer)
    beta.sync()
    (waiting,) = beta.quarantined(sync=False)
    assert beta.recheck_quarantine(sync=False) == [
        {"id": waiting.id, "outcome": "quarantined", "reason": "awaiting-parent", "detail": waiting.detail,
         "filed_as": None}
    ]  # fmt: skip
    assert beta.quarantined(sync=False) == [waiting] and beta.inbox(sync=False) == []


@pytest.mark.parametrize(("past", "filed"), [(-1, False), (0, True)])
def test_an_answer_is_judged_without_its_letter_from_the_very_ms_it_has_waited_its_time(
    three: Registry, home: Path, monkeypatch: pytest.MonkeyPatch, past: int, filed: bool
) -> None:
    _opener, answer, thread = _opener_and_answer(three, home)
    beta = box(three, home, "beta")
    deliver(home / "postoffice" / "beta", answer)
    beta.sync()
    (waiting,) = beta.quarantined(sync=False)
    monkeypatch.setattr(recheck_module, "now_ms", lambda: ulid_ms(waiting.id) + bounds.ANSWER_WAIT_MS + past)
    (result,) = beta.recheck_quarantine(sync=False)
    assert (result["id"], result["outcome"]) == (waiting.id, "filed" if filed else "quarantined")
    assert [(x.id, x.thread) for x in beta.inbox(sync=False)] == ([(waiting.id, thread)] if filed else [])


def test_a_waiting_answer_that_waits_no_more_takes_todays_verdict_and_letter(three: Registry, home: Path) -> None:
    """Its entry is rewritten from today's judgement (the letter as its bytes say, not the old
    record); a recheck, not only a sync's settle, does so."""
    opener, _answer, thread = _opener_and_answer(three, home)
    parent = ANSWER.replace(message_id=_message_id(opener), thread=thread, in_reply_to=None)
    outsider = written_into(three, home, "gamma", "beta", parent, "close")
    beta = box(three, home, "beta")
    deliver(home / "postoffice" / "beta", opener)
    beta.sync()
    held = beta.spool.write.store("quarantine", _stub("<w@bus.test>", "awaiting-parent", "waits"), outsider)
    (result,) = beta.recheck_quarantine(sync=False)
    assert (result["id"], result["outcome"], result["reason"]) == (held.id, "quarantined", "not-a-party")
    (entry,) = beta.quarantined(sync=False)
    assert (entry.id, entry.reason, entry.detail) == (held.id, "not-a-party", result["detail"])
    assert (entry.sender, entry.thread, entry.type) == ("gamma", thread, "close") and entry.subject != "stub"


def test_a_letter_that_never_waited_keeps_its_entry_whatever_todays_verdict(
    registry: Registry, home: Path, beta: AgentMail
) -> None:
    held = beta.spool.write.store(
        "quarantine", _stub("<lone@bus.test>", "not-a-party", "old"), _forgery(registry, "<lone@bus.test>")
    )
    (result,) = beta.recheck_quarantine(sync=False)
    assert (result["id"], result["outcome"], result["reason"]) == (held.id, "quarantined", "unauthenticated")
    (entry,) = beta.quarantined(sync=False)
    assert (entry.id, entry.reason, entry.detail, entry.subject) == (held.id, "not-a-party", "old", "stub")


def test_a_misaddressed_letter_rechecked_is_still_misaddressed(three: Registry, home: Path) -> None:
    beta = box(three, home, "beta")
    deliver(home / "postoffice" / "beta", signed_to(three, home, "alpha", "gamma@bus.test"))
    beta.sync()
    (held,) = beta.quarantined(sync=False)
    assert held.reason == "misaddressed"
    (result,) = beta.recheck_quarantine(sync=False)
    assert (result["id"], result["outcome"], result["reason"]) == (held.id, "quarantined", "misaddressed")
    assert beta.inbox(sync=False) == []


def test_a_ref_names_at_most_fifty_quarantined_letters(registry: Registry, beta: AgentMail) -> None:
    raw = _forgery(registry, "<many@bus.test>")
    held = [
        beta.spool.write.store("quarantine", _stub("<many@bus.test>", "unauthenticated", str(n)), raw + b" " * n).id
        for n in range(51)
    ]
    picked = chosen(beta.spool, ("<many@bus.test>",))
    assert len(picked) == 50 and picked == sorted(picked) and set(picked) < set(held)


def test_a_shared_message_id_beginning_or_ending_with_x_names_the_quarantined_letter(
    registry: Registry, beta: AgentMail
) -> None:
    for message_id in ("<Xm.alpha@bus.test>", "<m.alpha@bus.teX>"):
        beta.spool.write.store("unread", _stub(message_id, "", ""), b"Subject: filed\r\n\r\nfiled\r\n")
        held = beta.spool.write.store(
            "quarantine", _stub(message_id, "unauthenticated", ""), _forgery(registry, message_id)
        )
        assert chosen(beta.spool, (message_id.strip("<>"),)) == [held.id]
