"""``Holds.bound``, ``release`` and ``_decide`` exactly (mutation run 12): each refusal word for
word, what a release records, and what an answer that could not release says on itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.client.holds import Holds
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import NotFound, Refused

from ..helpers.approval_key import operator_key
from .test_approval_bound import fan_out, held_fan_out, rewrite
from .test_approval_by_mail import CAROL, DAVE, answer, approving, held_and_announced

__all__ = ["approving", "fan_out"]  # the fixtures, used by name


@pytest.fixture
def alpha(approving: Registry, home: Path) -> AgentMail:
    return AgentMail(approving, Identity("alpha"), home)


def _refused(alpha: AgentMail, letter_id: str, error: type[Exception] = Refused) -> str:
    with pytest.raises(error) as refused:
        alpha.approve(letter_id, key_file=operator_key(home=alpha.home))
    return str(refused.value)


def test_an_approved_letter_is_released_once_and_says_by_whom(alpha: AgentMail, home: Path) -> None:
    letter_id, _ = held_and_announced(alpha, home)
    sent = alpha.approve(letter_id, key_file=operator_key(home))
    assert sent.state == "sent" and alpha.spool.read.locate(letter_id) == "sent"
    notes = alpha.spool.read.annotations(letter_id)
    assert notes["approved"] == "true" and notes["approved_by"] == "the operator's approval key"
    assert _refused(alpha, letter_id, NotFound) == f"letter {letter_id} is not held (it is sent)"
    with pytest.raises(NotFound) as gone:
        alpha.holds.release(letter_id, "someone")
    assert str(gone.value) == f"letter {letter_id} is not held (it is sent)"


def test_a_held_letter_whose_file_is_gone_says_so(alpha: AgentMail, home: Path) -> None:
    letter_id, _ = held_and_announced(alpha, home)
    alpha.spool.read.path("held", letter_id).unlink()
    assert _refused(alpha, letter_id, NotFound) == f"letter {letter_id} is not held (its file is gone)"


def test_a_letter_without_a_digest_or_changed_is_refused_word_for_word(alpha: AgentMail, home: Path) -> None:
    letter_id, _ = held_and_announced(alpha, home)
    digest = alpha.spool.read.annotations(letter_id)["held_digest"]
    rewrite(alpha, "notes", "data", letter_id, lambda n: {**n, "held_digest": ""})
    assert _refused(alpha, letter_id) == (
        f"letter {letter_id} was held without a digest of what would leave, so no approval can be bound to it: "
        f"'agentmail reject {letter_id} -r ...' and send it again"
    )
    rewrite(
        alpha,
        "notes",
        "data",
        letter_id,
        lambda n: {**n, "held_digest": ("1" if digest[0] == "0" else "0") + digest[1:]},
    )
    assert _refused(alpha, letter_id) == (
        f"letter {letter_id} changed after it was announced (its bytes or recipients are not the ones approved): "
        f"not sent; 'agentmail reject {letter_id} -r ...' and send it again"
    )
    assert alpha.spool.read.locate(letter_id) == "held"


def test_an_approval_for_a_changed_letter_is_ignored_with_the_reason(alpha: AgentMail, home: Path) -> None:
    letter_id, news = held_and_announced(alpha, home)
    rewrite(alpha, "notes", "data", letter_id, lambda n: {**n, "held_digest": "0" * 64})
    answer(home, news, "approve")
    alpha.sync()
    assert alpha.spool.read.locate(letter_id) == "held"
    (said,) = [alpha.spool.read.annotations(x) for x in alpha.spool.read.ids("read") if x != letter_id]
    assert said["approval_ignored"] == (
        f"letter {letter_id} changed after it was announced (its bytes or recipients are not the ones approved): "
        f"not sent; 'agentmail reject {letter_id} -r ...' and send it again"
    )


def test_an_approval_for_a_letter_no_longer_held_is_ignored_with_the_reason(alpha: AgentMail, home: Path) -> None:
    letter_id, news = held_and_announced(alpha, home)
    target = alpha.show(letter_id)
    alpha.approve(letter_id, key_file=operator_key(home))
    alpha.holds._decide(target, [("A1", CAROL, "approve", "")])
    assert alpha.spool.read.annotations("A1")["approval_ignored"] == f"{letter_id} is no longer held"


def test_answers_that_disagree_are_kept_and_the_refusal_says_them(alpha: AgentMail, home: Path) -> None:
    letter_id, _ = held_and_announced(alpha, home)
    target = alpha.show(letter_id)
    alpha.holds._decide(target, [("A1", CAROL, "approve", ""), ("A2", DAVE, "reject", "not now")])
    notes = alpha.spool.read.annotations(letter_id)
    assert notes["answers"] == f"{CAROL} approve\n{DAVE} reject: not now"
    disagree = (
        f"the approvers disagree ({CAROL} approve; {DAVE} reject: not now): it is never sent by mail; "
        f"'agentmail reject {letter_id} -r ...' and send it again if it should go"
    )
    assert notes["answers_disagree"] == disagree
    assert _refused(alpha, letter_id) == f"letter {letter_id} is not sent: {disagree}"
    alpha.holds._decide(alpha.show(letter_id), [("A3", CAROL, "reject", "")])  # weighed with the ones before
    assert (
        alpha.spool.read.annotations(letter_id)["answers"] == f"{CAROL} approve\n{DAVE} reject: not now\n{CAROL} reject"
    )
    assert alpha.spool.read.locate(letter_id) == "held"


def test_answers_that_all_reject_drop_it_with_the_first_ones_reason(alpha: AgentMail, home: Path) -> None:
    letter_id, _ = held_and_announced(alpha, home)
    alpha.holds._decide(alpha.show(letter_id), [("A1", CAROL, "reject", "not now"), ("A2", DAVE, "reject", "")])
    dropped = alpha.show(letter_id)
    assert dropped.state == "failed" and dropped.extra["rejected"] == "not now"
    assert f"rejected by {CAROL}" in dropped.extra["failed_reason"]


def test_answers_that_all_approve_release_it_by_the_first(alpha: AgentMail, home: Path) -> None:
    letter_id, _ = held_and_announced(alpha, home)
    alpha.holds._decide(alpha.show(letter_id), [("A1", DAVE, "approve", ""), ("A2", CAROL, "approve", "")])
    assert alpha.spool.read.locate(letter_id) == "sent"
    assert alpha.spool.read.annotations(letter_id)["approved_by"] == DAVE


def test_a_letter_the_spool_never_had_is_not_held_and_says_nothing_more(alpha: AgentMail) -> None:
    for check in (alpha.holds.bound, lambda i: alpha.holds.release(i, "someone")):
        with pytest.raises(NotFound) as missing:
            check("01abcdefghjkmnpqrstvwxyz00")
        assert str(missing.value) == "letter 01abcdefghjkmnpqrstvwxyz00 is not held"


def test_a_letter_taken_out_of_held_by_another_process_is_not_released(
    alpha: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the check and the rename another process moved it: the rename finds nothing and
    the refusal names where the letter is now."""
    letter_id, _ = held_and_announced(alpha, home)
    monkeypatch.setattr(alpha.holds.box, "move", lambda *args: False)
    with pytest.raises(NotFound) as lost:
        alpha.holds.release(letter_id, "someone")
    assert str(lost.value) == f"letter {letter_id} is not held (it is held)"
    assert "approved" not in alpha.spool.read.annotations(letter_id)


def test_where_the_transport_mails_people_the_followers_are_part_of_what_was_approved(
    fan_out: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On smtp+imap the followers are RCPT TOs too: the digest checked at release is made with
    them, as it was when the letter was held."""
    monkeypatch.setattr(Holds, "_mails_people", lambda self: True)
    alpha, letter_id = held_fan_out(fan_out, home)
    assert alpha.show(letter_id).cc  # erin follows gamma
    assert alpha.approve(letter_id, key_file=operator_key(home)).state == "sent"


def test_a_letter_gone_from_the_spool_between_the_check_and_the_rename_is_not_held(
    alpha: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    letter_id, _ = held_and_announced(alpha, home)
    said = iter(["held", None])
    monkeypatch.setattr(alpha.holds.box, "move", lambda *args: False)
    monkeypatch.setattr(alpha.spool.read, "locate", lambda letter: next(said))
    with pytest.raises(NotFound) as lost:
        alpha.holds.release(letter_id, "someone")
    assert str(lost.value) == f"letter {letter_id} is not held"
