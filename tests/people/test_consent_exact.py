"""``Consent.ask`` exactly (mutation run 12): who is asked, each refusal word for word, the one
approval spent by the one ask that takes it, and a record that was never announced."""

from __future__ import annotations

import json
from pathlib import Path, PosixPath

import pytest

from agentmail.admin import bus
from agentmail.client import guard_changes
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import Refused

from .test_approval_by_mail import CAROL, DAVE, answer, approved, mailbox
from .test_writing import trusting

CHANGE = "agentmail bus set hold x"


@pytest.fixture
def two(registry: Registry, home: Path) -> AgentMail:
    """carol and dave approve alpha's letters (carol approved dave's listing)."""
    bus.set_setting(registry.root, "trusted_authserv_ids", ["mail.bus.test"])  # carol's answer is judged on it
    bus.set_person(registry, "alpha", CAROL, follows=False, writes=False, approves=True)
    approved(home, lambda: bus.set_person(registry_mod.load(registry.root), "alpha", DAVE, follows=False,
                                          writes=False, approves=True))  # fmt: skip
    return AgentMail(trusting(registry_mod.load(registry.root)), Identity("alpha"), home)


def _refused(am: AgentMail, change: str = CHANGE) -> str:
    with pytest.raises(Refused) as refused:
        am.ask_approvers(change, "what it does")
    return str(refused.value)


def _asked(home: Path) -> list[str]:
    return [str(m["Subject"]) for m in mailbox(home, CAROL)]


def test_nobody_is_asked_where_nobody_approves(alpha: AgentMail, home: Path) -> None:
    assert alpha.ask_approvers(CHANGE, "what it does") == ""
    assert not guard_changes.folder_of(alpha.spool).exists()


def test_the_first_ask_announces_once_and_says_who_was_asked(two: AgentMail, home: Path) -> None:
    assert _refused(two) == (
        f"this change waits for an approver: {CAROL}, {DAVE} were asked by mail; "
        "run the same command again once one has approved it"
    )
    assert _asked(home) == [f"Approve? a change: {CHANGE}"] and len(mailbox(home, DAVE)) == 1
    assert _refused(two) == "this change still waits for an approver's answer by mail (asked already: not asked again)"
    assert _asked(home) == [f"Approve? a change: {CHANGE}"]


def test_the_change_is_asked_as_one_line(two: AgentMail, home: Path) -> None:
    _refused(two, "agentmail bus set\nhold x")
    (path,) = guard_changes.folder_of(two.spool).glob("*.json")
    assert json.loads(path.read_text())["change"] == "agentmail bus set hold x"
    assert _refused(two, "agentmail bus set hold x").startswith("this change still waits")


def test_an_approval_returns_the_approver_once(two: AgentMail, home: Path) -> None:
    _refused(two)
    answer(home, mailbox(home, CAROL)[0], "approve", sender=DAVE)
    answer(home, mailbox(home, CAROL)[0], "Approved.", sender=CAROL, n=2)
    assert two.ask_approvers(CHANGE, "what it does") == DAVE
    assert list(guard_changes.folder_of(two.spool).glob("*.json")) == []
    assert _refused(two).startswith("this change waits for an approver:")  # spent: asked anew


def test_a_rejection_and_a_disagreement_say_every_answer(two: AgentMail, home: Path) -> None:
    _refused(two)
    answer(home, mailbox(home, CAROL)[0], "reject: not now", sender=CAROL)
    answer(home, mailbox(home, CAROL)[0], "reject", sender=DAVE, n=2)
    assert _refused(two) == (
        f"the change was rejected ({CAROL} reject: not now; {DAVE} reject: no reason given); nothing was changed"
    )
    _refused(two)
    news = mailbox(home, CAROL)[-1]
    answer(home, news, "approve", sender=CAROL, n=3)
    answer(home, news, "reject: no", sender=DAVE, n=4)
    assert _refused(two) == f"the approvers disagree ({CAROL} approve; {DAVE} reject: no); nothing was changed"


def test_a_record_never_announced_is_announced_anew(two: AgentMail, home: Path) -> None:
    folder = guard_changes.folder_of(two.spool)
    folder.mkdir(parents=True, exist_ok=True)  # dave's listing was asked through it
    (folder / "old.json").write_text(json.dumps({"change": CHANGE, "answers": [f"{CAROL} approve"]}))
    assert _refused(two).startswith("this change waits for an approver:")
    assert _asked(home) == [f"Approve? a change: {CHANGE}"]


def test_a_partners_guard_is_decided_by_its_own_approvers(two: AgentMail, home: Path) -> None:
    approved(home, lambda: bus.set_person(registry_mod.load(home / "registry"), "beta", "erin@people.test",
                                          follows=False, writes=False, approves=True), CAROL, DAVE)  # fmt: skip
    am = AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), home)
    with pytest.raises(Refused) as refused:
        am.ask_approvers(CHANGE, "what it does", "beta")
    assert "erin@people.test were asked by mail" in str(refused.value) and CAROL not in str(refused.value)


class _TakenAlready(PosixPath):
    """A change's record another command removed between reading and taking it."""

    def unlink(self, missing_ok: bool = False) -> None:
        raise FileNotFoundError(str(self))


def test_an_approval_another_command_took_first_lets_this_one_nothing(
    two: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refused(two)
    answer(home, mailbox(home, CAROL)[0], "approve", sender=CAROL)
    found = guard_changes.find
    monkeypatch.setattr(
        guard_changes, "find", lambda spool, change, effect: _TakenAlready(found(spool, change, effect))
    )
    assert _refused(two) == "this change's approval was taken up by another command already: ask again"
