"""The changes of the guards asked of the approvers, as records on disk (DESIGN §6): what
``Consent.ask`` writes before it mails the approvers, what ``Holds.decide_by_mail`` adds their
verified answers to, and what the asking command reads again.

    spool/<platform>/changes/<random>.json   {"change", "effect", "announced", "answers", "deciders", "needs"}

A record is outside input once on disk: read leniently (anything unreadable is no record).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from .._fs import write_atomic

if TYPE_CHECKING:
    from ..spool.store import Spool


def folder_of(spool: Spool) -> Path:
    return spool.platform_root / "changes"


def records(spool: Spool) -> list[tuple[Path, dict[str, object]]]:
    folder = folder_of(spool)
    return [(path, read(path)) for path in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def find(spool: Spool, change: str, effect: str) -> Path | None:
    """The record asking ``change``. One that told the approvers another ``effect`` (the same
    command now does something else: a hold rule added meanwhile, say) is spent unanswered and
    removed: an answer approves the change as it was shown, never what it came to mean since."""
    for path, data in records(spool):
        if data.get("change") != change:
            continue
        if data.get("effect", effect) == effect:  # a record from before: the change alone
            return path
        path.unlink(missing_ok=True)
    return None


def pending(spool: Spool) -> dict[str, Path]:
    """The announced changes still waiting for an answer, by their announcement's Message-ID."""
    return {str(data["announced"]): path for path, data in records(spool) if isinstance(data.get("announced"), str)}


def deciders(path: Path) -> tuple[str, ...] | None:
    """Who may answer the change recorded at ``path`` (None: a record from before: every approver)."""
    given = read(path).get("deciders")
    return tuple(a for a in given if isinstance(a, str)) if isinstance(given, list) else None


def record(path: Path, who: str, verb: str, why: str) -> None:
    """An approver's verified answer to a change's announcement, kept for ``Consent.ask``."""
    data = read(path)
    if data:
        data["answers"] = [*answers_of(data), f"{who} {verb}" + (f": {why}" if why else "")]
        write_atomic(path, json.dumps(data).encode())


def unmet(data: dict[str, object], answers: list[str]) -> list[str]:
    """The platforms of a change of the whole bus (``needs``: platform -> its approvers) none of
    whose approvers approved it yet ([] for any other change, or a record from before)."""
    needs = data.get("needs")
    if not isinstance(needs, dict):
        return []
    approving = {a.split(" ", 1)[0] for a in answers if verb_of(a) == "approve"}
    return [str(name) for name, who in needs.items() if isinstance(who, list) and not approving & set(who)]


def verb_of(answer: str) -> str:
    return answer.partition(" ")[2].partition(":")[0]


def answers_of(data: dict[str, object]) -> list[str]:
    given = data.get("answers")
    return [a for a in given if isinstance(a, str)] if isinstance(given, list) else []


def read(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
