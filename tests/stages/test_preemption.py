"""A thread is its opener's: an answer whose letter is not filed here waits for it (``awaiting-parent``)
and is judged, in order, once that letter is filed (docs/threat/preemption.md). No letter lost
or shown twice, on the local post office, over SMTP/IMAP, through ``quarantine recheck`` and
``rebuild``; a flood of orphan answers costs each sync the same (``bounds.WAITING``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail import bounds
from agentmail.client.facade import AgentMail
from agentmail.client.receiver import Receiver
from agentmail.config.registry import Registry
from agentmail.errors import NotFound
from agentmail.letter import wire
from agentmail.model import HUMAN, Letter, bound_thread_id
from agentmail.stages.facts import Facts
from agentmail.stages.route import route
from agentmail.transport.local import deliver
from agentmail.trust.authenticity import Verdict

from ..conftest import Cli
from ..depth import examples
from ..mailservers import MailServers
from .test_addressed import mail3, signed_to, smtp_imap_three  # noqa: F401  (the fixture)
from .test_parties import box, three, written_into  # noqa: F401  (the fixture)

ANSWER = Letter(message_id="<02m.alpha@bus.test>", sender="alpha", sender_address="alpha@bus.test", to="beta",
                to_address="beta@bus.test", type="question", thread="thr-aaaaaaaaaa", subject="s", body="b",
                date="", in_reply_to="<01m.alpha@bus.test>")  # fmt: skip


def _message_id(raw: bytes) -> str:
    return raw.split(b"Message-ID: ", 1)[1].split(b"\r\n", 1)[0].decode()


def _opener_and_answer(reg: Registry, home: Path, to: str = "beta") -> tuple[bytes, bytes, str]:
    """alpha's opener to ``to`` in a new thread (its id bound to it) and alpha's own follow-up
    answering it (both authentic)."""
    message_id = wire.new_message_id("alpha", "bus.test")
    thread = bound_thread_id(reg.get("alpha").address, message_id)
    opener = signed_to(reg, home, "alpha", f"{to}+{thread}@bus.test", thread=thread, message_id=message_id)
    parent = ANSWER.replace(message_id=_message_id(opener), thread=thread, in_reply_to=None)
    return opener, written_into(reg, home, "alpha", to, parent, "question"), thread


# --- the rule, pure ----------------------------------------------------------------------------


@settings(max_examples=examples(100), deadline=None)
@given(
    kind=st.sampled_from(("question", "answer", "close", "note", HUMAN)),
    in_reply_to=st.sampled_from((None, "<01m.alpha@bus.test>")),
    references=st.sampled_from(((), ("<00m.alpha@bus.test>",))),
    person=st.booleans(),
    untagged=st.booleans(),
    may_wait=st.booleans(),
    parties=st.sampled_from((None, frozenset(), frozenset({"alpha", "beta"}))),
    parent_thread=st.sampled_from((None, "thr-aaaaaaaaaa")),
)
def test_only_an_answer_that_would_open_its_thread_waits(
    kind: str,
    in_reply_to: str | None,
    references: tuple[str, ...],
    person: bool,
    untagged: bool,
    may_wait: bool,
    parties: frozenset[str] | None,
    parent_thread: str | None,
) -> None:
    letter = ANSWER.replace(type=kind, in_reply_to=in_reply_to, references=references,
                            extra={"person": "carol@people.test"} if person else {})  # fmt: skip
    if untagged:
        letter = letter.replace(thread=wire.derived_thread(letter.message_id))
    facts = Facts(me_address="beta@bus.test", parent_thread=parent_thread, may_wait=may_wait,
                  parties=None if parties is None else {letter.thread: parties})  # fmt: skip
    filing = route(Verdict("accept", letter=letter, addressed=("beta@bus.test",)), facts)
    answers = bool(in_reply_to or (person and references))
    own_thread = kind == HUMAN and untagged
    waits = may_wait and answers and not parties and parent_thread is None and kind != "note" and not own_thread
    assert (filing.verdict is not None and filing.verdict.reason == "awaiting-parent") == waits
    if waits:
        assert filing.action == "quarantine" and filing.verdict is not None and filing.verdict.letter == letter


def test_the_waiting_verdict_names_the_letter_it_waits_for() -> None:
    filing = route(Verdict("accept", letter=ANSWER, addressed=("beta@bus.test",)),
                   Facts(me_address="beta@bus.test", may_wait=True))  # fmt: skip
    assert filing.verdict is not None
    assert filing.verdict.detail == (
        "it answers <01m.alpha@bus.test>, not filed here yet: it waits for it "
        "(a thread is its opener's, never its first answer's)"
    )
    assert (filing.action, filing.verdict.route, filing.verdict.reason) == (
        "quarantine",
        "quarantine",
        "awaiting-parent",
    )
    person = ANSWER.replace(type=HUMAN, in_reply_to=None, references=("<00m@x>", "<01m@x>", "<02m@x>"),
                            extra={"person": "carol@people.test"})  # fmt: skip
    filing = route(Verdict("accept", letter=person, addressed=("beta@bus.test",)),
                   Facts(me_address="beta@bus.test", may_wait=True))  # fmt: skip
    assert filing.verdict is not None and filing.verdict.detail is not None
    assert filing.verdict.detail.startswith("it answers <02m@x>, not filed here yet")  # the nearest: the last
    long = ANSWER.replace(in_reply_to=f"<{'x' * 500}@bus.test>")
    filing = route(Verdict("accept", letter=long, addressed=("beta@bus.test",)),
                   Facts(me_address="beta@bus.test", may_wait=True))  # fmt: skip
    assert filing.verdict is not None and filing.verdict.detail == f"it answers <{'x' * 388}"  # cut at 400 characters


def test_a_note_never_waits() -> None:
    """A note goes between one platform's agents (its own address), never opens a thread for another."""
    note = ANSWER.replace(type="note", sender="beta", sender_address="beta@bus.test", to_agent="tester")
    filing = route(Verdict("accept", letter=note, addressed=("beta@bus.test",)),
                   Facts("tester", me_address="beta@bus.test", may_wait=True))  # fmt: skip
    assert filing.action == "file"


