"""A thread id is bound to its opener (docs/threat/bound-threads.md): a new thread's id is the
hash of its opener's From and Message-ID, so a letter into a thread new here that is not the
letter the id is bound to is no opener: it waits for it (``awaiting-parent``), and the party rule
judges it once the opener is filed. Legacy ids (random, shorter) stay first-come."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail import bounds
from agentmail.admin import bus
from agentmail.cli import render
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.letter import wire
from agentmail.model import BOUND_CHARS, HUMAN, THREAD_RE, bound_thread_id, bound_to, is_bound, new_thread_id
from agentmail.stages.facts import Facts, thread_parties
from agentmail.stages.route import route
from agentmail.transport.local import deliver
from agentmail.trust.authenticity import Verdict

from ..cli.test_mcp_abilities import tool
from ..conftest import OPENER, Cli
from ..depth import examples, suppressed
from ..mailservers import MailServers
from ..people.test_writing import CAROL, client_letter, trusting, vouched
from .test_addressed import mail3, signed_to, smtp_imap_three  # noqa: F401  (the fixture)
from .test_parties import box, three, written_into  # noqa: F401  (the fixture)
from .test_preemption import ANSWER, _lose_the_database, _message_id, _opener_and_answer

# --- the id ----------------------------------------------------------------------------------------


@settings(max_examples=examples(200), deadline=None)
@given(address=st.text(max_size=80), message_id=st.text(max_size=200))
def test_a_bound_id_is_a_thread_id_of_twenty_characters_made_of_the_opener_alone(address: str, message_id: str) -> None:
    thread = bound_thread_id(address, message_id)
    assert THREAD_RE.fullmatch(thread) and len(thread) == 4 + BOUND_CHARS and is_bound(thread)
    assert bound_thread_id(address.lower(), f" {message_id} ") == thread  # the address's case, the id's spaces
    assert bound_thread_id(address, message_id + "x") != thread
    assert bound_thread_id(address + "x", message_id) != thread


@settings(max_examples=examples(200), deadline=None)
@given(value=st.one_of(st.text(max_size=40), st.from_regex(r"thr-[0-9a-z]{6,26}", fullmatch=True)))
def test_only_a_twenty_character_thread_id_is_bound(value: str) -> None:
    assert is_bound(value) == (bool(THREAD_RE.fullmatch(value)) and len(value) == 24)


def test_the_clis_thread_column_fits_a_bound_id() -> None:
    assert len(bound_thread_id("alpha@bus.test", "<1.alpha@bus.test>")) == render.THREAD_COLUMN


def test_legacy_and_derived_ids_are_not_bound() -> None:
    assert bound_thread_id("Alpha@Bus.TEST", "<1.alpha@bus.test>") == bound_thread_id(
        "alpha@bus.test", "<1.alpha@bus.test>"
    )
    assert not is_bound(new_thread_id())
    assert not is_bound(wire.derived_thread("<1@people.test>"))  # a person's own thread


# --- the rule, pure --------------------------------------------------------------------------------

OPENER_ID = "<01m.alpha@bus.test>"
BOUND = bound_thread_id("alpha@bus.test", OPENER_ID)


@settings(max_examples=examples(200), deadline=None)
@given(
    kind=st.sampled_from(("report", "question", "close", "note", HUMAN)),
    sender=st.sampled_from(("alpha", "gamma")),
    own=st.booleans(),
    bound=st.booleans(),
    in_reply_to=st.sampled_from((None, "<00m.alpha@bus.test>")),
    opener_due=st.booleans(),
    parties=st.sampled_from((None, frozenset(), frozenset({"alpha", "beta"}), frozenset({"gamma", "beta"}))),
)
def test_a_letter_into_a_bound_thread_new_here_waits_unless_it_is_the_opener(
    kind: str,
    sender: str,
    own: bool,
    bound: bool,
    in_reply_to: str | None,
    opener_due: bool,
    parties: frozenset[str] | None,
) -> None:
    message_id = OPENER_ID if own else f"<02m.{sender}@bus.test>"
    address = "alpha@bus.test" if own else f"{sender}@bus.test"
    thread = BOUND if bound else "thr-aaaaaaaaaa"
    letter = ANSWER.replace(type=kind, sender="alpha" if own else sender, sender_address=address,
                            message_id=message_id, thread=thread, in_reply_to=in_reply_to)  # fmt: skip
    facts = Facts(me_address="beta@bus.test", opener_due=opener_due,
                  parties=None if parties is None else {thread: parties})  # fmt: skip
    filing = route(Verdict("accept", letter=letter, addressed=("beta@bus.test",)), facts)
    opener = bound and own
    assert bound_to(letter) == opener
    waits = opener_due and not parties and bound and not opener and kind != "note"
    assert (filing.verdict is not None and filing.verdict.reason == "awaiting-parent") == waits
    if waits:
        assert filing.verdict is not None and filing.verdict.detail == (
            f"it writes into {BOUND}, whose opener is not filed here yet: it waits for it "
            "(a thread is its opener's, never its first answer's)"
        )
    if opener and kind != "note":  # a bound thread's opener is never refused its own thread (a note to
        # another platform is misaddressed: a note goes between one platform's agents)
        assert filing.action == "file"


# --- minted by every path that opens a thread --------------------------------------------------------


def test_send_note_and_fan_out_mint_ids_bound_to_their_letter(three: Registry, home: Path) -> None:
    alpha, beta = box(three, home, "alpha"), box(three, home, "beta")
    sent = alpha.send("beta", "Quota 500s", OPENER)
    assert sent.thread == bound_thread_id("alpha@bus.test", sent.message_id)
    fan = alpha.send("beta,gamma", "Runflow 3.0", OPENER, type="fix-notice")
    assert fan.thread == bound_thread_id("alpha@bus.test", fan.message_id)  # one letter, one thread
    note = alpha.note("Handover", "The quota report waits for beta.")
    assert note.thread == bound_thread_id("alpha@bus.test", note.message_id)
    (got, _fan) = beta.inbox()
    assert bound_to(got) and got.thread == sent.thread
    replied = beta.reply(got, "Which plan?", type="question")
    assert replied is not None and replied.thread == sent.thread  # an answer stays in its thread
    assert [x.thread for x in alpha.inbox()] == [sent.thread]


def test_doctors_probe_goes_to_a_bound_thread(three: Registry, home: Path, cli: Cli) -> None:
    code, out, _ = cli("--as", "alpha", "doctor", "--round-trip")
    assert code == 0, out
    (thread,) = re.findall(r"ok   round trip: sent to alpha\+(thr-[0-9a-z]+)@bus\.test", out)
    assert is_bound(thread)


def test_the_cli_sends_a_new_thread_under_a_bound_id(three: Registry, home: Path, cli: Cli) -> None:
    code, out, err = cli("--as", "alpha", "--json", "send", "beta", "-s", "Quota 500s", "-b", OPENER)
    assert code == 0, err
    sent = json.loads(out)
    assert sent["thread"] == bound_thread_id("alpha@bus.test", sent["message_id"])


def test_mcp_send_and_note_open_threads_under_bound_ids(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    for out in (tool(alpha, tmp_path, "send", to="beta", subject="Quota", body=OPENER),
                tool(alpha, tmp_path, "note", subject="Handover", body="The quota report waits.")):  # fmt: skip
        assert out["thread"] == bound_thread_id(alpha.platform.address, alpha.show(out["id"]).message_id)
    (got,) = beta.inbox()
    assert bound_to(got)


# --- the local post office, the API ------------------------------------------------------------------


def _outsiders(reg: Registry, home: Path, thread: str, opener: bytes) -> tuple[bytes, bytes]:
    """gamma's fresh letter into ``thread`` (no In-Reply-To: no answer) and gamma's answer to ``opener``."""
    fresh = signed_to(reg, home, "gamma", f"beta+{thread}@bus.test", thread=thread)
    parent = ANSWER.replace(message_id=_message_id(opener), thread=thread, in_reply_to=None)
    return fresh, written_into(reg, home, "gamma", "beta", parent, "close")


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=suppressed(HealthCheck.function_scoped_fixture),  # a new thread per example
)
@given(order=st.permutations(range(5)), syncs=st.lists(st.booleans(), min_size=5, max_size=5), twice=st.booleans())
def test_whatever_lands_first_the_thread_is_its_openers_and_the_outsider_no_party(
    three: Registry, home: Path, order: list[int], syncs: list[bool], twice: bool
) -> None:
    """alpha's opener, alpha's fresh letter into its thread, alpha's answer to its opener, and an
    outsider's (gamma's) fresh letter and answer, delivered to beta in any order, synced anywhere."""
    opener, answer, thread = _opener_and_answer(three, home)
    own_fresh = signed_to(three, home, "alpha", f"beta+{thread}@bus.test", thread=thread)
    letters = [opener, own_fresh, answer, *_outsiders(three, home, thread, opener)]
    beta = box(three, home, "beta")
    for at, sync in zip(order, syncs, strict=True):
        deliver(home / "postoffice" / "beta", letters[at])
        if twice:
            deliver(home / "postoffice" / "beta", letters[at])
        if sync:
            beta.sync()
    beta.sync()
    filed = beta.thread(thread, sync=False)
    assert sorted(x.message_id for x in filed) == sorted(_message_id(raw) for raw in letters[:3])  # each once
    assert {x.sender for x in filed} == {"alpha"}
    assert thread_parties(beta.spool.read, three, thread) == {"alpha", "beta"}
    refused = [q for q in beta.quarantined(sync=False) if q.thread == thread]
    assert sorted((q.sender, q.reason) for q in refused) == [("gamma", "not-a-party")] * 2
    beta.close()


def test_a_late_outsider_is_judged_without_the_opener_and_the_opener_still_lands(
    three: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The residual of a wait: an opener that takes longer than ANSWER_WAIT_MS is pre-empted, as
    for an answer; yet its own thread never refuses the opener."""
    opener, _answer, thread = _opener_and_answer(three, home)
    fresh, _ = _outsiders(three, home, thread, opener)
    deliver(home / "postoffice" / "beta", fresh)
    beta = box(three, home, "beta")
    assert beta.inbox() == [] and [q.reason for q in beta.quarantined(sync=False)] == ["awaiting-parent"]
    monkeypatch.setattr(bounds, "ANSWER_WAIT_MS", 0)
    assert [x.sender for x in beta.inbox()] == ["gamma"]
    deliver(home / "postoffice" / "beta", opener)
    assert sorted(x.sender for x in beta.inbox()) == ["alpha", "gamma"]
    assert beta.quarantined(sync=False) == []


