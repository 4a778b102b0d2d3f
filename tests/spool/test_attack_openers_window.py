"""Attacks on the quota's kept window (``_OpenersWindow.since``: the letters changed read with
the versions in one SELECT, then a DELETE of the list): changes made by this connection inside
a transaction it commits or rolls back, by another connection between counts, a letter's
opener row given another key under the same id, a row removed, a letter moved to quarantine or
out of the counted states and back, the schema changed. After every step the kept count is the
plain query's count of the window (a count below it is a hole in the new-thread quota)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.model import opener_key, ulid_floor
from agentmail.spool.layout import LEAVING
from agentmail.spool.store import Spool

from ..depth import examples
from .test_spool import NAMES, _letter

HOUR = 3_600_000
_COUNTED = (*LEAVING, "sibling")
_TARGETS = st.sampled_from([*LEAVING, "sibling", "failed", "quarantine", "unread"])


def _plain(spool: Spool, cutoff: int) -> tuple[set[str], int | None]:
    """The window as one plain query reads it, on a connection of its own (sees what is committed)."""
    rows = (
        Spool(spool.root)
        .read.sql()
        .execute(
            "SELECT o.key, o.ms FROM openers o JOIN letters l ON l.id = o.id"
            " WHERE o.id >= ? AND o.ms >= ? AND l.state IN (?, ?, ?, ?)",
            (ulid_floor(cutoff), cutoff, *_COUNTED),
        )
        .fetchall()
    )
    return {str(k) for k, _ in rows}, min((int(m) for _, m in rows), default=None)


_STEP = st.one_of(
    st.tuples(st.just("file"), st.integers(0, 2 * HOUR), st.integers(1, 8)),
    st.tuples(st.just("move"), st.integers(0, 20), _TARGETS),
    st.tuples(st.just("other"), st.integers(0, 20), _TARGETS),  # another connection's commit
    # this connection, in a transaction: a state change, a row removed, a key changed under the same id
    st.tuples(
        st.just("tx"),
        st.lists(
            st.tuples(st.sampled_from(["state", "unrow", "rekey"]), st.integers(0, 20), _TARGETS),
            min_size=1,
            max_size=4,
        ),
        st.booleans(),  # committed (else rolled back)
    ),
    st.tuples(st.just("schema"), st.just(0), st.just(0)),
    st.tuples(st.just("count"), st.integers(-HOUR // 2, 2 * HOUR), st.just(0)),
)


def _change(conn: Any, what: str, letter_id: str, target: str) -> None:
    if what == "state":
        conn.execute("UPDATE letters SET state=? WHERE id=?", (target, letter_id))
    elif what == "unrow":
        conn.execute("DELETE FROM openers WHERE id=?", (letter_id,))
    else:
        conn.execute("UPDATE openers SET key=? WHERE id=?", (opener_key(f"<{target}.{letter_id}@x>"), letter_id))


@settings(max_examples=examples(150), deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=20))
def test_the_kept_window_counts_the_plain_count_under_transactions_and_other_writers(
    steps: list[tuple[str, Any, Any]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        beta = Spool(Path(tmp) / "spool" / "beta", name_of=NAMES.get)
        conn = beta.read.sql()
        now = int(time.time() * 1000)
        cutoff = now - HOUR
        ids: list[str] = []
        assert beta.read.opener_key_set(cutoff) == _plain(beta, cutoff)
        for n, (what, a, b) in enumerate([*steps, ("count", 0, 0)]):
            if what == "file":
                letter, raw = _letter(b)
                letter_id = ulid_floor(now - a)[:10] + f"{n:016d}"
                beta.write.store("outbox", letter.replace(id=letter_id), raw, durable=False)
                ids.append(letter_id)
            elif what in ("move", "other") and ids:
                spool = beta if what == "move" else Spool(beta.root)
                spool.read.sql().execute("UPDATE letters SET state=? WHERE id=?", (b, ids[a % len(ids)]))
            elif what == "tx" and ids:
                conn.execute("BEGIN IMMEDIATE")
                for change, index, target in a:
                    _change(conn, change, ids[index % len(ids)], target)
                beta.read.opener_key_set(cutoff)  # a count inside the transaction
                conn.execute("COMMIT" if b else "ROLLBACK")
            elif what == "schema":
                Spool(beta.root).read.sql().execute("CREATE TABLE IF NOT EXISTS am_attack(x)")
            elif what == "count":
                cutoff += a
            assert beta.read.opener_key_set(cutoff) == _plain(beta, cutoff), (n, what, a, b)