# --- the local post office -----------------------------------------------------------------------


def test_an_answer_that_overtakes_its_opener_waits_unshown_and_follows_it_once(three: Registry, home: Path) -> None:
    opener, answer, thread = _opener_and_answer(three, home)
    beta = box(three, home, "beta")
    deliver(home / "postoffice" / "beta", answer)
    assert beta.inbox() == []
    with pytest.raises(NotFound):  # no thread here yet
        beta.thread(thread, sync=False)
    (waiting,) = beta.quarantined(sync=False)
    assert waiting.reason == "awaiting-parent" and waiting.in_reply_to == _message_id(opener)
    assert beta.sync().to_json()["accepted"] == 0  # a sync with nothing new leaves it waiting
    deliver(home / "postoffice" / "beta", opener)
    deliver(home / "postoffice" / "beta", answer)  # delivered twice: still one letter
    beta.sync()
    assert [(x.type, x.in_reply_to) for x in beta.inbox(sync=False)] == [
        ("question", _message_id(opener)),  # filed where it waited: the same id, kept in filing order
        ("report", None),
    ] or [(x.type, x.in_reply_to) for x in beta.inbox(sync=False)] == [
        ("report", None),
        ("question", _message_id(opener)),
    ]
    assert beta.quarantined(sync=False) == []
    assert sorted(x.type for x in beta.thread(thread, sync=False)) == ["question", "report"]
    assert waiting.id in {x.id for x in beta.inbox(sync=False)}
    beta.sync()  # and again: nothing twice
    assert len(beta.inbox(sync=False)) == 2 and beta.quarantined(sync=False) == []


def test_quarantine_recheck_keeps_a_waiting_answer_waiting_until_its_letter_is_filed(
    three: Registry, home: Path, cli: Cli
) -> None:
    opener, answer, _thread = _opener_and_answer(three, home)
    deliver(home / "postoffice" / "beta", answer)
    code, out, err = cli("--as", "beta", "--json", "quarantine", "recheck")
    assert code == 0, err
    (result,) = json.loads(out)
    assert (result["outcome"], result["reason"]) == ("quarantined", "awaiting-parent")
    deliver(home / "postoffice" / "beta", opener)
    code, out, err = cli("--as", "beta", "--json", "quarantine", "recheck")  # syncs first: the sync files both
    assert code == 0 and json.loads(out) == [], err
    code, out, _ = cli("--as", "beta", "--json", "inbox", "--no-sync")
    assert code == 0 and sorted(x["type"] for x in json.loads(out)) == ["question", "report"]


