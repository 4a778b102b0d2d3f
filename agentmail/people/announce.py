"""Handing a letter for people (``for_people``) to the bus's transport, and remembering what was
said to them (issue 26): the digest's mark and the escalation records, in the spool.

These letters never enter the spool's letter table (no agent reads them, no thread of agents
holds them): what is remembered is a small record per announcement, below.

    spool/<platform>[@agent]/digest.json        when the last digest was sent, and its Message-IDs
    spool/<platform>/escalations/<key>.json     one per announcement (the platform's, shared by its
                                                agents): state sending | sent | queued | failed
    spool/<platform>/escalations/<key>.eml      a queued announcement's bytes, sent again later
    spool/<platform>/escalations.lock           one announcer at a time among the platform's agents
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._fs import write_atomic
from ..errors import AgentmailError
from ..transport import Envelope, Outgoing

if TYPE_CHECKING:
    from ..client.facade import AgentMail


def deliver(client: AgentMail, to: tuple[str, ...], message_id: str, raw: bytes) -> tuple[str, str]:
    """Submit ``raw`` to the people ``to`` (one submission, every one an RCPT TO; on the local post
    office each person's Maildir). Returns (status, detail): status sent | queued | failed."""
    results: list[Any] = []
    try:
        client.transport.submit([Outgoing(message_id, raw, Envelope(client.platform.address, to))], results.append)
    except (AgentmailError, OSError) as exc:  # unreachable, a configuration to fix, a Maildir that
        return "queued", str(exc) or exc.__class__.__name__  # cannot be written: not sent, tried later
    if not results:
        return "queued", "the transport gave no result"
    result = results[-1]
    detail = result.detail
    if result.refused:
        detail = (detail + "; " if detail else "") + "; ".join(f"{a}: {w}" for a, w in result.refused)
    return str(result.status), detail


def read_record(path: Path) -> dict[str, Any]:
    """A record as written; an unreadable one is an empty dict (it was never ours to trust more)."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_record(path: Path, record: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(record, sort_keys=True).encode())
