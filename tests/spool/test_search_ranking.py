"""Search ranks in the FTS table first and joins only the best few letters (issue 28): the
same hits, in the same order with the same scores, as ranking every match of the window with
its joins (the query search ran before), for any words, filters, limit and window size."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.model import Letter
from agentmail.spool import Spool, search
from agentmail.spool.search import WEIGHTS, Query, SearchIndex, _bounds, _filters, to_fts

from ..depth import examples, suppressed

WORDS = ("quota", "login", "crash", "timeout", "error", "plan", "cache")
SENDERS = ("alpha", "gamma", "delta")
TYPES = ("report", "ack", "fix-notice", "question")
THREADS = ("thr-aaaaaaaaaa", "thr-bbbbbbbbbb", "thr-cccccccccc")
STATES = ("read", "unread", "sent", "quarantine")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    """240 letters of few words: many share a body exactly, so bm25 ties are common."""
    rng = random.Random(28)
    spool = Spool(Path(tmp_path_factory.mktemp("ranking")) / "spool" / "beta").ensure()
    bodies = [" ".join(rng.choices(WORDS, k=rng.randint(1, 6))) for _ in range(12)]
    for n in range(240):
        sender = rng.choice(SENDERS)
        letter = Letter(
            message_id=f"<{n}.rank@bus.test>",
            sender=sender,
            sender_address=f"{sender}@bus.test",
            to="beta",
            to_address="beta@bus.test",
            type=rng.choice(TYPES),
            thread=rng.choice(THREADS),
            subject=rng.choice(("Quota", "Login fails", "Re: Quota", "cache plan")),
            body=rng.choice(bodies),
            date="Tue, 01 Dec 2026 09:00:00 +0000",
        )
        spool.write.store(rng.choice(STATES), letter, b"x\r\n\r\ny\r\n")
    return SearchIndex(spool.read)


def _every_match_joined(db: sqlite3.Connection, query: Query, match: str) -> list[tuple[str, float]]:
    """What search ranked before: bm25 over the window's matches joined to their rows."""
    where, params = _filters(query)
    weights = ", ".join(map(str, WEIGHTS))
    lowest, highest = _bounds(db, query, params)
    window, rows = search.RANK_WINDOW, []
    while lowest <= highest:
        cutoff = db.execute(
            "SELECT rowid FROM words WHERE words MATCH ? AND rowid BETWEEN ? AND ?"
            " ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (match, lowest, highest, window - 1),
        ).fetchone()
        rows = db.execute(
            f"SELECT l.id, bm25(words, {weights}) AS score FROM words JOIN letters l ON l.seq = words.rowid"
            f" JOIN found f ON f.seq = words.rowid WHERE words MATCH ? AND {where} AND words.rowid BETWEEN ? AND ?"
            " ORDER BY score, l.id DESC LIMIT ?",
            (match, *params, max(lowest, cutoff[0] if cutoff else 0), highest, query.limit),
        ).fetchall()
        if cutoff is None or len(rows) >= query.limit:
            break
        window *= 4
    return [(i, float(f"{-float(s):.6g}") + 0.0) for i, s in rows]


_QUERIES = st.builds(
    Query,
    text=st.lists(st.sampled_from(WORDS), min_size=1, max_size=2).map(" ".join),
    sender=st.none() | st.sampled_from(SENDERS),
    type=st.none() | st.sampled_from(TYPES),
    thread=st.none() | st.sampled_from(THREADS),
    state=st.none() | st.sampled_from(STATES),
    quarantine=st.booleans(),
    limit=st.integers(1, 40),
)


def test_ranking_first_gives_the_hits_ranking_every_match_joined_gave(index: SearchIndex) -> None:
    db = index.spool.sql()

    @settings(max_examples=examples(400), deadline=None, suppress_health_check=suppressed(HealthCheck.too_slow))
    @given(_QUERIES, st.sampled_from((1, 3, 17, 2000)))
    def check(query: Query, window: int) -> None:
        match = to_fts(query.text)
        assert match is not None
        saved, search.RANK_WINDOW = search.RANK_WINDOW, window
        try:
            hits = [(h.id, h.score) for h in index.search(query)]
            assert hits == _every_match_joined(db, query, match)
        finally:
            search.RANK_WINDOW = saved

    check()


def test_ties_at_the_cut_are_broken_newest_first(index: SearchIndex) -> None:
    """Letters that share a body score alike: the cut at ``limit`` takes the newest of them,
    whichever of them the FTS table listed first."""
    db = index.spool.sql()
    for limit in range(1, 30):
        query = Query(text="quota", limit=limit, quarantine=True)
        expected: list[Any] = _every_match_joined(db, query, "quota")
        assert [(h.id, h.score) for h in index.search(query)] == expected