def test_a_legacy_thread_id_stays_first_come(three: Registry, home: Path) -> None:
    """A thread an older version opened (a random 10-character id) binds no opener: an outsider's
    letter that lands first takes it, as before (the residual named in the doc)."""
    thread = new_thread_id()
    opener = signed_to(three, home, "alpha", f"beta+{thread}@bus.test", thread=thread)
    deliver(home / "postoffice" / "beta", signed_to(three, home, "gamma", f"beta+{thread}@bus.test", thread=thread))
    beta = box(three, home, "beta")
    assert [x.sender for x in beta.inbox()] == ["gamma"]
    deliver(home / "postoffice" / "beta", opener)
    assert [x.sender for x in beta.inbox()] == ["gamma"]
    assert [(q.sender, q.reason) for q in beta.quarantined(sync=False)] == [("alpha", "not-a-party")]


def test_a_persons_letter_into_a_bound_thread_waits_for_its_opener(three: Registry, home: Path) -> None:
    """carol writes for beta; her letter (tagged, no In-Reply-To) into beta's thread with gamma lands
    before beta's opener: it waits, then is filed for beta. Her untagged letter opens a thread of
    its own (not bound: nobody else's letter can take it) and never waits."""
    bus.set_person(three, "beta", CAROL, follows=False, writes=True)
    reg = trusting(registry_mod.load(three.root))
    message_id = wire.new_message_id("beta", "bus.test")
    thread = bound_thread_id("beta@bus.test", message_id)
    opener = signed_to(reg, home, "beta", f"gamma+{thread}@bus.test", thread=thread, message_id=message_id)
    deliver(home / "postoffice" / "gamma", vouched(client_letter(f"gamma+{thread}@bus.test", "Any news?")))
    own = client_letter("gamma@bus.test", "A thread of my own.", message_id="<20261201.carol.2@people.test>")
    deliver(home / "postoffice" / "gamma", vouched(own))
    gamma = box(reg, home, "gamma")
    assert [x.body.strip() for x in gamma.inbox()] == ["A thread of my own."]
    assert [q.reason for q in gamma.quarantined(sync=False)] == ["awaiting-parent"]
    deliver(home / "postoffice" / "gamma", opener)
    assert sorted(x.body.strip() for x in gamma.thread(thread)) == ["Any news?", "Body."]
    assert gamma.quarantined(sync=False) == []


