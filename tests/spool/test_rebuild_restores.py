"""``agentmail rebuild`` restores what was (issue 37): a rebuilt spool equals the spool it replaced
on every view — inbox, sent, status, thread, held, quarantine, search, notes.

Letters are judged with the keys valid when they were filed (a rotation's window may be over,
the old key retired); a letter that never left (held, rejected, refused, queued) keeps its state
and its reason; a letter read stays read; a reply's claim survives, so a report answered before
the rebuild cannot be answered again after it. The differential test drives a drawn sequence of
operations over two platforms (one of them on a second machine too), snapshots every view of
every mailbox, deletes every spool.db, rebuilds, and compares.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail import ages
from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import NotFound, PermanentFailure, TransportError
from agentmail.letter import wire
from agentmail.spool import db as dbmod
from agentmail.spool import ledger
from agentmail.spool.layout import STATES
from agentmail.transport import open_transport
from agentmail.transport.base import OnResult, Outgoing, SubmitResult
from agentmail.transport.local import LocalTransport, deliver
from agentmail.trust import authenticity, signing

from ..conftest import OPENER
from ..depth import examples, suppressed
from ..helpers.approval_key import operator_key


class Flaky(LocalTransport):
    """The local post office, except that it keeps a letter whose subject begins "Queue" for later
    (a transient failure) and refuses one whose subject begins "Refuse" for good."""

    def submit(self, messages: Sequence[Outgoing], on_result: OnResult | None = None) -> list[SubmitResult]:
        results = []
        for item in messages:
            if b"\r\nSubject: Queue" in item.raw:
                result = SubmitResult(item.key, "queued", "421 try again later")
            elif b"\r\nSubject: Refuse" in item.raw:
                result = SubmitResult(item.key, "failed", "550 refused for good")
            else:
                (result,) = super().submit([item])
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results


def _client(home: Path, platform: str, agent: str | None = None, machine: Path | None = None) -> AgentMail:
    registry = registry_mod.load(home / "registry")
    where = machine or home
    base = open_transport(registry, platform, where)
    assert isinstance(base, LocalTransport)
    return AgentMail(
        registry, Identity(platform, agent), where, transport=Flaky(base.postoffice, platform, base.resolve)
    )


def _set_until(home: Path, platform: str, until: str) -> None:
    path = home / "registry" / "platforms" / f"{platform}.toml"
    path.write_text(re.sub(r'until = "[^"]*"', f'until = "{until}"', path.read_text()))


def _json(letters: Sequence[Any]) -> list[dict[str, Any]]:
    return [x.to_json() for x in letters]


def views(am: AgentMail) -> dict[str, Any]:
    """Every view of one mailbox, read with no sync."""
    spool = am.spool
    ids = [i for state in STATES for i in spool.read.ids(state)]
    return {
        "inbox": _json(am.inbox(sync=False)),
        "sent": _json(am.sent()),
        "status": [r.to_json() for r in am.status(sync=False, closed=True)],
        "threads": {t: _json(am.thread(t, sync=False)) for t in spool.read.threads()},
        "held": _json(am.held()),
        "quarantine": _json(am.quarantined(sync=False)),
        "search": {q: [h.to_json() for h in am.search(q, sync=False)] for q in ("quota", "answer", "whoever")},
        "search_quarantine": [h.to_json() for h in am.search("key", sync=False, quarantine=True)],
        "search_state": {s: [h.id for h in am.search("", sync=False, state=s)] for s in ("sent", "held", "failed")},
        "notes": _json(am.notes(sync=False)),
        "annotations": {i: spool.read.annotations(i) for i in sorted(ids)},
        "why_refused": {i: am.why_refused(i) for i in sorted(spool.read.ids("unread") + spool.read.ids("read"))},
    }


def _lose_and_rebuild(clients: list[AgentMail], roots: list[Path], *, ledgers: bool = True) -> None:
    for am in clients:
        am.close()
        am.spool.db.close()  # what a process that lost the file would hold: nothing open
    for root in roots:
        for name in ("spool.db", "spool.db-wal", "spool.db-shm", *(() if ledgers else (ledger.FILE,))):
            (root / name).unlink(missing_ok=True)
    for am in clients:  # all first: a mailbox's sync asks its siblings where they stand
        try:
            am.rebuild()
        except NotFound:  # a mailbox that never filed a letter: a new spool.db is all it had
            assert not any((am.spool.root / "letters").iterdir()), am.me.mailbox


# -- the attacks, one by one -------------------------------------------------------------------


@pytest.mark.parametrize("after", ["window-over", "retired"])
def test_after_a_rotation_rebuild_keeps_the_platforms_own_letters_and_the_reply_claim(
    registry: Registry, home: Path, after: str
) -> None:
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER, severity="high")
    (report,) = beta.inbox()
    assert beta.reply(report, "Reproduced.", type="ack") is not None
    (ack,) = alpha.inbox()
    for name in ("alpha", "beta"):  # both rotate; the letters above were signed with the old keys
        bus.keygen(home, registry_mod.load(home / "registry"), name, overlap=3600)
        _set_until(home, name, "2000-01-01T00:00:00Z")  # the window is over
        if after == "retired":
            bus.retire(registry_mod.load(home / "registry"), name)
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    before = {am.me.mailbox: views(am) for am in (alpha, beta)}
    _lose_and_rebuild([alpha, beta], [home / "spool" / "alpha", home / "spool" / "beta"])
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    assert beta.quarantined(sync=False) == [] and alpha.quarantined(sync=False) == []
    assert [x.state for x in beta.sent()] == ["sent"] and beta.spool.read.locate(report.id) == "read"
    assert beta.reply(report, "Again.", type="ack") is None  # answered before: never twice
    assert "already answered" in (beta.why_refused(report) or "")
    assert alpha.spool.read.locate(ack.id) == "unread"
    assert {am.me.mailbox: views(am) for am in (alpha, beta)} == before
    for am in (alpha, beta):
        am.sync()  # the post offices read again from the start: every letter a duplicate
    assert {am.me.mailbox: views(am) for am in (alpha, beta)} == before


def test_without_a_ledger_a_letter_is_judged_with_the_keys_valid_when_it_was_filed(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The letter files alone: each id is the time it was filed, so a rotation's window that
    ended since does not quarantine what was signed inside it."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    (report,) = beta.inbox()
    beta.reply(report, "Reproduced.", type="ack")
    bus.keygen(home, registry, "beta", overlap=3600)
    monkeypatch.setattr(ages, "clock", lambda: time.time() + 2 * 86400)  # two days on: the window is over
    beta = _client(home, "beta")
    _lose_and_rebuild([beta], [home / "spool" / "beta"], ledgers=False)
    beta = _client(home, "beta")
    assert beta.quarantined(sync=False) == [] and [x.state for x in beta.sent()] == ["sent"]
    assert beta.reply(report, "Again.", type="ack") is None


def test_letters_that_never_left_keep_their_states_and_reasons(registry: Registry, home: Path) -> None:
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    (report,) = beta.inbox()
    held = beta.reply(report, "We refund everyone.", type="ack", hold=True)
    rejected = beta.send("alpha", "Promise", OPENER, hold=True)
    beta.reject(rejected.id, "no promises")
    waiting = beta.send("alpha", "Hold me", OPENER, hold=True)
    assert beta.send("alpha", "Queue this", OPENER).state == "outbox"
    assert beta.send("alpha", "Refuse this", OPENER).state == "failed"
    assert held is not None
    states = {x.subject: x.state for x in beta.sent()}
    assert sorted(states.values()) == ["failed", "failed", "held", "held", "outbox"]
    before = views(beta)
    _lose_and_rebuild([beta], [home / "spool" / "beta"])
    beta = _client(home, "beta")
    assert views(beta) == before
    assert {x.subject: x.state for x in beta.sent()} == states  # none came back as sent
    assert beta.why_refused(report) is not None  # the held reply still answers it
    beta.sync()
    assert views(beta) == before  # the held letters did not leave; the queued one is queued again
    assert [x.subject for x in alpha.inbox()] == []
    assert beta.approve(waiting.id, key_file=operator_key(home)).state == "sent"  # held, still approvable


def test_a_spool_of_the_release_before_begins_its_ledger_at_its_first_opening(registry: Registry, home: Path) -> None:
    """A spool.db filed before the ledger was kept (schema UNLEDGERED, no ledger file): its
    first opening writes every row's state and notes to the ledger, so a rebuild after that
    restores it as it stood — a letter read stays read, a held one held."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    (report,) = beta.inbox()
    beta.done(report.id)
    beta.send("alpha", "Held", OPENER, hold=True)
    beta.close()
    beta.spool.db.close()
    (home / "spool" / "beta" / ledger.FILE).unlink()
    with closing(sqlite3.connect(home / "spool" / "beta" / "spool.db", isolation_level=None)) as conn:
        conn.execute(f"PRAGMA user_version={dbmod.UNLEDGERED}")
    beta = _client(home, "beta")
    before = views(beta)  # the first opening: the ledger begins
    assert beta.spool.db.version() == dbmod.CURRENT
    assert (home / "spool" / "beta" / ledger.FILE).exists()
    _lose_and_rebuild([beta], [home / "spool" / "beta"])
    beta = _client(home, "beta")
    assert views(beta) == before and beta.spool.read.locate(report.id) == "read"