def test_an_answer_that_waited_its_time_is_judged_without_its_letter(
    three: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _opener, answer, thread = _opener_and_answer(three, home)
    beta = box(three, home, "beta")
    deliver(home / "postoffice" / "beta", answer)
    assert beta.inbox() == []
    monkeypatch.setattr(bounds, "ANSWER_WAIT_MS", 0)  # it has waited its time: the next sync files it
    (filed,) = beta.inbox()
    assert (filed.type, filed.thread) == ("question", thread) and beta.quarantined(sync=False) == []


def test_a_flood_of_orphan_answers_is_looked_at_a_window_at_a_time(
    three: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the oldest ``bounds.WAITING`` waiting answers are looked at by a sync: the rest wait
    their turn, none is lost, and each goes on once the ones before it leave the window."""
    monkeypatch.setattr(bounds, "WAITING", 2)
    pairs = [_opener_and_answer(three, home) for _ in range(3)]
    beta = box(three, home, "beta")
    for _opener, answer, _thread in pairs:
        deliver(home / "postoffice" / "beta", answer)
    assert beta.inbox() == [] and len(beta.spool.read.waiting(10)) == 3
    deliver(home / "postoffice" / "beta", pairs[2][0])  # the third answer's letter: not in the window yet
    assert [x.thread for x in beta.inbox()] == [pairs[2][2]]
    assert len(beta.spool.read.waiting(10)) == 3
    for opener, _answer, _thread in pairs[:2]:
        deliver(home / "postoffice" / "beta", opener)
    beta.sync()
    assert beta.spool.read.waiting(10) == []
    assert sorted(x.thread for x in beta.inbox(sync=False)) == sorted(t for *_, t in pairs for _ in range(2))


def test_a_waiting_answer_from_an_outsider_is_not_a_party_once_the_opener_lands(three: Registry, home: Path) -> None:
    """gamma answers alpha's opener to beta before it lands (it learnt the ids): it waits, and once
    the opener is filed it is judged in order, an outsider's letter into alpha and beta's thread."""
    opener, _answer, thread = _opener_and_answer(three, home)
    parent = ANSWER.replace(message_id=_message_id(opener), thread=thread, in_reply_to=None)
    deliver(home / "postoffice" / "beta", written_into(three, home, "gamma", "beta", parent, "close"))
    beta = box(three, home, "beta")
    assert beta.inbox() == [] and [q.reason for q in beta.quarantined(sync=False)] == ["awaiting-parent"]
    deliver(home / "postoffice" / "beta", opener)
    assert [x.sender for x in beta.inbox()] == ["alpha"]
    (refused,) = beta.quarantined(sync=False)
    assert refused.reason == "not-a-party" and refused.detail is not None and "gamma" in refused.detail
    assert beta.spool.read.waiting(10) == []


# --- rebuild -------------------------------------------------------------------------------------


def _lose_the_database(client: AgentMail) -> None:
    client.close()
    client.spool.db.close()
    for name in ("spool.db", "spool.db-wal", "spool.db-shm"):
        (client.spool.root / name).unlink(missing_ok=True)


def test_rebuild_files_an_answer_whose_letter_was_filed_after_it_before_a_crash(
    three: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spool.db is lost after the opener was filed and before the waiting answer was judged
    again (a crash between the two): rebuild restores both, then judges the answer, in order."""
    opener, answer, thread = _opener_and_answer(three, home)
    beta = box(three, home, "beta")
    deliver(home / "postoffice" / "beta", answer)
    assert beta.inbox() == []
    monkeypatch.setattr(Receiver, "_settle", lambda self: [])  # the crash: nothing judged again
    deliver(home / "postoffice" / "beta", opener)
    assert [x.type for x in beta.inbox()] == ["report"]
    monkeypatch.undo()
    _lose_the_database(beta)
    beta = box(three, home, "beta")
    counts = beta.rebuild()
    assert (counts["unread"], counts["quarantine"]) == (2, 0)
    assert sorted(x.type for x in beta.thread(thread, sync=False)) == ["question", "report"]
    assert beta.quarantined(sync=False) == []
    beta.sync()  # the post office read again from the start: each is a duplicate
    assert len(beta.inbox(sync=False)) == 2


def test_rebuild_keeps_an_answer_waiting_whose_letter_has_not_come(three: Registry, home: Path) -> None:
    opener, answer, _thread = _opener_and_answer(three, home)
    beta = box(three, home, "beta")
    deliver(home / "postoffice" / "beta", answer)
    assert beta.inbox() == []
    _lose_the_database(beta)
    beta = box(three, home, "beta")
    counts = beta.rebuild()
    assert (counts["unread"], counts["quarantine"]) == (0, 1)
    assert [q.reason for q in beta.quarantined(sync=False)] == ["awaiting-parent"]
    deliver(home / "postoffice" / "beta", opener)
    assert sorted(x.type for x in beta.inbox()) == ["question", "report"]
    assert beta.quarantined(sync=False) == []


# --- smtp+imap -----------------------------------------------------------------------------------


def test_over_smtp_imap_an_answer_waits_for_its_opener(home: Path, mail3: MailServers, cli: Cli) -> None:
    reg = smtp_imap_three(home, mail3)
    opener, answer, thread = _opener_and_answer(reg, home)
    mail3.store.deliver(f"beta+{thread}@bus.test", answer)
    code, out, err = cli("--as", "beta", "--json", "sync")
    assert code == 0 and (json.loads(out)["accepted"], json.loads(out)["quarantined"]) == (0, 1), err
    code, out, _ = cli("--as", "beta", "--json", "quarantine", "--no-sync")
    assert code == 0 and [q["reason"] for q in json.loads(out)] == ["awaiting-parent"]
    mail3.store.deliver(f"beta+{thread}@bus.test", opener)
    code, out, err = cli("--as", "beta", "--json", "sync")
    assert code == 0 and json.loads(out)["accepted"] == 1, err
    code, out, _ = cli("--as", "beta", "--json", "inbox", "--no-sync")
    assert code == 0 and sorted(x["type"] for x in json.loads(out)) == ["question", "report"]
    code, out, _ = cli("--as", "beta", "--json", "quarantine", "--no-sync")
    assert code == 0 and json.loads(out) == []
    code, out, _ = cli("--as", "beta", "--json", "sync")  # again: nothing twice
    assert code == 0 and json.loads(out)["accepted"] == 0
