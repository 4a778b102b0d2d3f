"""Issue 37, "a control that guards against the agent needs something the agent lacks": with
approvers listed, nothing the agent can run with agentmail's commands (replacing the approval
key, adding or removing an approver, lifting or narrowing a hold, changing whose verdicts are
trusted, a platform's key, rewriting the registry) takes effect without an approver's verified
answer by mail, and each is announced to them; the first approval key is pinned by ``init``
only; on a bus nobody approves, the CLI says a hold guards against mistakes, not the agent."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.cli import mcp_server
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import ConfigError, Refused
from agentmail.people import approval

from ..conftest import OPENER, Cli
from ..helpers.approval_key import operator_key
from .test_approval_by_mail import CAROL, DAVE, answer, approved, mailbox

MALLORY = "mallory@people.test"  # an address the agent would like to approve with


@pytest.fixture
def guarded(registry: Registry, home: Path) -> Registry:
    """alpha and beta on disk; carol approves alpha's letters, dave writes for alpha; letters to
    beta are held; the bus's MTA is trusted (the CLI reads all of it from disk)."""
    bus.set_setting(registry.root, "hold", ["beta@bus.test"])  # before an approver: then it is asked, or told
    bus.set_setting(registry.root, "trusted_authserv_ids", ["mail.bus.test"])
    bus.set_person(registry_mod.load(registry.root), "alpha", DAVE, follows=False, writes=True)  # before an approver
    bus.set_person(registry_mod.load(registry.root), "alpha", CAROL, follows=False, writes=False, approves=True)
    return registry_mod.load(registry.root)


def asked(home: Path, change: str) -> EmailMessage:
    (news,) = [m for m in mailbox(home, CAROL) if str(m["Subject"]).strip() == f"Approve? a change: {change}"]
    return news


def approvers_of(home: Path) -> list[str]:
    return list(approval.approvers(registry_mod.load(home / "registry"), "alpha"))


def test_adding_an_approver_waits_for_an_approvers_answer_and_happens_once(guarded: Registry, home: Path,
                                                                           cli: Cli) -> None:  # fmt: skip
    command = ("--as", "alpha", "person", "alpha", MALLORY, "--approves")
    code, out, err = cli(*command)
    assert (code, out) == (4, "") and len(err.strip().splitlines()) == 1 and "waits for an approver" in err
    assert approvers_of(home) == [CAROL]
    news = asked(home, f"agentmail person alpha {MALLORY} --approves")
    assert news["Auto-Submitted"] == "auto-generated"
    assert "takes effect only if you approve it" in news.get_content().replace("\r\n", " ").replace("  ", " ")
    code, _, err = cli(*command)  # run again before any answer: still refused, not asked twice
    assert code == 4 and "still waits" in err and len(mailbox(home, CAROL)) == 1
    answer(home, news, "approve")
    assert cli(*command)[0] == 0
    assert approvers_of(home) == [CAROL, MALLORY]
    assert cli("--as", "alpha", "person", "alpha", MALLORY)[0] == 4  # the approval was spent: removing asks anew


def test_a_rejected_or_disputed_change_never_happens(guarded: Registry, home: Path, cli: Cli) -> None:
    approved(home, lambda: bus.set_person(registry_mod.load(home / "registry"), "alpha", DAVE, follows=False,
                                          writes=True, approves=True))  # fmt: skip
    command = ("--as", "alpha", "person", "alpha", MALLORY, "--approves")
    assert cli(*command)[0] == 4
    news = asked(home, f"agentmail person alpha {MALLORY} --approves")
    answer(home, news, "reject: who is mallory?")
    code, _, err = cli(*command)
    assert code == 4 and "rejected" in err and "who is mallory?" in err
    assert cli(*command)[0] == 4  # asked anew
    news = [m for m in mailbox(home, CAROL) if MALLORY in str(m["Subject"])][-1]
    answer(home, news, "approve", n=2)
    answer(home, news, "reject", sender=DAVE, n=3)
    code, _, err = cli(*command)
    assert code == 4 and "disagree" in err
    assert sorted(approvers_of(home)) == [CAROL, DAVE]