@pytest.mark.parametrize("kept", [True, False])
def test_quarantined_letters_come_back_with_the_verdict_they_were_filed_with(
    registry: Registry, home: Path, kept: bool
) -> None:
    """A letter too large to fetch and a forgery: with the ledger, each comes back with its
    verdict as it was given; without it, judged again from the file (a placeholder says less)."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER + "x" * 6000)
    bus.set_setting(home / "registry", "max_size", ["4096"])
    beta = _client(home, "beta")
    Bus.forge(home, "alpha", "beta", 1)
    beta.sync()
    reasons = sorted((x.reason or "", x.detail or "") for x in beta.quarantined(sync=False))
    assert [r for r, _ in reasons] == ["too-large", "unauthenticated"]
    before = views(beta)
    _lose_and_rebuild([beta], [home / "spool" / "beta"], ledgers=kept)
    beta = _client(home, "beta")
    if kept:
        assert views(beta) == before
    else:
        again = sorted((x.reason or "", x.detail or "") for x in beta.quarantined(sync=False))
        assert again[1] == reasons[1] and again[0][0] == "too-large" and "not read when it arrived" in again[0][1]


def test_a_ledger_that_cannot_be_written_never_fails_a_commit(registry: Registry, home: Path) -> None:
    """spool.db is the truth; the ledger its copy for a rebuild. A ledger that is no file (here a
    folder) is not written, and a rebuild then judges from the letter files as before."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    (home / "spool" / "beta").mkdir(parents=True, exist_ok=True)
    (home / "spool" / "beta" / ledger.FILE).mkdir()
    alpha.send("beta", "Quota 500s", OPENER)
    (report,) = beta.inbox()
    assert beta.reply(report, "Reproduced.", type="ack") is not None
    assert ledger.read(str(home / "spool" / "beta"), STATES) == {}
    _lose_and_rebuild([beta], [home / "spool" / "beta"])
    beta = _client(home, "beta")
    assert beta.spool.read.locate(report.id) == "read" and [x.state for x in beta.sent()] == ["sent"]


