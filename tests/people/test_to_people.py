"""One door for letters to people (``client/to_people``): every one goes through the bus's
transport, also on the local post office; one the transport cannot take now is sent again by
the next sync, once, or (when its command fails instead) never kept; and a change of the
``hold`` rule is told to the approvers the same way through the API as through the CLI."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.cli.app import main
from agentmail.client.facade import AgentMail
from agentmail.client.to_people import ToPeople
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import BadInput, ConfigError, Refused
from agentmail.transport import OnResult, Outgoing, SubmitResult
from agentmail.transport.local import LocalTransport

from ..conftest import OPENER
from .test_approval_by_mail import CAROL, answer, approving, mailbox  # noqa: F401  (approving: the fixture)


class unreachable:  # noqa: N801  (read as a sentence: blocked = unreachable(home) ... blocked.unlink())
    """Carol's mailbox cannot take a letter now (a file where her Maildir goes), until ``unlink``."""

    def __init__(self, home: Path) -> None:
        (home / "postoffice").mkdir(exist_ok=True)
        self.maildir = home / "postoffice" / CAROL
        self.aside = home / "postoffice" / "carol-aside"
        if self.maildir.is_dir():
            self.maildir.rename(self.aside)
        self.maildir.write_text("not a Maildir")

    def unlink(self) -> None:
        self.maildir.unlink()
        if self.aside.is_dir():
            self.aside.rename(self.maildir)


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The envelope of every submission the local post office took."""
    seen: list[tuple[str, ...]] = []
    real = LocalTransport.submit

    def spying(
        self: LocalTransport, messages: Sequence[Outgoing], on_result: OnResult | None = None
    ) -> list[SubmitResult]:
        seen.extend(item.envelope.rcpt_to for item in messages)
        return real(self, messages, on_result)

    monkeypatch.setattr(LocalTransport, "submit", spying)
    return seen


def test_every_letter_for_people_goes_through_the_transport_on_the_local_bus(
    approving: Registry,  # noqa: F811
    home: Path,
    submitted: list[tuple[str, ...]],
) -> None:
    """The held letter's announcement, the hold rule's change and a change asked of the
    approvers are submitted like any letter (they went around the transport before), and land
    where they always did: the person's Maildir."""
    alpha = AgentMail(approving, Identity("alpha"), home)
    letter = alpha.send("beta", "Quota 500s", OPENER)
    assert letter.state == "held" and submitted == [(CAROL,)]
    assert alpha.tell_hold_change(["beta@bus.test"], ["beta@bus.test", "gamma@bus.test"]) is True
    with pytest.raises(Refused):
        alpha.ask_approvers("agentmail bus set hold", "Nothing is held any more.")
    assert submitted == [(CAROL,)] * 3
    subjects = [str(m["Subject"]) for m in mailbox(home, CAROL)]
    assert len(subjects) == 3 and subjects[1:] == ["The hold rule changed", "Approve? a change: agentmail bus set hold"]


def test_an_announcement_the_transport_cannot_take_is_sent_by_the_next_sync_once(
    approving: Registry,  # noqa: F811
    home: Path,
) -> None:
    alpha, beta = AgentMail(approving, Identity("alpha"), home), AgentMail(approving, Identity("beta"), home)
    blocked = unreachable(home)
    letter = alpha.send("beta", "Quota 500s", OPENER)
    assert letter.state == "held"
    noted = alpha.show(letter.id).extra
    assert "announced" not in noted and noted["announce_failed"].startswith("queued, sent again by the next sync")
    blocked.unlink()  # her mailbox takes letters again
    alpha.sync()
    (news,) = mailbox(home, CAROL)
    assert letter.id in str(news["Subject"]) and alpha.show(letter.id).extra["announced"] == news["Message-ID"]
    for _ in range(2):
        AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), home).sync()
    assert len(mailbox(home, CAROL)) == 1  # once
    answer(home, news, "approve")  # and the announcement sent late decides as any
    alpha.sync()
    assert alpha.spool.read.locate(letter.id) == "sent"
    assert [x.message_id for x in beta.inbox()] == [alpha.show(letter.id).message_id]


def test_a_queued_announcement_of_a_letter_no_longer_held_is_never_sent(
    approving: Registry,  # noqa: F811
    home: Path,
) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)
    blocked = unreachable(home)
    letter = alpha.send("beta", "Quota 500s", OPENER)
    alpha.reject(letter.id, "sent by mistake")
    blocked.unlink()
    alpha.sync()
    assert mailbox(home, CAROL) == []
    assert not (alpha.spool.root / "announcements").exists()  # nothing waits: the next sync looks no further


