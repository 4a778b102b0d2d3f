"""Issue 12, approving: letters held for a person (bus ``hold``, ``send --hold``), approve and
reject, and the new-thread quota per platform counted from the letter files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail import bus
from agentmail import registry as registry_mod
from agentmail.cli import main
from agentmail.client import AgentMail
from agentmail.errors import BadInput, NotFound, Refused
from agentmail.identity import Identity
from agentmail.registry import Registry

from .conftest import OPENER
from .mailservers import MailServers
from .test_transport_smtpimap import USERS, make_bus


def _with(home: Path, key: str, values: list[str]) -> Registry:
    bus.set_setting(home / "registry", key, values)
    return registry_mod.load(home / "registry")


def test_a_held_letter_is_signed_kept_and_never_flushed_until_approved(registry: Registry, home: Path) -> None:
    reg = _with(home, "hold", ["bus.test"])
    alpha, beta = AgentMail(reg, Identity("alpha"), home), AgentMail(reg, Identity("beta"), home)
    letter = alpha.send("beta", "Quota 500s", OPENER)
    assert letter.state == "held" and "hold = 'bus.test'" in letter.extra["held_reason"]
    assert alpha.spool.path("held", letter.id).read_bytes().startswith(b"DKIM-Signature:")
    alpha.flush()
    alpha.sync()
    assert beta.inbox() == [] and alpha.spool.ids("outbox") == []
    assert [x.id for x in alpha.held()] == [letter.id]
    (row,) = alpha.status()
    assert row["delivery"] == "held" and "hold" in row["delivery_detail"]
    sent = alpha.approve(letter.id)
    assert sent.state == "sent" and alpha.held() == []
    (got,) = beta.inbox()
    assert got.message_id == letter.message_id
    with pytest.raises(NotFound, match="not held"):
        alpha.approve(letter.id)  # approving twice never sends twice
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
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash right after the rename leaves the letter in the outbox (the next flush sends
    it once); a crash before it leaves it held. Never both, never neither."""
    letter = alpha.send("beta", "Quota", OPENER, hold=True)

    def crash() -> None:
        raise KeyboardInterrupt  # the process dies after the rename, before submitting

    monkeypatch.setattr(alpha, "flush", crash)
    with pytest.raises(KeyboardInterrupt):
        alpha.approve(letter.id)
    assert alpha.spool.locate(letter.id) == "outbox" and alpha.held() == []
    monkeypatch.undo()
    alpha.flush()
    alpha.flush()
    assert len(beta.inbox()) == 1 and alpha.spool.locate(letter.id) == "sent"


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


def test_the_cli_holds_lists_approves_and_rejects(capsys: pytest.CaptureFixture[str]) -> None:
    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    assert run("init", "--domain", "bus.test", "alpha", "beta")[0] == 0
    assert run("bus", "set", "hold", "bus.test")[0] == 0
    code, out, _ = run("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 0 and " held (not sent)" in out and "agentmail approve" in out
    thread, letter_id = out.split()[:2]
    code, out, _ = run("--as", "alpha", "--json", "status")
    assert json.loads(out)[0]["delivery"] == "held"
    assert "WAITING FOR A PERSON" in run("--as", "alpha", "status")[1]
    assert letter_id in run("--as", "alpha", "held")[1]
    assert thread not in run("--as", "beta", "inbox")[1]  # held: beta got nothing
    code, out, _ = run("--as", "alpha", "approve", letter_id)
    assert code == 0 and out.split() == [thread, letter_id, "sent"]
    assert run("--as", "alpha", "approve", letter_id)[0] == 1
    code, out, _ = run("--as", "alpha", "send", "beta", "-s", "Other", "-b", OPENER)
    second = out.split()[1]
    code, out, _ = run("--as", "alpha", "reject", second, "-r", "wrong partner")
    assert code == 0 and "rejected: wrong partner" in out
    assert "rejected" in run("--as", "alpha", "sent")[1]
    assert run("bus", "set", "new_threads_per_hour", "1")[0] == 0
    code, _, err = run("--as", "alpha", "send", "beta", "-s", "Third", "-b", OPENER)
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
        assert alpha.approve(letter.id).state == "sent"
        alpha.flush()
        alpha.sync()
        assert len(servers.store.accepted) == 1
        (got,) = beta.inbox()
        assert got.message_id == letter.message_id
