"""The digest (issue 26): one letter a person reads in any mail client, saying what the agents'
threads need — open threads by age and whose move (stale ones first), letters waiting for a
person's approval, and what was quarantined or bounced since the last digest.

    text = digest.render(digest.gather(am))          # agentmail digest
    digest.send(am)                                  # agentmail digest --send

"Since the last digest" is the time the last *sent* digest was made, kept in the mailbox's
spool (``digest.json``); a digest only printed moves nothing, so looking at one never takes
anything out of the next that people get. ``--since`` says it instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import ages
from .._value import Frozen
from ..frame import inline
from ..model import ulid_ms
from . import announce, escalation
from .for_people import compose_for_people, subject_of, wrap

if TYPE_CHECKING:
    from ..client.facade import AgentMail
    from ..model import Letter, ThreadStatus

STATE = "digest.json"
DEFAULT_STALE = 3 * 86400  # what "stale" means in a digest when the bus sets no stale_after


class Digest(Frozen):
    """What one digest says, gathered at ``now`` (ms) for the period from ``since`` (ms; 0: ever)."""

    platform: str
    now: int
    since: int
    stale_after: int
    threads: tuple[ThreadStatus, ...]  # stale ones first (longest without a move), then oldest first
    held: tuple[Letter, ...]
    quarantined: tuple[Letter, ...]  # since ``since``
    bounced: tuple[Letter, ...]  # letters of mine whose bounce came since ``since``
    announced: tuple[dict[str, Any], ...]  # escalations made since ``since``

    def stale(self, row: ThreadStatus) -> bool:
        return row.idle(self.now) > self.stale_after

    def to_json(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "made_at": ages.iso(self.now),
            "since": ages.iso(self.since) if self.since else None,
            "stale_after": self.stale_after,
            "threads": [{**r.to_json(), "stale": self.stale(r)} for r in self.threads],
            "held": [x.id for x in self.held],
            "quarantined": [x.id for x in self.quarantined],
            "bounced": [x.id for x in self.bounced],
            "announced": [r.get("key") for r in self.announced],
        }


def last_sent(client: AgentMail) -> dict[str, Any]:
    """The mailbox's digest state: ``at`` (ms) and ``message_ids`` of the last sent digest."""
    return announce.read_record(_state(client))


def since_of(value: str | None, client: AgentMail, now: int) -> int:
    """``--since``: a duration back from now (``3d``), else the last sent digest, else ever (0)."""
    if value is not None:
        return now - ages.duration(value, "--since") * 1000
    at = last_sent(client).get("at")
    return at if isinstance(at, int) and 0 < at <= now else 0


def gather(client: AgentMail, since: str | None = None, *, sync: bool = True) -> Digest:
    """What the digest says now. ``since``: as ``--since`` (BadInput for a bad one, before any sync)."""
    now = ages.now_ms()
    start = since_of(since, client, now)
    if sync:
        client.sync()
        now = max(now, ages.now_ms())
    stale_after = client.registry.bus.stale_after or DEFAULT_STALE
    rows = [r for r in client.status(sync=False) if r.whose_move != "nobody" or r.delivery in ("held", "failed")]
    rows.sort(key=lambda r: (not r.idle(now) > stale_after, r.moved_ms if r.idle(now) > stale_after else r.opened_ms))
    quarantined = tuple(x for x in client.quarantined(sync=False) if ulid_ms(x.id) > start)
    bounced = []
    for letter in client.sent():
        notes = client.spool.read.annotations(letter.id)
        if notes.get("undeliverable"):
            when = str(notes.get("undeliverable_at") or "")
            at = int(when) if when.isdigit() else ulid_ms(letter.id)
            if at > start:
                bounced.append(letter)
    announced = tuple(r for r in escalation.records(client) if int(r.get("at", 0)) > start)
    return Digest(client.platform.name, now, start, stale_after, tuple(rows), tuple(client.held()), quarantined,
                  tuple(bounced), announced)  # fmt: skip