def test_another_machine_of_the_platform_judges_the_outsider_the_same(three: Registry, home: Path) -> None:
    """beta's second machine (its own spool, the same post office) sees the same: the thread is alpha's."""
    opener, _answer, thread = _opener_and_answer(three, home)
    fresh, _ = _outsiders(three, home, thread, opener)
    other = home.parent / "home-b"
    other.mkdir()
    shutil.copytree(home / "secrets", other / "secrets")
    (other / "postoffice").symlink_to(home / "postoffice", target_is_directory=True)
    deliver(home / "postoffice" / "beta", fresh)
    on_a, on_b = box(three, home, "beta"), AgentMail(three, Identity("beta"), other)
    assert on_a.inbox() == []
    deliver(home / "postoffice" / "beta", opener)
    for machine in (on_a, on_b):
        assert [x.sender for x in machine.inbox()] == ["alpha"]
        assert [(q.sender, q.reason) for q in machine.quarantined(sync=False)] == [("gamma", "not-a-party")]


# --- quarantine recheck, rebuild ------------------------------------------------------------------


def test_quarantine_recheck_keeps_the_outsider_waiting_until_the_opener_is_filed(
    three: Registry, home: Path, cli: Cli
) -> None:
    opener, _answer, thread = _opener_and_answer(three, home)
    fresh, _ = _outsiders(three, home, thread, opener)
    deliver(home / "postoffice" / "beta", fresh)
    code, out, err = cli("--as", "beta", "--json", "quarantine", "recheck")
    assert code == 0, err
    (result,) = json.loads(out)
    assert (result["outcome"], result["reason"]) == ("quarantined", "awaiting-parent")
    deliver(home / "postoffice" / "beta", opener)
    code, out, err = cli("--as", "beta", "--json", "quarantine", "recheck")
    assert code == 0, err
    assert [(r["outcome"], r["reason"]) for r in json.loads(out)] == [("quarantined", "not-a-party")]
    code, out, _ = cli("--as", "beta", "--json", "inbox", "--no-sync")
    assert code == 0 and [x["from"] for x in json.loads(out)] == ["alpha"]


