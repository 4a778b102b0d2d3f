"""``facts.thread_parties`` reads a thread's letters in one statement (``SpoolReader.thread_records``).

It used to ask ``thread_ids``, then ``locate`` and ``letter`` of each: 1 + 2n statements. The old
way is kept here and both are run over random threads (senders, recipients, states, quarantine,
notes of outgoing letters): the same parties, and the same ``gather`` Facts, every time."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.model import new_thread_id
from agentmail.spool import SpoolReader
from agentmail.spool.layout import _key
from agentmail.stages import facts

from ..depth import examples, suppressed

NAMES = ("alpha", "beta", "gamma", "delta")
STATES = ("unread", "read", "sent", "outbox", "held", "failed", "quarantine")


def old_thread_parties(spool: SpoolReader, registry: Registry, thread: str) -> frozenset[str]:
    """The way it was: the thread's ids, then each letter's state and record, one by one."""
    found: set[str] = set()
    for letter_id in spool.thread_ids(thread):
        state = spool.locate(letter_id)
        if state is not None and state != "quarantine":
            found |= facts.parties_of(spool.letter(letter_id, state), registry)
    return frozenset(found)


def outcome(run: Callable[[], frozenset[str]]) -> tuple[str, object]:
    try:
        return "ok", run()
    except TypeError as exc:
        return "raises", type(exc)


@pytest.fixture
def beta(home: Path) -> tuple[Registry, SpoolReader]:
    bus.init(home, home / "registry", list(NAMES), domain="bus.test", endpoints={"new_threads_per_hour": 0})
    reg = registry_mod.load(home / "registry")
    mail = AgentMail(reg, Identity("beta"), home)
    mail.send("alpha", "Quota 500s", "The quota endpoint answers 500.", type="question")
    return reg, mail.receiver.spool.read


platform = st.sampled_from((*NAMES, "", "stranger"))
odd = st.one_of(st.none(), st.integers(), st.lists(st.text(max_size=3), max_size=2))
address = st.one_of(
    st.sampled_from([f"{n}@bus.test" for n in NAMES]), st.text(max_size=12), st.just("person@example.org")
)
row = st.fixed_dictionaries(
    {
        "from": platform | odd,
        "to": platform | odd,
        "recipients": st.lists(address, max_size=3) | odd | st.text(max_size=4),
        "state": st.sampled_from(STATES),
        "notes": st.none() | st.fixed_dictionaries({"to": platform, "uid": st.integers(0, 9)}),
        "other_thread": st.booleans(),
    }
)


def _file_rows(spool: SpoolReader, thread: str, rows: list[dict[str, object]]) -> None:
    """The rows as filing leaves them (meta cached, depth known), straight into spool.db."""
    db: sqlite3.Connection = spool.sql()
    with db:
        for n, r in enumerate(rows):
            letter_id = f"t{new_thread_id()[-10:]}{n:03d}".replace("-", "")
            meta = {
                "message_id": f"<{letter_id}@bus.test>",
                "from": r["from"],
                "to": r["to"],
                "recipients": r["recipients"],
                "type": "question",
                "thread": thread,
                "subject": "s",
                "body": "b",
                "depth": n,
            }
            where = "elsewhere" if r["other_thread"] else thread
            db.execute(
                "INSERT INTO letters(id, state, meta, thread, type) VALUES (?,?,?,?,?)",
                (letter_id, r["state"], json.dumps(meta), None if r["state"] == "quarantine" else where, "question"),
            )
            if r["notes"] is not None:
                db.execute("INSERT INTO notes(id, data) VALUES (?,?)", (letter_id, json.dumps(r["notes"])))


@settings(
    max_examples=examples(200), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(rows=st.lists(row, max_size=12))
def test_thread_parties_match_the_letter_by_letter_reading(
    beta: tuple[Registry, SpoolReader], rows: list[dict[str, object]]
) -> None:
    reg, spool = beta
    thread = new_thread_id()
    _file_rows(spool, thread, rows)
    # a record no filing writes (a list for an address) fails both ways alike
    assert outcome(lambda: facts.thread_parties(spool, reg, thread)) == outcome(
        lambda: old_thread_parties(spool, reg, thread)
    )
    assert spool.thread_records(thread) == [spool.meta(i) for i in spool.thread_ids(thread)]


def test_thread_parties_read_the_thread_in_one_statement(beta: tuple[Registry, SpoolReader]) -> None:
    reg, spool = beta
    thread = new_thread_id()
    _file_rows(
        spool,
        thread,
        [{"from": "alpha", "to": "beta", "recipients": [], "state": "read", "notes": None, "other_thread": False}] * 30,
    )
    said: list[str] = []
    spool.sql().set_trace_callback(said.append)
    try:
        assert facts.thread_parties(spool, reg, thread) == {"alpha", "beta"}
    finally:
        spool.sql().set_trace_callback(None)
    assert len([s for s in said if s.lstrip().upper().startswith("SELECT")]) == 1


@settings(
    max_examples=examples(100), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(
    filed=st.lists(
        st.tuples(st.sampled_from(NAMES), st.sampled_from(("<a@x>", "<b@x>", "")), st.sampled_from(STATES)),
        max_size=6,
    ),
    notes=st.booleans(),
    asked=st.tuples(st.sampled_from((*NAMES, "stranger")), st.sampled_from(("<a@x>", "<b@x>", "", "<c@x>"))),
)
def test_known_record_is_known_then_meta(
    beta: tuple[Registry, SpoolReader], filed: list[tuple[str, str, str]], notes: bool, asked: tuple[str, str]
) -> None:
    """gather's parent: ``known_record`` gives what ``known`` then ``meta`` gave (the earliest
    filed letter of that (sender, Message-ID), its notes shown for an outgoing one), or None."""
    _reg, spool = beta
    tag = new_thread_id()[-8:]  # each example its own Message-IDs
    db: sqlite3.Connection = spool.sql()
    with db:
        for n, (sender, mid, state) in enumerate(filed):
            letter_id = f"k{tag}{n:03d}".replace("-", "")
            meta = {"message_id": mid + tag, "from": sender, "to": "beta", "thread": f"thr-{n}", "depth": n}
            db.execute(
                "INSERT INTO letters(id, state, meta, thread, type, msgkey) VALUES (?,?,?,?,?,?)",
                (letter_id, state, json.dumps(meta), f"thr-{n}", "question", _key(sender, mid + tag)),
            )
            if notes:
                db.execute(
                    "INSERT INTO notes(id, data) VALUES (?,?)", (letter_id, json.dumps({"thread": "noted", "n": n}))
                )
    sender, mid = asked
    found = spool.known(sender, mid + tag)
    assert spool.known_record(sender, mid + tag) == (None if found is None else spool.meta(found))
