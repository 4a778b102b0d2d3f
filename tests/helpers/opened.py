"""The oracle of the new-thread quota's count of this home: from the letters alone (their states
and records, every mailbox of the platform here), never the ``openers`` table the product counts
from. Tests only (and benchmarks/quota_cost.py, as the count before the table)."""

from __future__ import annotations

from agentmail.spool.layout import LEAVING, opener_row
from agentmail.spool.views import SpoolReader


def opened_since(reader: SpoolReader, cutoff_ms: int) -> list[str]:
    """The ids of the threads' first letters the platform sent, queued or holds (a sibling's
    too), created at or after ``cutoff_ms`` (the id is a ULID: its creation time), oldest first."""
    found: list[str] = []
    marks = ",".join("?" * (len(LEAVING) + 1))
    for spool in (reader, *reader._siblings()):
        rows = spool._at.sql().execute(f"SELECT id, state FROM letters WHERE state IN ({marks})", (*LEAVING, "sibling"))
        for letter_id, state in rows.fetchall():
            row = opener_row(str(letter_id), str(state), spool._parsed(str(letter_id), str(state)))
            if row is not None and row[1] >= cutoff_ms:
                found.append(row[0])
    return sorted(found)
