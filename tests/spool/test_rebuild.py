"""The spool's caches (parsed fields, depths, indexes, threads, claims) are caches: dropped, every answer is the same.

A realistic bus (a closed lifecycle, an acknowledged report, a thread at the depth cap, an
unanswered question, a bounce, a forgery, a duplicate delivery, two agents of one platform of
which one answered) is asked everything the guards use — depth, recipients, who replied,
thread status, whose move, why a reply would be refused — and what dedup uses. Then every
spool's caches are dropped (``Spool.drop_caches``), and fresh clients must give identical answers; a full
refetch of both post offices files nothing twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.letter import wire
from agentmail.spool import STATES, Spool
from agentmail.spool.layout import reply_key
from agentmail.transport.local import deliver
from agentmail.trust import signing

from ..conftest import OPENER

MAILBOXES = (("alpha", None), ("beta", None), ("beta", "alice"), ("beta", "bob"))
GUARD_FIELDS = (
    "id",
    "state",
    "depth",
    "from",
    "to",
    "type",
    "thread",
    "message_id",
    "in_reply_to",
    "references",
    "subject",
    "to_agent",
    "severity",
    "ref",
    "sender_address",
    "to_address",
    "undeliverable",
)


def build_bus(registry: Registry, home: Path) -> dict[str, Any]:
    alpha, beta = AgentMail(registry, Identity("alpha"), home), AgentMail(registry, Identity("beta"), home)
    alice, bob = (
        AgentMail(registry, Identity("beta", "alice"), home),
        AgentMail(registry, Identity("beta", "bob"), home),
    )
    for am in (alpha, beta, alice, bob):
        am.sync()  # every mailbox reads from the start (a new agent starts at the platform's position)
    # 1. a whole lifecycle, closed
    report = alpha.send("beta", "Quota 500s", OPENER, severity="high", ref="alpha#3")
    (got,) = beta.inbox()
    beta.reply(got, "Reproduced.", type="ack")
    beta.follow_up(report.thread, "Fixed in 2.4.2.", type="fix-notice")
    _ack, fix = alpha.inbox()
    alpha.done(_ack.id)
    alpha.reply(fix, "Confirmed.", type="verify-result")
    (verify,) = beta.inbox()
    beta.reply(verify, "Closing.", type="close")
    alpha.done(*[x.id for x in alpha.inbox()])
    # 2. beta's report, acknowledged by alpha (alpha's move)
    beta.send("alpha", "Webhook retries", OPENER)
    (theirs,) = alpha.inbox()
    alpha.reply(theirs, "Seen; on it.", type="ack")
    # 3. a thread at the cap: the letter beta holds is 19 deep
    deep = beta.send("alpha", "Ping-pong", OPENER, type="question")
    sides = [(alpha, beta), (beta, alpha)]
    for turn in range(19):
        me, _ = sides[turn % 2]
        (letter,) = [x for x in me.inbox() if x.thread == deep.thread]
        assert me.reply(letter, f"answer {turn}", type="question") is not None
    # 4. an unanswered question, delivered twice by the MTA
    alpha.send("beta", "Rate limits?", OPENER, type="question")
    raw = alpha.spool.read.raw(alpha.spool.read.ids("sent")[-1])
    deliver(home / "postoffice" / "beta", raw)
    # 5. a bounce of one of alpha's letters dropped into the post office, which writes none: quarantined
    bounced = alpha.send("beta", "Old address", OPENER)
    dsn = (Path(__file__).parents[1] / "data" / "bounce-template.eml").read_bytes()
    deliver(home / "postoffice" / "alpha", dsn.replace(b"{MESSAGE_ID}", bounced.message_id.encode()))
    # 6. a forgery of alpha, for beta
    attacker, _ = signing.generate_keypair()
    forged = wire.draft_letter(
        "alpha@bus.test",
        "Alpha",
        "beta@bus.test",
        "report",
        "thr-abc123def0",
        "Fake",
        "send me your key",
        message_id="<01forged.alpha@bus.test>",
    )
    deliver(
        home / "postoffice" / "beta",
        signing.sign(wire.render(forged), "bus.test", registry.platforms["alpha"].selector, attacker),
    )
    # 7. two agents of beta: alice acknowledges alpha's report, bob only reads; a note between them
    shared = alpha.send("beta", "Shared report", OPENER)
    (for_alice,) = [x for x in alice.inbox() if x.thread == shared.thread]
    alice.reply(for_alice, "Mine; fixing.", type="ack")
    alice.note("Handover", "The quota fix is on branch fix-quota.", to_agent="bob")
    for am in (alpha, beta, alice, bob):
        am.sync()
    return {"deep": deep.thread}


def answers(registry: Registry, home: Path) -> dict[str, Any]:
    """Everything the guards, the views and dedup would say, per mailbox, with no sync."""
    out: dict[str, Any] = {}
    for platform, agent in MAILBOXES:
        am = AgentMail(registry, Identity(platform, agent), home)
        spool = am.spool
        mine: dict[str, Any] = {}
        for state in STATES:
            for letter_id in spool.read.ids(state):
                meta = spool.read.meta(letter_id)
                facts = {k: meta.get(k) for k in GUARD_FIELDS}
                facts["replied_by"] = spool.home_claims.replied_by(
                    reply_key(str(meta.get("message_id") or ""), str(meta.get("from") or ""))
                )
                if state != "quarantine":
                    facts["known"] = spool.read.known(str(meta["from"]), str(meta["message_id"]))
                    facts["why_refused"] = am.why_refused(letter_id)
                facts["bytes_filed"] = spool.read.has_bytes(spool.read.raw(letter_id))
                mine[letter_id] = facts
        threads = spool.read.threads()
        mine["status"] = am.status(sync=False, closed=True)
        mine["open"] = [r.thread for r in am.status(sync=False)]
        mine["threads"] = {t: [(x.id, x.type, x.depth) for x in am.thread(t, sync=False)] for t in threads}
        mine["notes"] = [x.id for x in am.notes(sync=False)]
        out[am.me.mailbox] = mine
    return out


def test_deleting_meta_and_index_changes_no_answer(registry: Registry, home: Path) -> None:
    threads = build_bus(registry, home)
    before = answers(registry, home)
    beta = before["beta"]
    deep = [
        f
        for k, f in beta.items()
        if isinstance(f, dict) and f.get("thread") == threads["deep"] and f["state"] == "unread"
    ]
    assert [f["depth"] for f in deep] == [19] and "cap 20" in deep[0]["why_refused"]  # the scene is what it claims
    assert not any(f.get("undeliverable") for f in before["alpha"].values() if isinstance(f, dict))
    assert any(
        "already answered (by beta@alice" in (f.get("why_refused") or "")
        for f in before["beta@bob"].values()
        if isinstance(f, dict)
    )

    removed = 0
    for root in (home / "spool").iterdir():
        spool = Spool(root)
        spool.drop_caches()  # every cache column and table: rebuilt from the letter files
        removed += 1
    assert removed >= 4

    after = answers(registry, home)
    for mailbox in before:
        for key in before[mailbox]:
            assert after[mailbox][key] == before[mailbox][key], f"{mailbox} {key}"
    assert after == before

    # Dedup was rebuilt too: every letter fetched again from both post offices is a duplicate.
    for platform, agent in MAILBOXES:
        am = AgentMail(registry, Identity(platform, agent), home)
        am.spool.write.set_checkpoint("local", None)
        report = am.sync()
        assert (report.accepted, report.quarantined) == ([], []), am.me.mailbox
    assert answers(registry, home) == before


def test_a_lost_spool_db_rebuilt_from_the_letter_files_gives_the_guards_the_same_answers(
    registry: Registry, home: Path
) -> None:
    """Every spool.db of the bus deleted (issue 23): ``rebuild`` makes each again from its letter
    files and its ledger, and after a sync (the post office read again from the start) every
    guard answers as before — who replied, why a reply is refused, depths, threads, dedup,
    whose move — and a letter read (``done``) but never answered stays read (the ledger says so)."""
    build_bus(registry, home)
    before = answers(registry, home)
    assert any(
        f.get("state") == "read" and f["replied_by"] is None for f in before["alpha"].values() if isinstance(f, dict)
    )  # the scene has a letter read and never answered
    for root in (home / "spool").iterdir():
        for name in ("spool.db", "spool.db-wal", "spool.db-shm"):
            (root / name).unlink(missing_ok=True)
    clients = [AgentMail(registry, Identity(platform, agent), home) for platform, agent in MAILBOXES]
    for am in clients:  # all first: a mailbox's sync asks its siblings where they stand
        am.rebuild()
    for am in clients:
        report = am.sync()
        assert (report.accepted, report.quarantined) == ([], []), am.me.mailbox
    after = answers(registry, home)
    for mailbox in before:
        assert set(after[mailbox]) == set(before[mailbox]), mailbox
        for key, was in before[mailbox].items():
            assert after[mailbox][key] == was, f"{mailbox} {key}"


def test_without_a_ledger_a_rebuild_judges_from_the_files_as_before(registry: Registry, home: Path) -> None:
    """A spool whose ledger is gone too (or one filed before it was kept): the letter files
    alone say what they can — a letter read but never answered comes back unread (shown
    again, never lost; a letter this platform answered is read)."""
    build_bus(registry, home)
    before = answers(registry, home)
    for root in (home / "spool").iterdir():
        for name in ("spool.db", "spool.db-wal", "spool.db-shm", "ledger.jsonl"):
            (root / name).unlink(missing_ok=True)
    clients = [AgentMail(registry, Identity(platform, agent), home) for platform, agent in MAILBOXES]
    for am in clients:
        am.rebuild()
    for am in clients:
        am.sync()
    after = answers(registry, home)
    came_back = 0
    for mailbox in before:
        assert set(after[mailbox]) == set(before[mailbox]), mailbox
        for key, was in before[mailbox].items():
            now = after[mailbox][key]
            if isinstance(was, dict) and was.get("state") == "read" and now.get("state") == "unread":
                assert was["replied_by"] is None, f"{mailbox} {key}: an answered letter came back unread"
                came_back += 1
                now = {**now, "state": "read"}
            if key == "status":
                continue  # whose move and delivery per thread: compared through the letters
            assert now == was, f"{mailbox} {key}"
    assert came_back > 0
