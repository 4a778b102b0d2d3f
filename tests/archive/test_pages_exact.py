"""The archive's enforcing functions word for word (mutation group ``pages``, tests/MUTATION.md):
the badge a letter is shown with (``gather._auth``: a quarantined letter never verified, a letter of
this platform's only "sent"), the thread a page shows (``gather.thread_view``), the characters XML
forbids written out (``pages._printable``), the policy of every page (``pages.csp``) and the
archive's writes (``site._write``)."""

from __future__ import annotations

from agentmail.archive import gather
from agentmail.client.facade import AgentMail
from agentmail.model import HUMAN, Letter
from agentmail.text import visible_line

from ..conftest import OPENER


def _quarantined(reason: str | None, detail: str | None) -> Letter:
    return Letter(message_id="<q@evil.test>", sender="", sender_address="x@evil.test", to="beta",
                  to_address="beta@bus.test", type="report", thread="", subject="Quota", body="forged",
                  date="", state="quarantine", reason=reason, detail=detail)  # fmt: skip


def test_a_quarantined_letter_is_shown_with_its_reason_and_detail_never_verified(beta: AgentMail) -> None:
    shown = gather._auth(beta, _quarantined("unauthenticated", "no signature \x1b[31m"), b"")
    assert shown == ("quarantined", visible_line("unauthenticated: no signature \x1b[31m"))
    assert gather._auth(beta, _quarantined(None, None), b"") == ("quarantined", "quarantined: ")


def test_a_letter_of_this_platform_is_shown_sent_in_every_outgoing_state(alpha: AgentMail) -> None:
    opened = alpha.send("beta", "Quota", OPENER)
    (mine,) = alpha.thread(opened.thread)
    raw = alpha.raw(mine.id)
    for state in ("sent", "held", "outbox", "failed"):
        letter = mine.replace(state=state)
        assert gather._auth(alpha, letter, raw) == ("sent", visible_line(alpha.authentication(letter)))


def test_a_persons_letter_is_vouched_naming_the_person_only_when_one_is_named(
    alpha: AgentMail, beta: AgentMail
) -> None:
    alpha.send("beta", "Quota", OPENER)
    (got,) = beta.inbox()
    raw = beta.raw(got.id)
    how = visible_line(beta.authentication(got))
    assert gather._auth(beta, got, raw) == ("verified", how)
    person = "Ann \u202eevil"
    named = got.replace(extra={**got.extra, "person": person})
    assert gather._auth(beta, named, raw) == ("vouched", f"written by {visible_line(person)}; {how}")
    human = got.replace(type=HUMAN)
    assert gather._auth(beta, human, raw) == ("vouched", visible_line(beta.authentication(human)))
