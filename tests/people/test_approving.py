"""Issue 12, approving: letters held for a person (bus ``hold``, ``send --hold``), approve and
reject, and the new-thread quota per platform counted from the letter files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import BadInput, NotFound, Refused

from ..conftest import OPENER, Cli
from ..helpers.approval_key import operator_key
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import USERS, make_bus


def _with(home: Path, key: str, values: list[str]) -> Registry:
    bus.set_setting(home / "registry", key, values)
    return registry_mod.load(home / "registry")


def test_a_held_letter_is_signed_kept_and_never_flushed_until_approved(registry: Registry, home: Path) -> None:
    reg = _with(home, "hold", ["bus.test"])
    alpha, beta = AgentMail(reg, Identity("alpha"), home), AgentMail(reg, Identity("beta"), home)
    letter = alpha.send("beta", "Quota 500s", OPENER)
    assert letter.state == "held" and "hold = 'bus.test'" in letter.extra["held_reason"]
    assert alpha.spool.read.path("held", letter.id).read_bytes().startswith(b"DKIM-Signature:")
    alpha.flush()
    alpha.sync()
    assert beta.inbox() == [] and alpha.spool.read.ids("outbox") == []
    assert [x.id for x in alpha.held()] == [letter.id]
    (row,) = alpha.status()
    assert row.delivery == "held" and "hold" in row.delivery_detail
    with pytest.raises(Refused, match="approval key"):
        alpha.approve(letter.id)  # the agent alone cannot release it (issue 26)
    sent = alpha.approve(letter.id, key_file=operator_key(home))
    assert sent.state == "sent" and alpha.held() == []
    (got,) = beta.inbox()
    assert got.message_id == letter.message_id
    with pytest.raises(NotFound, match="not held"):
        alpha.approve(letter.id, key_file=operator_key(home))  # approving twice never sends twice
    assert len(beta.inbox()) == 1


def test_send_hold_and_rules_for_one_address(registry: Registry, home: Path, alpha: AgentMail) -> None:
    assert alpha.send("beta", "Asked", OPENER, hold=True).state == "held"
    reg = _with(home, "hold", ["beta@bus.test"])
    assert AgentMail(reg, Identity("alpha"), home).send("beta", "Rule", OPENER).state == "held"
    assert AgentMail(reg, Identity("beta"), home).send("alpha", "Other", OPENER).state == "sent"
    with pytest.raises(BadInput, match="hold"):
        bus.set_setting(home / "registry", "hold", ["Not A Domain"])


def test_reject_drops_the_letter_with_the_reason_and_frees_the_reply_claim(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Quota", OPENER)
    (got,) = beta.inbox()
    held = beta.reply(got, "We will refund everyone.", type="ack", hold=True)
    assert held is not None and held.state == "held"
    assert beta.reply(got, "Second answer") is None  # a held reply answers the letter
    assert "already answered" in (beta.why_refused(got) or "")
    rejected = beta.reject(held.id, "no promises of refunds")
    assert rejected.state == "failed" and rejected.extra["rejected"] == "no promises of refunds"
    assert "rejected by a person" in rejected.extra["failed_reason"]
    assert [x.state for x in beta.sent() if x.id == held.id] == ["failed"]
    again = beta.reply(got, "Reproduced; fixing.", type="ack")  # the claim is free again
    assert again is not None and again.state == "sent"
    assert [x.body.strip() for x in alpha.inbox()] == ["Reproduced; fixing."]
    with pytest.raises(BadInput):
        beta.reject(again.id, "  ")
    with pytest.raises(NotFound):
        beta.reject(again.id, "too late")


def test_approve_is_one_rename_held_to_outbox(
    alpha: AgentMail, beta: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash right after the rename leaves the letter in the outbox (the next flush sends
    it once); a crash before it leaves it held. Never both, never neither."""
    letter = alpha.send("beta", "Quota", OPENER, hold=True)

    def crash(*_: object) -> None:
        raise KeyboardInterrupt  # the process dies after the rename, before submitting

    monkeypatch.setattr(alpha.outbox, "flush", crash)
    key = operator_key(home)
    with pytest.raises(KeyboardInterrupt):
        alpha.approve(letter.id, key_file=key)
    assert alpha.spool.read.locate(letter.id) == "outbox" and alpha.held() == []
    monkeypatch.undo()
    alpha.flush()
    alpha.flush()
    assert len(beta.inbox()) == 1 and alpha.spool.read.locate(letter.id) == "sent"