def test_an_answer_from_someone_who_approves_nothing_changes_nothing(guarded: Registry, home: Path, cli: Cli) -> None:
    command = ("--as", "alpha", "bus", "set", "hold", "")
    assert cli(*command)[0] == 4
    answer(home, asked(home, 'agentmail bus set hold ""'), "approve", sender=DAVE)
    code, _, err = cli(*command)
    assert code == 4 and "still waits" in err
    assert registry_mod.load(home / "registry").bus.hold == ("beta@bus.test",)
    alpha = AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), home)
    (dave,) = [x for x in alpha.inbox() if x.sender_address == DAVE]
    assert "does not approve" in alpha.spool.read.annotations(dave.id)["approval_ignored"]


@pytest.mark.parametrize(
    ("command", "change"),
    [
        (("bus", "set", "hold", "bus.test", "gamma@bus.test"), None),  # holding more: told, not asked
        (("bus", "set", "hold", "gamma@bus.test"), "agentmail bus set hold gamma@bus.test"),  # beta no longer held
        (("bus", "set", "trusted_authserv_ids", "evil.test"), "agentmail bus set trusted_authserv_ids evil.test"),
        (("keygen",), "agentmail --as alpha keygen"),
        (("keygen", "--rotate", "7d"), "agentmail --as alpha keygen --rotate"),
        (("person", "alpha", CAROL), f"agentmail person alpha {CAROL}"),  # the last approver taken off
        (("person", "alpha", DAVE, "--writes", "--approves"), f"agentmail person alpha {DAVE} --writes --approves"),
        (("init", "--force", "--domain", "bus.test", "alpha", "beta"), "agentmail init --force alpha beta"),
    ],
)
def test_every_command_that_loosens_a_guard_is_asked_of_the_approvers_first(
    guarded: Registry, home: Path, cli: Cli, command: tuple[str, ...], change: str | None
) -> None:
    before = {p.relative_to(home): p.read_bytes() for p in (home / "registry").rglob("*") if p.is_file()}
    code, _, err = cli("--as", "alpha", *command)
    after = {p.relative_to(home): p.read_bytes() for p in (home / "registry").rglob("*") if p.is_file()}
    if change is None:
        assert code == 0 and after != before and len(mailbox(home, CAROL)) == 1  # announced
        return
    assert code == 4 and "waits for an approver" in err, err
    assert after == before  # nothing changed
    news = asked(home, change)
    answer(home, news, "approve")
    code, _, err = cli("--as", "alpha", *command)
    assert code == 0, err


def test_replacing_the_approval_key_needs_the_old_one_and_an_approvers_answer(
    guarded: Registry, home: Path, cli: Cli
) -> None:
    old = operator_key(home)
    pin = (home / "registry" / approval.PIN_FILE).read_bytes()
    new = str(home.parent / "new.key")
    assert cli("approve", "--new-key", new)[0] == 4  # without the old key nobody is even asked
    assert mailbox(home, CAROL) == []
    code, _, err = cli("approve", "--new-key", new, "--key-file", old)
    assert code == 4 and "waits for an approver" in err and not Path(new).exists()
    assert (home / "registry" / approval.PIN_FILE).read_bytes() == pin
    answer(home, asked(home, "agentmail approve --new-key (replace the approval key)"), "approve")
    code, out, err = cli("approve", "--new-key", new, "--key-file", old)
    assert code == 0 and "pinned" in out, err
    assert (home / "registry" / approval.PIN_FILE).read_bytes() != pin


def test_the_agent_cannot_pin_the_first_key_and_approve_its_own_letter(guarded: Registry, home: Path, cli: Cli) -> None:
    """The attack: on a bus nobody pinned a key for, the agent pinned one and released its letter."""
    alpha = AgentMail(guarded, Identity("alpha"), home)
    letter = alpha.send("beta", "Quota 500s", OPENER)
    mine = str(home.parent / "mine.key")
    code, out, err = cli("--as", "alpha", "approve", "--new-key", mine)
    assert (code, out) == (4, "") and "init --approval-key" in err and not Path(mine).exists()
    assert not (home / "registry" / approval.PIN_FILE).exists()
    with pytest.raises(Refused, match="init --approval-key"):
        approval.new_key(guarded, mine, home, None)  # the library alike
    assert cli("--as", "alpha", "approve", letter.id, "--key-file", mine)[0] == 4
    assert alpha.spool.read.locate(letter.id) == "held"
    # init --force over this bus rewrites its people: the approvers are asked first
    code, _, err = cli("init", "--force", "--domain", "bus.test", "alpha", "beta", "--approval-key", mine)
    assert code == 4 and "waits for an approver" in err and not Path(mine).exists()
    assert not (home / "registry" / approval.PIN_FILE).exists()


