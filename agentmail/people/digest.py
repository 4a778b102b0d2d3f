"""The digest: one letter a person reads in any mail client, saying what the agents'
threads need — open threads by age and whose move (stale ones first), letters waiting for a
person's approval, and what was quarantined or bounced since the last digest.

    text = digest.render(am.digest())                # agentmail digest
    am.send_digest(am.digest())                      # agentmail digest --send

What a digest says is gathered and mailed by ``client/to_people`` (the mailbox's door to people);
this module holds what it is (``Digest``), its words (``render``) and its letter (``letter``).

"Since the last digest" is the time the last *sent* digest was made, kept in the mailbox's
spool (``digest.json``); a digest only printed moves nothing, so looking at one never takes
anything out of the next that people get. ``--since`` says it instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import ages
from .._value import Frozen
from ..config.registry import Registry
from ..frame import inline
from ..model import Letter, ThreadStatus
from .for_people import compose_for_people, subject_of, wrap

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


def since_of(value: str | None, last_at: object, now: int) -> int:
    """``--since``: a duration back from now (``3d``), else the last sent digest's time
    (``last_at``, as its record holds it), else ever (0)."""
    if value is not None:
        return now - ages.duration(value, "--since") * 1000
    return last_at if isinstance(last_at, int) and 0 < last_at <= now else 0


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


def letter(
    registry: Registry, home: Path, digest: Digest, to: tuple[str, ...], earlier: list[str]
) -> tuple[str, bytes]:
    """The Message-ID and signed bytes of ``digest`` for the people ``to``, threaded after the
    digests ``earlier`` (the first and the last sent: one conversation in a mail client)."""
    stale = sum(digest.stale(r) for r in digest.threads)
    count = len(digest.threads)
    subject = f"{digest.platform}: digest, {count} open thread{'' if count == 1 else 's'}, {stale} stale, {len(digest.held)} held"
    return compose_for_people(
        registry, home, digest.platform, to, subject, render(digest),
        in_reply_to=earlier[-1] if earlier else None, references=tuple(earlier),
    )  # fmt: skip