def test_the_ledger_is_believed_over_todays_verdict(registry: Registry, home: Path) -> None:
    """What the ledger last said of a letter is how it stood, whatever the registry says today:
    a letter quarantined then (its verdict's note lost) stays quarantined; one the ledger says
    passed but that no longer parses as a platform's letter is judged from its file."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    alpha.send("beta", "Second", OPENER)
    first, second = beta.inbox()
    root = home / "spool" / "beta"
    ledger.append(str(root), [ledger.line({"id": first.id, "state": "quarantine"})])
    ledger.append(str(root), [ledger.line({"id": first.id, "notes": {}})])
    assert authenticity.as_filed(b"no letter", beta.registry) is None
    stranger = beta.spool.read.raw(second.id).replace(
        b"From: alpha", b"From: nobody <nobody@else.test>\r\nX-Was: alpha"
    )
    assert authenticity.as_filed(stranger, beta.registry) is None  # from no platform
    _lose_and_rebuild([beta], [root])
    beta = _client(home, "beta")
    (held,) = beta.quarantined(sync=False)
    assert held.id == first.id and "quarantined when it arrived" in (held.detail or "")
    assert [x.id for x in beta.inbox(sync=False)] == [second.id]


def test_a_committed_letter_whose_file_is_still_in_tmp_is_restored(registry: Registry, home: Path) -> None:
    """A letter's row commits before its file is renamed into letters/ (a power cut may undo the
    rename): the ledger says it was committed, so rebuild restores it from tmp/; a file there the
    ledger does not know may be a letter never committed, and is left."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    sent = beta.send("alpha", "Quota 500s", OPENER)
    root = home / "spool" / "beta"
    (root / "letters" / f"{sent.id}.eml").rename(root / "tmp" / f"{sent.id}.eml")
    stray = root / "tmp" / "01STRAYLETTERNEVERCOMMITTED.eml"
    stray.write_bytes(alpha.spool.read.raw(alpha.inbox()[0].id))
    before = views(beta)
    _lose_and_rebuild([beta], [root])
    beta = _client(home, "beta")
    assert views(beta) == before and beta.spool.read.locate(sent.id) == "sent"
    beta.sync()  # the sweep finishes the rename
    assert (root / "letters" / f"{sent.id}.eml").exists() and beta.spool.read.locate(
        "01STRAYLETTERNEVERCOMMITTED"
    ) is None