def test_rebuild_keeps_the_outsider_waiting_then_the_opener_takes_its_thread(three: Registry, home: Path) -> None:
    opener, _answer, thread = _opener_and_answer(three, home)
    fresh, _ = _outsiders(three, home, thread, opener)
    deliver(home / "postoffice" / "beta", fresh)
    beta = box(three, home, "beta")
    assert beta.inbox() == []
    _lose_the_database(beta)
    beta = box(three, home, "beta")
    counts = beta.rebuild()
    assert (counts["unread"], counts["quarantine"]) == (0, 1)
    assert [q.reason for q in beta.quarantined(sync=False)] == ["awaiting-parent"]
    deliver(home / "postoffice" / "beta", opener)
    assert [x.sender for x in beta.inbox()] == ["alpha"]
    assert [(q.sender, q.reason) for q in beta.quarantined(sync=False)] == [("gamma", "not-a-party")]


def test_a_rebuilt_spool_equals_the_one_it_replaced(three: Registry, home: Path) -> None:
    """The outsider landed first, then the opener: the rebuilt spool files the opener and refuses
    the outsider, as the spool it replaced did (whatever order it reads the files in)."""
    opener, _answer, thread = _opener_and_answer(three, home)
    fresh, answer = _outsiders(three, home, thread, opener)
    beta = box(three, home, "beta")
    for raw in (fresh, answer, opener):
        deliver(home / "postoffice" / "beta", raw)
        beta.sync()

    def picture(client: AgentMail) -> tuple[list[tuple[str, str]], list[tuple[str, str, str | None]]]:
        filed = sorted((x.id, x.sender) for x in client.thread(thread, sync=False))
        return filed, sorted((q.id, q.sender, q.reason) for q in client.quarantined(sync=False))

    before = picture(beta)
    assert [s for _, s in before[0]] == ["alpha"] and {r for *_, r in before[1]} == {"not-a-party"}
    _lose_the_database(beta)
    beta = box(three, home, "beta")
    beta.rebuild()
    assert picture(beta) == before


# --- smtp+imap -----------------------------------------------------------------------------------


def test_over_smtp_imap_an_outsider_who_opens_the_thread_first_does_not_take_it(
    home: Path, mail3: MailServers, cli: Cli
) -> None:
    reg = smtp_imap_three(home, mail3)
    opener, _answer, thread = _opener_and_answer(reg, home)
    fresh, _ = _outsiders(reg, home, thread, opener)
    mail3.store.deliver(f"beta+{thread}@bus.test", fresh)
    code, out, err = cli("--as", "beta", "--json", "sync")
    assert code == 0 and (json.loads(out)["accepted"], json.loads(out)["quarantined"]) == (0, 1), err
    mail3.store.deliver(f"beta+{thread}@bus.test", opener)
    code, out, err = cli("--as", "beta", "--json", "sync")
    assert code == 0 and json.loads(out)["accepted"] == 1, err
    code, out, _ = cli("--as", "beta", "--json", "inbox", "--no-sync")
    assert code == 0 and [x["from"] for x in json.loads(out)] == ["alpha"]
    code, out, _ = cli("--as", "beta", "--json", "quarantine", "--no-sync")
    assert code == 0 and [q["reason"] for q in json.loads(out)] == ["not-a-party"]
