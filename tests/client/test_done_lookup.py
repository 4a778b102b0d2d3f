"""``done`` finds a letter named by its id with one lookup (it used to find it, then look it up
again), and names in every other form still reach it as ``Mailbox.id_of`` says."""

from __future__ import annotations

import pytest

from agentmail.client.facade import AgentMail
from agentmail.errors import NotFound

from ..conftest import OPENER
from .test_woken_sync_lookups import _traced


def _selects(mail: AgentMail, run: object) -> int:
    return sum(s.lstrip().upper().startswith("SELECT") for s in _traced(mail, run))


def test_done_of_an_id_looks_the_letter_up_once(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "One", OPENER)
    (letter,) = beta.inbox()
    moved: list[str] = []
    assert _selects(beta, lambda: moved.extend(beta.done(f"  {letter.id.upper()} "))) == 1
    assert moved == [letter.id]
    assert beta.receiver.spool.read.locate(letter.id) == "read"
    assert beta.done(letter.id) == []  # done already: nothing moves


@pytest.mark.parametrize("form", ["message_id", "bare", "prefix"])
def test_done_of_a_message_id_or_a_prefix_still_finds_the_letter(alpha: AgentMail, beta: AgentMail, form: str) -> None:
    alpha.send("beta", "One", OPENER)
    (letter,) = beta.inbox()
    ref = {"message_id": letter.message_id, "bare": letter.message_id.strip("<>"), "prefix": letter.id[:12]}[form]
    assert beta.done(ref) == [letter.id]


def test_done_of_nothing_says_no_letter(beta: AgentMail) -> None:
    with pytest.raises(NotFound):
        beta.done("01nosuchletter")
    with pytest.raises(NotFound):
        beta.done("<nobody@bus.test>")