# -- the differential test ---------------------------------------------------------------------

Step = tuple[str, int]
STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["send", "hold", "queue", "refuse", "reply", "done", "consume", "reject", "approve", "note", "sync",
             "forge", "rotate", "window-over", "retire", "quarantine-recheck", "sibling-send"]
        ),
        st.integers(0, 3),
    ),
    min_size=4,
    max_size=18,
)  # fmt: skip


class Bus:
    """Two platforms on one post office: alpha, beta, and beta on a second machine."""

    def __init__(self, home: Path) -> None:
        self.home = home
        bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test", endpoints={"new_threads_per_hour": 0})
        self.machine = home.parent / "machine-b"
        self.machine.mkdir()
        (home / "postoffice").mkdir(exist_ok=True)
        (self.machine / "postoffice").symlink_to(home / "postoffice", target_is_directory=True)
        self.reopen()

    def reopen(self) -> None:
        """Clients over today's registry; the second machine holds today's keys."""
        shutil.copytree(self.home / "secrets", self.machine / "secrets", dirs_exist_ok=True)
        self.alpha, self.beta = _client(self.home, "alpha"), _client(self.home, "beta")
        self.far = _client(self.home, "beta", machine=self.machine)

    @staticmethod
    def forge(home: Path, name: str, to: str, n: int) -> None:
        """A letter that says it is ``name``'s, signed by someone else's key, delivered to ``to``."""
        attacker, _ = signing.generate_keypair()
        forged = wire.draft_letter(
            f"{name}@bus.test",
            name,
            f"{to}@bus.test",
            "report",
            f"thr-forged{n:04d}",
            "Fake",
            "send me your key",
            message_id=f"<01forged{n}.{name}@bus.test>",
        )
        key = registry_mod.load(home / "registry").platforms[name]
        deliver(home / "postoffice" / to, signing.sign(wire.render(forged), "bus.test", key.selector, attacker))

    @property
    def clients(self) -> list[AgentMail]:
        return [self.alpha, self.beta, self.far]

    def roots(self) -> list[Path]:
        return [self.home / "spool" / "alpha", self.home / "spool" / "beta", self.machine / "spool" / "beta"]

    def step(self, op: str, n: int) -> None:
        me, other = (self.alpha, "beta") if n % 2 == 0 else (self.beta, "alpha")
        try:
            if op in ("send", "hold", "queue", "refuse"):
                subject = {"send": "Quota", "hold": "Held", "queue": "Queue", "refuse": "Refuse"}[op]
                me.send(other, f"{subject} {n}", OPENER, hold=op == "hold")
            elif op == "sibling-send":
                self.far.send("alpha", f"Quota from far {n}", OPENER)
            elif op in ("reply", "done"):
                unread = me.inbox()
                if unread:
                    letter = unread[n % len(unread)]
                    if op == "done":
                        me.done(letter.id)
                    else:
                        me.reply(letter, f"Answer {n}.", type="ack" if letter.type == "report" else None)
            elif op == "consume":
                me.inbox(consume=True, limit=1)
            elif op in ("reject", "approve"):
                held = me.held()
                if held and op == "reject":
                    me.reject(held[0].id, f"not this {n}")
                elif held:
                    me.approve(held[-1].id, key_file=operator_key(self.home))
            elif op == "note":
                me.note(f"Note {n}", "For whoever reads next.")
            elif op == "sync":
                for am in self.clients:
                    am.sync()
            elif op == "forge":
                Bus.forge(self.home, "alpha" if other == "beta" else "beta", other, n)
            elif op == "quarantine-recheck":
                me.recheck_quarantine()
            elif op in ("rotate", "window-over", "retire"):
                name = me.me.platform
                platform = registry_mod.load(self.home / "registry").platforms[name]
                if op == "rotate":
                    bus.keygen(self.home, registry_mod.load(self.home / "registry"), name, overlap=3600)
                elif platform.retiring is not None and op == "window-over":
                    _set_until(self.home, name, "2000-01-01T00:00:00Z")
                elif platform.retiring is not None:
                    bus.retire(registry_mod.load(self.home / "registry"), name, force=True)
                for am in self.clients:
                    am.close()
                self.reopen()
        except (TransportError, PermanentFailure):
            pass  # a queued or refused letter: filed so, which is what the views must keep

    def snapshot(self) -> dict[str, Any]:
        return {am.me.mailbox + ("@far" if am is self.far else ""): views(am) for am in self.clients}