def test_the_quota_counts_new_threads_from_the_files(registry: Registry, home: Path) -> None:
    reg = _with(home, "new_threads_per_hour", ["2"])
    alpha, beta = AgentMail(reg, Identity("alpha"), home), AgentMail(reg, Identity("beta"), home)
    first = alpha.send("beta", "One", OPENER)
    alpha.send("beta", "Two", OPENER, hold=True)  # waits to leave: counted
    with pytest.raises(Refused, match=r"new-thread quota.*new_threads_per_hour = 2.*frees up at \d{4}-"):
        alpha.send("beta", "Three", OPENER)
    alpha.note("handover", "Checked the quota endpoint; see thread.")  # notes are not counted
    (got,) = beta.inbox()
    beta.reply(got, "Which plan?", type="question")
    (question,) = alpha.inbox()
    assert alpha.reply(question, "The free plan.", type="question") is not None  # in a thread: not counted
    alpha.follow_up(first.thread, "Also fails for plan pro.", type="question")
    assert beta.send("alpha", "Theirs", OPENER).state == "sent"  # per platform
    alpha.spool.drop_caches()  # the quota is counted from the letters, not from a cache
    fresh = AgentMail(reg, Identity("alpha"), home)
    with pytest.raises(Refused, match="new-thread quota"):
        fresh.send("beta", "Three", OPENER)
    fresh.reject(fresh.held()[0].id, "not now")  # a rejected letter never left: not counted
    assert fresh.send("beta", "Three", OPENER).state == "sent"


def test_the_cli_holds_lists_approves_and_rejects(cli: Cli) -> None:
    key = str(Path.cwd() / "operator.key")  # the test's cwd is beside AGENTMAIL_HOME, not in it
    code, out, err = cli("init", "--domain", "bus.test", "alpha", "beta", "--approval-key", key)
    assert code == 0 and Path(key).stat().st_mode & 0o777 == 0o600, err
    assert cli("bus", "set", "hold", "bus.test")[0] == 0
    code, out, _ = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 0 and " held (not sent)" in out and "agentmail approve" not in out  # nothing the agent can run
    assert "no approver" in out
    thread, letter_id = out.split()[:2]
    code, out, _ = cli("--as", "alpha", "--json", "status")
    assert json.loads(out)[0]["delivery"] == "held"
    assert "WAITING FOR A PERSON" in cli("--as", "alpha", "status")[1]
    assert letter_id in cli("--as", "alpha", "held")[1]
    assert thread not in cli("--as", "beta", "inbox")[1]  # held: beta got nothing
    code, out, err = cli("--as", "alpha", "approve", letter_id)  # the agent, without the key
    assert (code, out) == (4, "") and len(err.strip().splitlines()) == 1 and "approval key" in err
    code, out, _ = cli("--as", "alpha", "approve", letter_id, "--key-file", key)
    assert code == 0 and out.split() == [thread, letter_id, "sent"]
    assert cli("--as", "alpha", "approve", letter_id, "--key-file", key)[0] == 1
    code, out, _ = cli("--as", "alpha", "send", "beta", "-s", "Other", "-b", OPENER)
    second = out.split()[1]
    code, out, _ = cli("--as", "alpha", "reject", second, "-r", "wrong partner")
    assert code == 0 and "rejected: wrong partner" in out
    assert "rejected" in cli("--as", "alpha", "sent")[1]
    assert cli("bus", "set", "new_threads_per_hour", "1")[0] == 0
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Third", "-b", OPENER)
    assert code == 4 and "new_threads_per_hour = 1" in err


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def test_on_smtp_imap_held_never_leaves_and_approve_sends_exactly_once(home: Path, servers: MailServers) -> None:
    make_bus(home, servers)
    reg = _with(home, "hold", ["beta@bus.test"])
    with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
        letter = alpha.send("beta", "Quota", OPENER)
        assert letter.state == "held"
        alpha.flush()
        alpha.sync()
        alpha.inbox()
        alpha.status()
        assert servers.store.accepted == [] and beta.inbox() == []
        assert alpha.approve(letter.id, key_file=operator_key(home)).state == "sent"
        alpha.flush()
        alpha.sync()
        assert len(servers.store.accepted) == 1
        (got,) = beta.inbox()
        assert got.message_id == letter.message_id


# --- every rule on every recipient (issue 23, class 4) ---------------------------------------
# Written as the attack: hold = ["people.test"] kept a letter *to* a held platform, but one that
# only copied someone at the held domain (a follower, the person a reply answers) left at once.


def _follower(home: Path, platform: str, address: str, hold: list[str]) -> Registry:
    bus.set_person(registry_mod.load(home / "registry"), platform, address, follows=True, writes=False)
    return _with(home, "hold", hold)