def test_a_crash_inside_an_announcements_submission_never_sends_it_twice(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)

    def killed(*args: object) -> tuple[str, str]:
        raise KeyboardInterrupt  # the process dies inside the submission: did the server take it?

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(ToPeople, "deliver", killed)
        alpha.send("beta", "Quota 500s", OPENER)
    (record,) = (alpha.spool.root / "announcements").glob("*.json")
    assert '"state": "sending"' in record.read_text()  # recorded durably before the send
    (held,) = alpha.held()
    for _ in range(2):
        AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), home).sync()
    assert mailbox(home, CAROL) == []  # at most once
    assert alpha.show(held.id).extra["announce_failed"].startswith("interrupted inside its submission")
    assert not (alpha.spool.root / "announcements").exists()  # said on the letter: nothing waits


def test_a_digest_the_transport_cannot_take_is_not_kept_to_send_later(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its command fails (exit 5) and is run again: a digest kept as well would reach people twice."""
    bus.set_person(registry, "alpha", CAROL, follows=True, writes=False)
    alpha = AgentMail(registry_mod.load(registry.root), Identity("alpha"), home)
    blocked = unreachable(home)
    assert main(["--as", "alpha", "digest", "--send", "--no-sync"]) == 5
    blocked.unlink()
    alpha.sync()
    assert mailbox(home, CAROL) == [] and not (alpha.spool.root / "digest.json").exists()
    assert alpha.send_digest(alpha.digest(sync=False))["status"] == "sent"
    assert len(mailbox(home, CAROL)) == 1


def test_the_api_announces_a_hold_change_as_the_cli_does(approving: Registry, home: Path) -> None:  # noqa: F811
    """``bus.change_hold``: told first, from the first platform with an approver; nothing told when
    nothing changes; a change that cannot be told is not made (exit 6's ConfigError)."""
    bus.change_hold(approving.root, ["beta@bus.test", "Gamma@bus.test"], home=home)
    (news,) = mailbox(home, CAROL)
    assert news["Subject"] == "The hold rule changed" and news["From"].addresses[0].addr_spec == "alpha@bus.test"
    assert "Now:    beta@bus.test, gamma@bus.test" in news.get_content()
    assert registry_mod.load(approving.root).bus.hold == ("beta@bus.test", "gamma@bus.test")
    bus.change_hold(approving.root, ["beta@bus.test", "gamma@bus.test"], home=home)  # no change: nothing to tell
    assert len(mailbox(home, CAROL)) == 1
    blocked = unreachable(home)
    with pytest.raises(ConfigError, match="the hold rule is unchanged: the approvers could not be told"):
        bus.change_hold(approving.root, ["bus.test"], home=home)
    assert registry_mod.load(approving.root).bus.hold == ("beta@bus.test", "gamma@bus.test")
    blocked.unlink()
    with pytest.raises(BadInput):
        bus.change_hold(approving.root, ["Not A Domain"], home=home)  # refused before anyone is told
    assert len(mailbox(home, CAROL)) == 1


def test_the_client_that_tells_is_the_one_given(approving: Registry, home: Path) -> None:  # noqa: F811
    beta = AgentMail(approving, Identity("beta"), home)
    bus.change_hold(approving.root, ["beta@bus.test", "bus.test"], teller=lambda _reg: beta, home=home)
    (news,) = mailbox(home, CAROL)
    assert (
        news["From"].addresses[0].addr_spec == "beta@bus.test"
        and "Now:    beta@bus.test, bus.test" in news.get_content()
    )
    assert registry_mod.load(approving.root).bus.hold == ("beta@bus.test", "bus.test")


def test_the_rule_tells_nothing_when_nothing_changes_or_nobody_approves(
    approving: Registry,  # noqa: F811
    registry: Registry,
    home: Path,
) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)
    assert (
        alpha.tell_hold_change(["beta@bus.test"], [" Beta@bus.test ", ""]) is False
    )  # the same rule, written otherwise
    nobody = AgentMail(registry, Identity("alpha"), home)  # the registry as it was before anyone approved
    assert nobody.tell_hold_change([], ["bus.test"]) is False and nobody.announce_hold_change([], ["bus.test"]) == ""
    assert mailbox(home, CAROL) == []


def test_an_announcement_the_spool_cannot_record_is_not_sent_and_says_why(
    approving: Registry,  # noqa: F811
    home: Path,
) -> None:
    """Recorded first or not at all: a letter for people that could not be remembered is never
    sent (it could not be told apart from one sent already); the letter stays held with why."""
    alpha = AgentMail(approving, Identity("alpha"), home)
    alpha.spool.ensure()
    (alpha.spool.root / "announcements").write_text("not a folder")
    letter = alpha.send("beta", "Quota 500s", OPENER)
    assert letter.state == "held" and mailbox(home, CAROL) == []
    assert "announced" not in alpha.show(letter.id).extra and alpha.show(letter.id).extra["announce_failed"]
