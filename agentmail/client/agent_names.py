"""Which agents a platform has (``note --to``, DESIGN §6): a note to a name no agent of the
platform has used is refused with the names known, unless it is meant for a new agent.

Known: this agent, every agent with a mailbox in this home (``spool/<platform>@<agent>``), and
every agent a note of the platform was addressed to (notes from other machines arrive in the
platform's mailbox and are filed here by the next sync).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput

if TYPE_CHECKING:
    from ..spool.store import Spool


def known_agents(home: Path, platform: str, spool: Spool, me: str | None) -> list[str]:
    names = {p.name.partition("@")[2] for p in (home / "spool").glob(f"{platform}@*") if p.is_dir()}
    names |= spool.read.note_recipients()
    if me:
        names.add(me)
    names.discard("")
    return sorted(names)


def check_known(name: str, known: list[str]) -> None:
    """BadInput (exit 2) for a name outside ``known``, in one line naming them."""
    if name not in known:
        listed = ", ".join(known) if known else "none yet"
        raise BadInput(
            f"no agent of this platform is called {name!r} (known: {listed}); "
            "check the spelling, or pass --new-agent for an agent that has not read yet"
        )