def test_init_pins_the_first_key_and_never_a_second(home: Path, cli: Cli) -> None:
    key = str(home.parent / "operator.key")
    code, out, err = cli("init", "--domain", "bus.test", "alpha", "beta", "--approval-key", key)
    assert code == 0, err
    assert Path(key).stat().st_mode & 0o777 == 0o600
    approval.check_key(registry_mod.load(home / "registry"), key)  # pinned
    other = str(home.parent / "other.key")
    code, _, err = cli("init", "--force", "--domain", "bus.test", "alpha", "beta", "--approval-key", other)
    assert code == 4 and "pinned already" in err and not Path(other).exists()
    code, _, err = cli("--registry", str(home.parent / "reg2"), "init", "--domain", "bus.test", "gamma",
                       "--approval-key", str(home / "inside.key"))  # fmt: skip
    assert code == 2 and "AGENTMAIL_HOME" in err and not (home.parent / "reg2").exists()


def test_without_approvers_the_cli_says_a_hold_guards_against_mistakes_only(registry: Registry, cli: Cli) -> None:
    code, _, err = cli("bus", "set", "hold", "bus.test")
    assert code == 0 and "mistakes, not against the agent" in err
    code, out, _ = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER, "--hold")
    assert code == 0 and "mistakes, not against the agent" in out
    code, out, _ = cli("--as", "alpha", "held")
    assert code == 0 and "mistakes, not against the agent" in out


def test_with_approvers_the_cli_does_not_say_so(guarded: Registry, cli: Cli) -> None:
    code, out, _ = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 0 and "approvers were told" in out and "mistakes" not in out
    code, out, _ = cli("--as", "alpha", "held")
    assert "mistakes" not in out and "digest " in out


def test_nobody_is_asked_on_a_bus_nobody_approves(alpha: AgentMail, home: Path) -> None:
    assert alpha.ask_approvers('agentmail bus set hold ""', "The hold rule is lifted.") == ""
    assert not (home / "postoffice").exists() or not any((home / "postoffice").glob("*@*"))


def test_a_change_the_approvers_cannot_be_asked_about_is_not_made(
    guarded: Registry, home: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unsigned(*args: object, **kwargs: object) -> object:
        raise ConfigError("cannot sign with the key of alpha")

    monkeypatch.setattr(approval, "change_request", unsigned)
    code, out, err = cli("--as", "alpha", "bus", "set", "hold", "")
    assert (code, out) == (6, "") and "could not be asked" in err and len(err.strip().splitlines()) == 1
    assert registry_mod.load(home / "registry").bus.hold == ("beta@bus.test",)
    assert not list((home / "spool").rglob("changes/*.json"))  # nothing waits for an answer never asked


def test_mcp_held_shows_the_digest_and_answers_that_disagree(guarded: Registry, home: Path) -> None:
    approved(home, lambda: bus.set_person(registry_mod.load(home / "registry"), "alpha", DAVE, follows=False,
                                          writes=True, approves=True))  # fmt: skip
    alpha = AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), home)
    letter = alpha.send("beta", "Quota 500s", OPENER)
    news = [m for m in mailbox(home, CAROL) if letter.id in str(m["Subject"])][0]
    answer(home, news, "approve")
    answer(home, news, "reject: not yet", sender=DAVE, n=2)
    alpha.sync()
    (shown,) = mcp_server.call(alpha, "held", {})["items"]
    assert shown["id"] == letter.id and len(shown["held_digest"]) == 64
    assert shown["answers"].splitlines() == [f"{CAROL} approve", f"{DAVE} reject: not yet"]
    assert "disagree" in shown["answers_disagree"]