def test_a_letter_copying_a_follower_at_a_held_domain_is_held(registry: Registry, home: Path) -> None:
    reg = _follower(home, "beta", "carol@people.test", ["people.test"])
    alpha, beta = AgentMail(reg, Identity("alpha"), home), AgentMail(reg, Identity("beta"), home)
    letter = alpha.send("beta", "Quota 500s", OPENER)
    assert letter.cc == ("carol@people.test",)
    assert (letter.state, letter.extra["held_reason"]) == (
        "held",
        "held by the bus rule hold = 'people.test' (carol@people.test is copied)",
    )
    assert beta.inbox() == []
    assert alpha.approve(letter.id, key_file=operator_key(home)).state == "sent"
    (got,) = beta.inbox()  # beta's answer copies carol too: held on beta's side as well
    answer = beta.reply(got, "Reproduced.", type="ack")
    assert (
        answer is not None and answer.state == "held" and "carol@people.test is copied" in answer.extra["held_reason"]
    )


def test_a_follow_up_and_a_note_copying_a_held_follower_are_held(registry: Registry, home: Path) -> None:
    reg = _follower(home, "alpha", "carol@people.test", [])
    alpha = AgentMail(reg, Identity("alpha"), home)
    first = alpha.send("beta", "Quota 500s", OPENER)
    assert first.state == "sent"
    reg = _with(home, "hold", ["people.test"])
    alpha = AgentMail(reg, Identity("alpha"), home)
    more = alpha.send("beta", "", "Also the 502s.", type="report", thread=first.thread)
    assert more.state == "held" and "carol@people.test is copied" in more.extra["held_reason"]
    note = alpha.note("Handover", "The quota thread waits on beta.")
    assert note.state == "held" and note.cc == ("carol@people.test",)


def test_a_note_is_not_held_for_the_platforms_own_address(registry: Registry, home: Path) -> None:
    reg = _with(home, "hold", ["alpha@bus.test"])  # a rule naming the writer itself: its notes stay its own
    assert AgentMail(reg, Identity("alpha"), home).note("Handover", "The quota thread waits on beta.").state == "sent"


def test_a_reply_copying_the_person_it_answers_at_a_held_domain_is_held(registry: Registry, home: Path) -> None:
    from .test_writing import client_letter, trusting, vouched

    bus.set_person(registry, "beta", "carol@people.test", follows=False, writes=True)
    reg = trusting(_with(home, "hold", ["people.test"]))
    alpha = AgentMail(reg, Identity("alpha"), home)
    from agentmail.transport.local import deliver

    deliver(home / "postoffice" / "alpha", vouched(client_letter("alpha@bus.test", "The free plan lost its quota.")))
    (person,) = alpha.inbox()
    assert person.extra["person"] == "carol@people.test" and person.sender == "beta"
    answer = alpha.reply(person, "Restored it; please retry.", type="question")
    assert answer is not None and answer.cc == ("carol@people.test",)
    assert (answer.state, answer.extra["held_reason"]) == (
        "held",
        "held by the bus rule hold = 'people.test' (carol@people.test is copied)",
    )
    assert AgentMail(reg, Identity("beta"), home).inbox() == []


def test_a_fan_out_with_one_held_recipient_is_held_whole(home: Path) -> None:
    bus.init(home, home / "registry", ["alpha", "beta", "gamma"], domain="bus.test",
             endpoints={"new_threads_per_hour": 0})  # fmt: skip
    reg = _with(home, "hold", ["gamma@bus.test"])
    alpha = AgentMail(reg, Identity("alpha"), home)
    letter = alpha.send("beta,gamma", "Quota 500s", OPENER)
    assert (letter.state, letter.extra["held_reason"]) == ("held", "held by the bus rule hold = 'gamma@bus.test'")
    assert AgentMail(reg, Identity("beta"), home).inbox() == []  # one letter: nobody gets it before approval
    # and a fan-out whose only held party is a follower of one recipient
    reg = _follower(home, "gamma", "carol@people.test", ["people.test"])
    letter = AgentMail(reg, Identity("alpha"), home).send("beta,gamma", "Quota 502s", OPENER)
    assert letter.state == "held" and "carol@people.test is copied" in letter.extra["held_reason"]


def test_on_smtp_imap_a_held_follower_gets_nothing_until_approved(home: Path, servers: MailServers) -> None:
    servers.store.add_user("carol@bus.test", "carol-pw")
    make_bus(home, servers)
    reg = _follower(home, "beta", "carol@bus.test", ["carol@bus.test"])
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        letter = alpha.send("beta", "Quota", OPENER)
        assert letter.state == "held"
        alpha.flush()
        assert servers.store.accepted == [] and servers.store.messages("carol@bus.test") == []
        assert alpha.approve(letter.id, key_file=operator_key(home)).state == "sent"
        assert len(servers.store.messages("carol@bus.test")) == 1
