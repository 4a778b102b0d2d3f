"""Parties own their thread (issue 37): only a thread's parties change its state.

A thread id is no secret (it is in every address of the thread). A registered platform that is
no party to a thread can still sign a letter into it; ``route`` quarantines it ``not-a-party``,
so it never closes the thread, sets its outcome or takes a turn in ``status``, ``thread``,
``wait`` or ``watch``. The parties are those of the letters filed here: who wrote in the thread
and to whom (a person counts for every platform that lists them as writing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.cli.watch import Watcher
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import read_private_key
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.letter import wire
from agentmail.model import Letter, new_thread_id
from agentmail.spool.layout import reply_key
from agentmail.stages.route import Facts, route
from agentmail.transport.local import deliver
from agentmail.trust import signing
from agentmail.trust.authenticity import Verdict

from ..conftest import OPENER, Cli
from ..depth import examples
from ..mailservers import MailServers
from ..people.test_writing import CAROL, client_letter, trusting, vouched
from .test_addressed import mail3, smtp_imap_three  # noqa: F401  (the fixture)

NAMES = ("alpha", "beta", "gamma")


@pytest.fixture
def three(home: Path) -> Registry:
    bus.init(home, home / "registry", list(NAMES), domain="bus.test", endpoints={"new_threads_per_hour": 0})
    return registry_mod.load(home / "registry")


def box(reg: Registry, home: Path, name: str) -> AgentMail:
    return AgentMail(reg, Identity(name), home)


def written_into(
    reg: Registry, home: Path, sender: str, to: str, parent: Letter, kind: str, *, outcome: str | None = None
) -> bytes:
    """``sender``'s own signed letter into ``parent``'s thread, to ``to``: authentic, placed by its headers."""
    me = reg.get(sender)
    outline = wire.draft_letter(me.address, "", f"{to}+{parent.thread}@bus.test", kind, parent.thread,
                                "Re: Quota 500s", "Closing this.", in_reply_to=parent.message_id,
                                references=(parent.message_id,), outcome=outcome,
                                message_id=wire.new_message_id(sender, "bus.test"))  # fmt: skip
    return signing.sign(wire.render(outline), me.dkim_domain, me.selector, read_private_key(home, sender))


def opened(reg: Registry, home: Path) -> tuple[AgentMail, AgentMail, Letter]:
    """alpha reports to beta, beta has it: (alpha, beta, the report as beta filed it)."""
    alpha, beta = box(reg, home, "alpha"), box(reg, home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    (report,) = beta.inbox()
    return alpha, beta, report


def carol_listed_twice(three: Registry, home: Path) -> tuple[Registry, AgentMail, Letter, Letter, Any]:
    """carol writes for beta, and alpha (hostile) lists her too; beta reports to gamma, who has
    it. Returns (registry, gamma, beta's sent letter, the report as gamma filed it, carol's
    answer to it, not yet delivered)."""
    bus.set_person(three, "beta", CAROL, follows=False, writes=True)
    bus.set_person(registry_mod.load(three.root), "alpha", CAROL, follows=False, writes=True)
    reg = trusting(registry_mod.load(three.root))
    beta, gamma = box(reg, home, "beta"), box(reg, home, "gamma")
    sent = beta.send("gamma", "Quota 500s", OPENER)
    (report,) = gamma.inbox()
    answer = client_letter(f"gamma+{sent.thread}@bus.test", "Any news?", in_reply_to=sent.message_id)
    return reg, gamma, sent, report, answer


# --- the rule, pure ----------------------------------------------------------------------------

LETTER = Letter(message_id="<01m.gamma@bus.test>", sender="gamma", sender_address="gamma@bus.test", to="beta",
                to_address="beta@bus.test", type="close", thread="thr-aaaaaaaaaa", subject="s", body="b",
                date="")  # fmt: skip


@settings(max_examples=examples(100), deadline=None)
@given(
    parties=st.frozensets(st.sampled_from(("alpha", "beta", "gamma", "delta")), max_size=4),
    sender=st.sampled_from(("alpha", "beta", "gamma", "delta")),
    speaks_for=st.frozensets(st.sampled_from(("alpha", "beta", "gamma", "delta")), max_size=2),
)
def test_a_letter_joins_a_known_thread_only_when_whom_it_speaks_for_is_a_party(
    parties: frozenset[str], sender: str, speaks_for: frozenset[str]
) -> None:
    letter = LETTER.replace(sender=sender)
    filing = route(Verdict("accept", letter=letter), Facts(parties={letter.thread: parties}, speaks_for=speaks_for))
    allowed = not parties or bool((speaks_for or {sender}) & parties)
    if allowed:
        assert filing.action == "file"
    else:
        assert filing.action == "quarantine" and filing.verdict is not None
        assert (filing.verdict.reason, filing.verdict.letter) == ("not-a-party", letter)


def test_a_persons_untagged_answer_is_judged_in_the_thread_it_lands_in() -> None:
    person = LETTER.replace(type="human", sender="gamma", extra={"person": CAROL},
                            thread=wire.derived_thread(LETTER.message_id))  # fmt: skip
    facts = Facts(parent_thread="thr-bbbbbbbbbb", parties={"thr-bbbbbbbbbb": frozenset({"alpha", "beta"})},
                  speaks_for=frozenset({"gamma"}))  # fmt: skip
    filing = route(Verdict("accept", letter=person), facts)
    assert filing.action == "quarantine" and filing.verdict is not None
    assert filing.verdict.reason == "not-a-party" and filing.verdict.letter is not None
    assert filing.verdict.letter.thread == "thr-bbbbbbbbbb"


# --- the attack, end to end --------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "outcome"), [("close", None), ("verify-result", "confirmed"), ("ack", None)])
def test_an_outsider_cannot_change_a_threads_state(three: Registry, home: Path, kind: str, outcome: str) -> None:
    alpha, beta, report = opened(three, home)
    before = [(r.thread, r.state, r.whose_move, r.outcome) for r in beta.status()]
    deliver(home / "postoffice" / "beta", written_into(three, home, "gamma", "beta", report, kind, outcome=outcome))
    assert beta.inbox() == [report]
    (q,) = beta.quarantined(sync=False)
    assert (q.reason, q.sender, q.thread) == ("not-a-party", "gamma", report.thread)
    assert "alpha, beta" in (q.detail or "")
    assert [(r.thread, r.state, r.whose_move, r.outcome) for r in beta.status(sync=False)] == before
    assert [x.sender for x in beta.thread(report.thread, sync=False)] == ["alpha"]
    # the parties still write in it: the outsider's letter held nothing up
    alpha.follow_up(report.thread, "It started with 2.4.1.", type="question")
    assert [x.sender for x in beta.thread(report.thread)] == ["alpha", "alpha"]
    # the opener's side too: gamma's letter to alpha in alpha's thread
    deliver(home / "postoffice" / "alpha", written_into(three, home, "gamma", "alpha", report, kind, outcome=outcome))
    assert [q.reason for q in alpha.quarantined()] == ["not-a-party"]
    assert [r.state for r in alpha.status(sync=False)] == ["asked"]  # alpha's own follow-up, not gamma's

    # quarantine recheck and rebuild judge it again: it stays out
    (result,) = beta.recheck_quarantine()
    assert (result["outcome"], result["reason"]) == ("quarantined", "not-a-party")
    beta.close()
    beta.spool.db.close()
    for name in ("spool.db", "spool.db-wal", "spool.db-shm"):
        (beta.spool.root / name).unlink(missing_ok=True)
    beta = box(three, home, "beta")
    counts = beta.rebuild()
    assert counts["quarantine"] == 1
    assert [q.reason for q in beta.quarantined(sync=False)] == ["not-a-party"]
    assert [x.sender for x in beta.thread(report.thread, sync=False)] == ["alpha", "alpha"]


def test_every_platform_of_a_fan_out_is_a_party_of_its_thread(three: Registry, home: Path) -> None:
    alpha = box(three, home, "alpha")
    sent = alpha.send("beta,gamma", "Quota 500s", OPENER)
    for name in ("beta", "gamma"):
        other = box(three, home, name)
        (got,) = other.inbox()
        assert other.reply(got, f"{name} sees it too.", type="ack") is not None
    answers = sorted(x.sender for x in alpha.inbox() if x.thread == sent.thread)
    assert answers == ["beta", "gamma"] and alpha.quarantined(sync=False) == []


def test_a_person_writes_into_the_threads_of_the_platforms_that_list_them(three: Registry, home: Path) -> None:
    bus.set_person(three, "gamma", CAROL, follows=False, writes=True)
    reg = trusting(registry_mod.load(three.root))
    alpha, _beta, report = opened(reg, home)
    sent = next(x for x in alpha.sent() if x.thread == report.thread)
    outsider = client_letter(f"alpha+{report.thread}@bus.test", "Closing.", in_reply_to=sent.message_id)
    deliver(home / "postoffice" / "alpha", vouched(outsider))
    assert alpha.inbox() == [] and [q.reason for q in alpha.quarantined(sync=False)] == ["not-a-party"]
    # listed by beta as well: carol speaks for a party now (the registry, not the letter, says so)
    bus.set_person(registry_mod.load(three.root), "beta", CAROL, follows=False, writes=True)
    reg = trusting(registry_mod.load(three.root))
    alpha = box(reg, home, "alpha")
    (result,) = alpha.recheck_quarantine()
    assert result["outcome"] == "filed"
    assert [x.extra.get("person") for x in alpha.inbox()] == [CAROL]


# --- a Message-ID reused by another sender claims nothing of the real letter -------------------


def reusing(reg: Registry, home: Path, sender: str, to: str, message_id: str, thread: str = "") -> bytes:
    """``sender``'s own signed letter under another letter's Message-ID, opening a thread of its
    own (or in ``thread``: a party may write there)."""
    me = reg.get(sender)
    thread = thread or new_thread_id()
    outline = wire.draft_letter(me.address, "", f"{to}+{thread}@bus.test", "question", thread, "Quick one",
                                "Is the quota endpoint up?", message_id=message_id)  # fmt: skip
    return signing.sign(wire.render(outline), me.dkim_domain, me.selector, read_private_key(home, sender))


@pytest.mark.parametrize("forgery_first", [True, False])
def test_a_reused_message_id_does_not_use_up_the_real_letters_one_reply(
    three: Registry, home: Path, forgery_first: bool
) -> None:
    alpha, beta, report = opened(three, home)
    forged = reusing(three, home, "gamma", "beta", report.message_id)
    deliver(home / "postoffice" / "beta", forged)
    (copy,) = [x for x in beta.inbox() if x.sender == "gamma"]
    assert copy.message_id == report.message_id and copy.thread != report.thread
    first, second = (copy, report) if forgery_first else (report, copy)
    assert beta.reply(first, "Answered.") is not None, beta.why_refused(first)
    assert beta.why_refused(second) is None
    assert beta.reply(second, "Answered too.") is not None, beta.why_refused(second)
    # each still has its one reply
    assert beta.reply(first, "Again.") is None and "already" in (beta.why_refused(first) or "")
    assert beta.reply(second, "Again.") is None and "already" in (beta.why_refused(second) or "")
    answers = {x.in_reply_to: x.thread for x in alpha.inbox()}
    assert answers == {report.message_id: report.thread}
    # the claims made again from the letters (a lost cache) key each reply by whom it answered
    beta.close()
    beta.spool.drop_caches()
    beta = box(three, home, "beta")
    for letter in (first, second):
        assert "already" in (beta.why_refused(letter) or ""), letter.sender


def test_claims_made_again_key_a_follow_up_by_this_platforms_own_letter(three: Registry, home: Path) -> None:
    alpha = box(three, home, "alpha")
    sent = alpha.send("beta", "Quota 500s", OPENER, type="question")
    more = alpha.follow_up(sent.thread, "It started with 2.4.1.", type="question")
    alpha.close()
    alpha.spool.drop_caches()
    alpha = box(three, home, "alpha")
    assert alpha.spool.home_claims.replied_by(reply_key(sent.message_id, "alpha")) == f"alpha {more.id}"
    assert alpha.spool.home_claims.replied_by(reply_key(sent.message_id, "beta")) is None


def test_watch_runs_once_for_each_letter_even_when_two_senders_share_a_message_id(three: Registry, home: Path) -> None:
    _alpha, beta, report = opened(three, home)
    deliver(home / "postoffice" / "beta", reusing(three, home, "gamma", "beta", report.message_id))
    said: list[str] = []
    assert Watcher(beta, "true", log=said.append).run(once=True) == 2, said
    assert Watcher(beta, "true", log=said.append).run(once=True) == 0  # a restart runs neither again


def test_another_machines_answer_settles_the_letter_it_answered_and_no_namesake(three: Registry, home: Path) -> None:
    """beta on two machines, in alpha's fan-out to beta and gamma: gamma (a party) writes under
    the opener's Message-ID. The answer machine A sent to gamma's letter marks that one read on
    machine B and counts as answering it, never alpha's letter of the same Message-ID."""
    from ..client.test_one_picture import _machine

    other = _machine(home, "home-b", share_postoffice=True)
    with box(three, home, "beta") as a, AgentMail(three, Identity("beta"), other) as b:
        a.sync(), b.sync()  # both read before the letters come
        report = box(three, home, "alpha").send("beta,gamma", "Quota 500s", OPENER)
        forged = reusing(three, home, "gamma", "beta", report.message_id, report.thread)
        deliver(home / "postoffice" / "beta", forged)
        (copy,) = [x for x in a.inbox() if x.sender == "gamma"]
        assert copy.thread == report.thread
        assert a.reply(copy, "Answered on machine A.") is not None
        (real,) = b.inbox()  # gamma's is read: the platform answered it; alpha's is not
        assert real.sender == "alpha" and b.why_refused(real) is None
        (namesake,) = [x for x in b.thread(report.thread, sync=False) if x.sender == "gamma"]
        assert "already" in (b.why_refused(namesake) or "")
        assert b.reply(real, "Answered on machine B.") is not None


def test_over_smtp_imap_and_the_cli_an_outsiders_close_is_quarantined(home: Path, mail3: MailServers, cli: Cli) -> None:
    reg = smtp_imap_three(home, mail3)
    with box(reg, home, "alpha") as alpha, box(reg, home, "beta") as beta:
        alpha.send("beta", "Quota 500s", OPENER)
        (report,) = beta.inbox()
    mail3.store.deliver(f"beta+{report.thread}@bus.test", written_into(reg, home, "gamma", "beta", report, "close"))
    code, out, err = cli("--as", "beta", "--json", "sync")
    assert code == 0 and json.loads(out)["quarantined"] == 1, err
    code, out, _ = cli("--as", "beta", "--json", "quarantine", "--no-sync")
    assert code == 0 and [(q["reason"], q["from"]) for q in json.loads(out)] == [("not-a-party", "gamma")]
    code, out, _ = cli("--as", "beta", "--json", "status", "--no-sync")
    assert code == 0 and [(r["thread"], r["state"]) for r in json.loads(out)] == [(report.thread, "reported")]
