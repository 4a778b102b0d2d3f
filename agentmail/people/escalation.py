"""Escalation (issue 26): a thread the agents cannot or do not move on is announced, once, to the
platform's followers — "needs a person": why, what the last letters said (quoted, marked as
untrusted), how to answer.

Two reasons: the thread is at the depth cap (its next letter would be refused, guards.MAX_DEPTH),
or it had no move for longer than the bus's ``stale_after``. It runs at the end of every
``AgentMail.sync`` (so ``sync``, ``inbox``, ``status``, ``thread`` and ``watch``), only for a
platform that has followers, at most once a minute per process.

**Once.** Each announcement has a key: the thread and ``depth``, or the thread, ``stale`` and the
Message-ID of its last letter (a thread that moves and stalls again is a new stall). Its record
(``escalations/<key>.json``, ``announce``) is created exclusively and made durable *before* the
letter is handed to the transport, under the platform's ``escalations.lock``. So a crash, a
restart or a sibling agent never announces it twice: at most once. A crash inside the
submission leaves the record ``sending``; it is never sent again (nothing can say whether the
server took it) and the next digest names it. A transient failure (``queued``: the server never
took it) keeps the bytes beside the record and is sent again by the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import ages, bounds
from .._fs import locked, write_new
from ..letter.wire import tagged_address
from ..model import ulid_ms
from ..stages.guards import MAX_DEPTH
from . import announce
from .for_people import compose_for_people, quoted, subject_of

if TYPE_CHECKING:
    from ..client.facade import AgentMail
    from ..model import Letter, ThreadStatus

EVERY_MS = 60_000  # a sync loop (watch, wait) looks at most this often
LAST_LETTERS = 3  # quoted in the announcement


def folder(client: AgentMail) -> Path:
    return client.spool.platform_root / "escalations"


def due(client: AgentMail, rows: list[ThreadStatus], now: int) -> Iterator[tuple[str, str, ThreadStatus, Letter]]:
    """(key, reason, row, last letter) of every thread that needs a person now."""
    stale_after = client.registry.bus.stale_after
    for row in rows:
        if row.whose_move == "nobody":
            continue
        last = client.show(row.last_id)
        if last.depth + 1 >= MAX_DEPTH:
            yield f"{row.thread}.depth", "depth", row, last
        elif stale_after is not None and row.idle(now) > stale_after:
            tag = hashlib.sha256(last.message_id.encode()).hexdigest()[:16]
            yield f"{row.thread}.stale.{tag}", "stale", row, last


def run(client: AgentMail) -> list[dict[str, Any]]:
    """Announce what is due and not yet announced; send again what was queued. Returns the
    records written or changed by this run (none when the platform has no followers)."""
    followers = client.platform.followers
    if not followers:
        return []
    now = ages.now_ms()
    where = folder(client)
    where.mkdir(mode=0o700, exist_ok=True)
    done: list[dict[str, Any]] = []
    with locked(client.spool.platform_root / "escalations.lock"):
        done += _retry_queued(client, where)
        recent = _recent(client, now)
        announced = 0
        for key, reason, row, last in due(client, client.status(sync=False), now):
            record_path = where / f"{key}.json"
            if os.path.lexists(record_path):
                continue  # announced already (by this mailbox or a sibling), or being retried
            # Bounded per run and per counterpart (bounds.py): many threads opened by one sender
            # never mail a person many times; the rest wait for a later run (the digest lists all).
            if announced >= bounds.ANNOUNCE_PER_RUN:
                break
            if recent.get(row.with_, 0) >= bounds.ANNOUNCE_PER_SENDER:
                continue
            message_id, raw = _letter(client, reason, row, last, now, followers)
            record = {"key": key, "thread": row.thread, "reason": reason, "message_id": message_id,
                      "to": list(followers), "at": now, "state": "sending", "subject": row.subject,
                      "with": row.with_}  # fmt: skip
            try:
                write_new(record_path, _json(record))  # durable before the letter leaves: once, at most
            except FileExistsError:
                continue
            announced += 1
            recent[row.with_] = recent.get(row.with_, 0) + 1
            done.append(_send(client, where, record, raw))
    return done


def _recent(client: AgentMail, now: int) -> dict[str, int]:
    """How many threads with each counterpart were announced within bounds.ANNOUNCE_WINDOW_MS."""
    counts: dict[str, int] = {}
    for record in records(client):
        at = record.get("at")
        if isinstance(at, int) and now - at < bounds.ANNOUNCE_WINDOW_MS:
            counterpart = str(record.get("with", ""))
            counts[counterpart] = counts.get(counterpart, 0) + 1
    return counts


def records(client: AgentMail) -> list[dict[str, Any]]:
    """Every announcement this platform made, oldest first."""
    where = folder(client)
    if not where.is_dir():
        return []
    found = [announce.read_record(p) for p in where.glob("*.json")]
    return sorted((r for r in found if r), key=lambda r: (int(r.get("at", 0)), str(r.get("key", ""))))


def _send(client: AgentMail, where: Path, record: dict[str, Any], raw: bytes) -> dict[str, Any]:
    status, detail = announce.deliver(client, tuple(record["to"]), record["message_id"], raw)
    if status == "queued":
        (where / f"{record['key']}.eml").write_bytes(raw)  # before the record says queued: a retry has it
    record = {**record, "state": status, "detail": detail}
    announce.write_record(where / f"{record['key']}.json", record)
    if status != "queued":
        (where / f"{record['key']}.eml").unlink(missing_ok=True)
    return record


def _retry_queued(client: AgentMail, where: Path) -> list[dict[str, Any]]:
    done = []
    for record in records(client):
        if record.get("state") != "queued":
            continue
        try:
            raw = (where / f"{record['key']}.eml").read_bytes()
        except OSError:
            continue
        done.append(_send(client, where, record, raw))
    return done


def _letter(
    client: AgentMail, reason: str, row: ThreadStatus, last: Letter, now: int, followers: tuple[str, ...]
) -> tuple[str, bytes]:
    me = client.platform.name
    if reason == "depth":
        why = (f"Why: it is {last.depth + 1} letters deep and the cap is {MAX_DEPTH}: the agents "
               "cannot write into it any more (a loop guard). It needs a person to decide.")  # fmt: skip
    else:
        limit = ages.age(client.registry.bus.stale_after or 0)
        mover = f"{me}'s (this platform's agents)" if row.whose_move == "me" else f"{row.whose_move}'s"
        why = (f"Why: no move for {ages.age(row.idle(now))} (the bus's stale_after is {limit}); "
               f"the move is {mover}.")  # fmt: skip
    letters = client.thread(row.thread, sync=False)
    lines = [
        f"Thread {row.thread} between {me} and {row.with_} needs a person.",
        "",
        why,
        "",
        f"Subject: {subject_of(row.subject)}",
        f"State: {row.state}, {row.letters} letters, opened {ages.age((now - row.opened_ms) / 1000)} ago,",
        f"last move {ages.age(row.idle(now))} ago ({ages.readable(row.moved_ms)}).",
        "",
        "The last letters follow, quoted. Agents and people outside this platform",
        "wrote them and nobody checked what they say: read them as quoted text,",
        "never as instructions.",
    ]
    for letter in letters[-LAST_LETTERS:]:
        who = letter.extra.get("person") or letter.sender
        lines += ["", f"{who}, {letter.type}, {ages.readable(_ms(letter))}:", quoted(letter.body)]
    reply_to = tagged_address(client.platform.address, row.thread)
    lines += [
        "",
        "How to answer: reply to this letter from your own mailbox. The reply goes",
        f"into the thread ({reply_to}) when {me} lists you as a person who",
        f"writes ('agentmail person {me} ADDRESS --writes'). On a terminal:",
        f"'agentmail thread {row.thread}' shows it all.",
        "",
        "-- ",
        f"agentmail, for the followers of {me}; this is said once per stall.",
    ]
    chain = tuple(x.message_id for x in letters[-10:])
    return compose_for_people(
        client.registry, client.home, me, followers, f"[needs a person] {subject_of(row.subject, 50)[1:-1]} ({row.thread})",
        "\n".join(lines), reply_to=reply_to, in_reply_to=last.message_id, references=chain,
    )  # fmt: skip


def _ms(letter: Letter) -> int:
    return max(0, ulid_ms(letter.id))


def _json(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True).encode()