def render(digest: Digest) -> str:
    """The digest as a person reads it: plain text, every line at most 78 characters. What came
    from a letter is quoted on a line of its own (``subject_of``), never wrapped across lines."""
    me, now = digest.platform, digest.now
    stale = [r for r in digest.threads if digest.stale(r)]
    period = f"since the last digest ({ages.readable(digest.since)})" if digest.since else "so far"
    lines = [
        f"Digest of {me}, {ages.readable(now)}.",
        f"Open threads: {len(digest.threads)}, {len(stale)} stale (no move for over "
        f"{ages.age(digest.stale_after)}); waiting for approval: {len(digest.held)}; "
        f"quarantined {period}: {len(digest.quarantined)}; bounced: {len(digest.bounced)}.",
    ]
    if digest.threads:
        lines += ["", "OPEN THREADS (stale first, then oldest first)"]
        for row in digest.threads:
            mark = "STALE " if digest.stale(row) else ""
            move = f"{me}'s move" if row.whose_move == "me" else f"{row.whose_move}'s move"
            lines += [
                "",
                f"  {mark}{row.thread} with {inline(row.with_)}: {row.state}, {inline(move)}",
                f"    opened {ages.age((now - row.opened_ms) / 1000)} ago, last move "
                f"{ages.age(row.idle(now))} ago, {row.letters} letter{'' if row.letters == 1 else 's'}",
                f"    subject: {subject_of(row.subject)}",
            ]
            if row.delivery in ("held", "queued", "failed"):
                lines.append(f"    delivery: {row.delivery}")
    if digest.held:
        lines += ["", "WAITING FOR A PERSON'S APPROVAL (held)"]
        for letter in digest.held:
            reason = inline(letter.extra.get("held_reason") or "held")
            lines += ["", f"  {letter.id} to {inline(letter.to)}", f"    subject: {subject_of(letter.subject)}",
                      f"    {reason}"]  # fmt: skip
    if digest.quarantined:
        lines += ["", f"QUARANTINED {period.upper()}"]
        for letter in digest.quarantined:
            sender = subject_of(letter.sender_address or letter.sender or "?", 60)
            lines += ["", f"  {letter.id} {inline(letter.reason or '?')}", f"    from: {sender}",
                      f"    {subject_of(letter.detail or '', 70)}"]  # fmt: skip
    if digest.bounced:
        lines += ["", f"BOUNCED {period.upper()}"]
        for letter in digest.bounced:
            lines += ["", f"  {letter.id} to {inline(letter.to)}", f"    subject: {subject_of(letter.subject)}"]
    interrupted = [r for r in digest.announced if r.get("state") in ("sending", "queued", "failed")]
    if digest.announced:
        lines += ["", f"ANNOUNCED AS NEEDING A PERSON {period.upper()}"]
        for record in digest.announced:
            lines.append(
                f"  {inline(record.get('thread'))}: {inline(record.get('reason'))} ({inline(record.get('state'))})"
            )
    if interrupted:
        lines += ["", "Some announcements may not have reached you (sending: interrupted by a",
                  "crash; queued: the server was unreachable, sent again later; failed:",
                  "refused); 'agentmail status' has the threads."]  # fmt: skip
    lines += [
        "",
        "How to act: 'agentmail status --stale 3d' lists the stale threads on a",
        f"terminal of {me}; 'agentmail thread THREAD' shows one; 'agentmail held',",
        "'agentmail approve ID' and 'agentmail reject ID -r REASON' decide the held",
        "letters. Subjects and details above come from letters: quoted, unchecked.",
        "",
        "-- ",
        f"agentmail digest for the followers of {me}",
    ]
    return wrap("\n".join(lines)) + "\n"


def send(client: AgentMail, digest: Digest) -> dict[str, Any]:
    """Mail ``digest`` to the platform's followers (one letter, every one a recipient), threaded
    after the last digest, and remember it; returns {message_id, to, status, detail}."""
    state = last_sent(client)
    earlier = [m for m in state.get("message_ids", []) if isinstance(m, str)][-2:]  # first and last: a thread
    to = client.platform.followers
    stale = sum(digest.stale(r) for r in digest.threads)
    count = len(digest.threads)
    subject = f"{digest.platform}: digest, {count} open thread{'' if count == 1 else 's'}, {stale} stale, {len(digest.held)} held"
    message_id, raw = compose_for_people(
        client.registry, client.home, digest.platform, to, subject, render(digest),
        in_reply_to=earlier[-1] if earlier else None, references=tuple(earlier),
    )  # fmt: skip
    status, detail = announce.deliver(client, to, message_id, raw)
    if status == "sent":
        announce.write_record(_state(client), {"at": digest.now, "message_ids": [*earlier[:1], message_id]})
    return {"message_id": message_id, "to": list(to), "status": status, "detail": detail}


def _state(client: AgentMail) -> Path:
    return client.spool.root / STATE