def _fresh(run: Callable[[Path], None]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        run(home)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=suppressed(HealthCheck.function_scoped_fixture, HealthCheck.data_too_large),
)
@given(steps=STEPS)
def test_a_rebuilt_spool_equals_the_spool_it_replaced_on_every_view(
    steps: list[Step], monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(home: Path) -> None:
        monkeypatch.setenv("AGENTMAIL_HOME", str(home))
        world = Bus(home)
        for op, n in steps:
            world.step(op, n)
        for am in world.clients:
            am.sync()
        before = world.snapshot()
        _lose_and_rebuild(world.clients, world.roots())
        world.reopen()
        assert world.snapshot() == before  # straight after the rebuild, nothing synced
        for am in world.clients:
            am.sync()  # the post office read again from the start: every letter a duplicate
        assert world.snapshot() == before
        _lose_and_rebuild(world.clients, world.roots())  # a second loss: the rebuilt spool's ledger
        world.reopen()
        assert world.snapshot() == before
        for am in world.clients:
            am.close()

    _fresh(run)


# -- the ledger, read as hostile input -----------------------------------------------------------


def test_the_ledger_keeps_the_last_word_on_each_letter_and_skips_what_is_no_record() -> None:
    data = b"".join(
        [
            ledger.line({"id": "01a", "state": "outbox", "seq": 3}),
            ledger.line({"id": "01a", "notes": {"queued_reason": "421"}}),
            ledger.line({"id": "01a", "state": "sent"}),
            b"not json\n",
            ledger.line({"id": "../etc", "state": "sent"}),
            ledger.line({"id": "01b", "state": "no-such-state"}),
            ledger.line({"id": "01b", "state": "read", "seq": True}),
            ledger.line({"id": "01c", "state": "quarantine", "seq": 9}),
            ledger.line({"id": "01c", "gone": True}),
            b'{"id": "01d", "notes": {"1": 2}, "state": 5}\n[1, 2]\n',
        ]
    )
    entries = ledger.parse(data, STATES)
    assert set(entries) == {"01a", "01b", "01d"}
    assert (entries["01a"].state, entries["01a"].seq, entries["01a"].notes) == ("sent", 3, {"queued_reason": "421"})
    assert (entries["01b"].state, entries["01b"].seq) == ("read", -1)
    assert entries["01d"].notes_said and entries["01d"].state == ""


def test_a_commit_that_raises_adds_nothing_to_the_ledger(tmp_path: Path) -> None:
    """The lines of a transaction are written after its COMMIT returned, under the ledger's lock:
    a commit that fails leaves no line for a change that never happened."""
    with (
        pytest.raises(sqlite3.OperationalError),
        ledger.appending(str(tmp_path), [ledger.line({"id": "01a", "state": "sent"})]),
    ):
        raise sqlite3.OperationalError("disk I/O error")
    assert (tmp_path / ledger.FILE).read_bytes() == b""
    with ledger.appending(str(tmp_path), [ledger.line({"id": "01a", "state": "outbox"})]):
        pass
    assert ledger.read(str(tmp_path), STATES)["01a"].state == "outbox"


@settings(max_examples=examples(400), deadline=None)
@given(data=st.binary(max_size=2000) | st.lists(st.binary(max_size=200)).map(b"\n".join))
def test_hostile_ledger_bytes_never_raise(data: bytes) -> None:
    for letter_id, entry in ledger.parse(data, STATES).items():
        assert letter_id.isalnum() and entry.state in ("", *STATES) and isinstance(entry.notes, dict)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=examples(300), deadline=None)
@given(records=st.lists(st.dictionaries(st.sampled_from(["id", "state", "seq", "notes", "gone"]), JSONISH)))
def test_ledger_records_of_any_shape_are_read_or_skipped(records: list[dict[str, Any]]) -> None:
    entries = ledger.parse(b"".join(ledger.line(r) for r in records), STATES)
    for entry in entries.values():
        assert entry.state in ("", *STATES) and entry.seq >= -1


@settings(
    max_examples=examples(200), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(head=st.binary(max_size=300), tail=st.binary(max_size=300))
def test_a_letter_read_as_filed_from_hostile_bytes_never_raises(registry: Registry, head: bytes, tail: bytes) -> None:
    """``as_filed`` reads bytes off the disk: whatever they are, a Letter from a platform or None."""
    framed = (
        b"From: alpha@bus.test\r\nTo: beta@bus.test\r\nMessage-ID: <01x.alpha@bus.test>\r\n" + head + b"\r\n\r\n" + tail
    )
    for raw in (head + tail, framed):
        letter = authenticity.as_filed(raw, registry)
        assert letter is None or letter.sender in registry.platforms
