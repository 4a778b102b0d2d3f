"""Realistic letters in bulk: the bytes ``AgentMail.send`` would produce, made on every core.

Fixtures only: a figure that measures sending goes through the API instead. Rendering and
signing here are the same two calls the client makes (``wire.render`` then ``signing.sign``).
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from agentmail.config import registry as registry_mod
from agentmail.config.credentials import read_private_key
from agentmail.letter import wire
from agentmail.model import new_thread_id
from agentmail.trust import signing

# A first letter that satisfies the opener checks: ~700 bytes, like a real report.
OPENER = """\
I am the agent of {sender} (billing); we call {to}'s /quota endpoint for every invoice.
Reproduction: `curl -s https://{to}.example/quota?id=7` returns status 500 with the output
"KeyError: 'plan'" since version 2.4.1 (2026-11-28). Expected 200 per the documented contract
(docs/api.md#quota). Blast radius: every invoice for users on the free plan, about 3% of the
daily volume. Please fix it, or tell us the new contract so we can adapt our client.
"""
FOLLOW_UP = """\
More detail on the failure above: it happens only when the account was created before the
plan migration. Verbatim output of the second run, 2026-11-29 09:14 UTC:

    HTTP/1.1 500 Internal Server Error
    {{"error": "KeyError: 'plan'", "request_id": "r-8c1f"}}

Thanks for looking at it.
"""
SUBJECTS = (
    "Quota endpoint returns 500 for free-plan accounts",
    "Webhook retries arrive out of order after 2.4",
    "Token refresh races with logout",
    "CSV export drops the last row",
    "Rate limiter counts HEAD requests",
)


@dataclass(frozen=True)
class Spec:
    """One letter to make; Message-IDs are chosen up front so follow-ups can cite them."""

    sender: str
    to: str
    type: str
    thread: str
    subject: str
    message_id: str
    in_reply_to: str | None = None
    references: tuple[str, ...] = ()


def conversation(senders: Sequence[str], to: str, count: int, seed: int = 5) -> list[Spec]:
    """``count`` letters to ``to``: 40% open a thread, the rest follow up the sender's last
    letter in one of its open threads (so the receiver walks the ancestry too)."""
    return list(iter_conversation(senders, to, count, seed))


def iter_conversation(senders: Sequence[str], to: str, count: int, seed: int = 5) -> Iterator[Spec]:
    """``conversation``, one spec at a time (a million specs held at once are ~1 GB)."""
    rng = random.Random(seed)
    last: dict[tuple[str, str], Spec] = {}
    threads: dict[str, list[tuple[str, str]]] = {s: [] for s in senders}  # each sender's, oldest first
    for index in range(count):
        sender = senders[index % len(senders)]
        mine = threads[sender]  # kept as it goes: listing them per letter made 100,000 take minutes
        if not mine or rng.random() < 0.4:
            spec = Spec(
                sender, to, "report", new_thread_id(), rng.choice(SUBJECTS), wire.new_message_id(sender, "bus.test")
            )
        else:
            parent = last[rng.choice(mine[-50:])]
            spec = Spec(
                sender,
                to,
                "question",
                parent.thread,
                "Re: " + parent.subject,
                wire.new_message_id(sender, "bus.test"),
                parent.message_id,
                (*parent.references, parent.message_id)[-20:],
            )
        if (sender, spec.thread) not in last:
            mine.append((sender, spec.thread))
        last[(sender, spec.thread)] = spec
        yield spec


_worker: dict[str, object] = {}


def _init(home: str, registry_root: str) -> None:
    registry = registry_mod.load(Path(registry_root))
    _worker["registry"] = registry
    _worker["keys"] = {name: read_private_key(Path(home), name) for name in registry.platforms}


def render(spec: Spec) -> bytes:
    registry = _worker["registry"]
    keys = _worker["keys"]
    assert isinstance(registry, registry_mod.Registry) and isinstance(keys, dict)
    me, them = registry.get(spec.sender), registry.get(spec.to)
    body = (OPENER if spec.type == "report" else FOLLOW_UP).format(sender=spec.sender, to=spec.to)
    outline = wire.draft_letter(
        sender_address=me.address,
        sender_name=me.display_name,
        to_address=them.address,
        type=spec.type,
        thread=spec.thread,
        subject=spec.subject,
        body=body,
        severity="high" if spec.type == "report" else None,
        in_reply_to=spec.in_reply_to,
        references=spec.references,
        message_id=spec.message_id,
    )
    return signing.sign(wire.render(outline), me.dkim_domain or me.domain, me.selector, str(keys[spec.sender]))


def make(home: Path, registry_root: Path, specs: Sequence[Spec]) -> list[bytes]:
    """The signed bytes of every spec, in order, using every core."""
    workers = max(1, min(len(os.sched_getaffinity(0)), 8))
    if workers == 1 or len(specs) < 200:
        _init(str(home), str(registry_root))
        return [render(s) for s in specs]
    with ProcessPoolExecutor(workers, initializer=_init, initargs=(str(home), str(registry_root))) as pool:
        return list(pool.map(render, specs, chunksize=100))


def make_into(home: Path, registry_root: Path, specs: Iterable[Spec], folder: Path) -> int:
    """The signed bytes of every spec written to ``folder`` as ``00000000.eml``… in order, using
    every core, never all held at once; returns how many."""
    workers = max(1, min(len(os.sched_getaffinity(0)), 8))
    count = 0
    with ProcessPoolExecutor(workers, initializer=_init, initargs=(str(home), str(registry_root))) as pool:
        pending = iter(specs)
        # a slice at a time: map takes its whole input at once, and holds every result until read
        while batch := list(itertools.islice(pending, 20_000)):
            for raw in pool.map(render, batch, chunksize=200):
                (folder / f"{count:08d}.eml").write_bytes(raw)
                count += 1
    return count
