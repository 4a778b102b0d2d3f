"""A letter's depth: its place in its thread's In-Reply-To chain as filed here (DESIGN §5, §7),
computed from the letter files alone, so a lost cache gives the same number.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ..model import Letter


class Reader(Protocol):
    """What the depth reads of the letters filed here (``views.SpoolReader``, which calls it:
    named here, so the two modules import one way)."""

    @property
    def platform_root(self) -> Path: ...
    def filed(self, sender: str, message_id: str) -> tuple[str, str, str | None] | None: ...
    def locate(self, letter_id: str) -> str | None: ...
    def _record(self, letter_id: str, state: str, meta: str | None) -> dict[str, Any]: ...
    def _cache_meta(self, letter_id: str, data: dict[str, Any]) -> None: ...


def _facts(letter: Letter | dict[str, Any]) -> dict[str, Any]:
    """The fields of a letter (or of its meta) that its depth depends on, as in meta."""
    if isinstance(letter, Letter):
        return {
            "from": letter.sender,
            "to": letter.to,
            "in_reply_to": letter.in_reply_to,
            "references": list(letter.references),
            "thread": letter.thread,
        }
    return letter


def depth_for(read: Reader, letter_id: str, letter: Letter | dict[str, Any]) -> int:
    """How deep ``letter`` (id ``letter_id``, filed or about to be) is in its thread.

    Its parent's depth + 1, where the parent is the letter filed here before it whose
    Message-ID it answers (sent by this platform or by either side of it), and never less
    than the number of its References that name letters of its thread filed here before it
    (a chain whose links another mailbox holds, an ack a report's evidence follows). Only
    letters filed here count: References a sender made up would let one letter put a thread
    at the cap and mail its followers. Only the letter files go into it, so a lost cache
    gives the same number."""
    chain: list[tuple[str, dict[str, Any]]] = []
    node: tuple[str, dict[str, Any]] | None = (letter_id, _facts(letter))
    base = -1
    while node is not None:
        node_id, facts = node
        chain.append(node)
        node = None
        parent_mid = facts.get("in_reply_to")
        if not parent_mid:
            break
        # Mine first: a wrong To never hides that it answers one of my letters.
        found = _filed_before(
            read, node_id, (read.platform_root.name, facts.get("from") or "", facts.get("to") or ""), parent_mid
        )
        if found is not None:
            parent = read._record(*found)
            if "depth" in parent:
                base = int(parent["depth"])
            else:
                node = (found[0], parent)
    depth = base
    for node_id, facts in reversed(chain):
        depth = max(depth + 1, _filed_references(read, node_id, facts))
        if node_id != letter_id and read.locate(node_id):
            read._cache_meta(node_id, {**facts, "depth": depth})
    return depth


def _filed_references(read: Reader, letter_id: str, facts: dict[str, Any]) -> int:
    """How many of the letter's References name a letter of its thread filed here before it
    (bounds.REFERENCES on receipt: at most three look-ups for each)."""
    sides = (read.platform_root.name, facts.get("from") or "", facts.get("to") or "")
    thread = facts.get("thread")
    count = 0
    for message_id in dict.fromkeys(facts.get("references") or ()):
        found = _filed_before(read, letter_id, sides, message_id)
        if found is not None and read._record(*found).get("thread") == thread:
            count += 1
    return count


def _filed_before(
    read: Reader, letter_id: str, sides: tuple[str, ...], message_id: str
) -> tuple[str, str, str | None] | None:
    """The letter this Message-ID names as the first of ``sides`` that filed one sent it, if
    that letter was filed before ``letter_id`` (else the next side is asked): (id, state, meta)."""
    for side in dict.fromkeys(sides):
        found = read.filed(side, message_id)
        if found is not None and found[0] < letter_id:  # filed before it: the chain has no cycles
            filed_id, state, meta = found
            return filed_id, state if filed_id.isalnum() else "", meta
    return None
