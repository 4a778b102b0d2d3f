"""Figure 8: ``search`` over 1k, 10k and 100k letters, warm, beside a bare FTS5 query.

The spool is the scale figure's (``spoolgen``), with bodies that differ: each letter adds ~30
words drawn from a 5,000-word vocabulary with Zipf frequencies (so a common word is in most
letters and a rare one in few) and an error code. Four queries, each its own kind of work:

- ``rare``: one error code (a handful of letters);
- ``common``: the most frequent word (ranking most of the history: the worst case);
- ``two``: two mid-frequency words, both required;
- ``filtered``: a mid-frequency word, ``--from`` one peer and ``--type report``.

Warm: the spool unchanged since it was built, the process already running; each sample is
``AgentMail.search(..., sync=False)``. The figure is the slowest kind's median. Baseline, in the same run: the same words
as a bare ``sqlite3`` FTS5 query (the newest RANK_WINDOW matches ``ORDER BY rank LIMIT 20``,
with snippets: the work agentmail's query does) on a table holding only the same subjects and
bodies, its snippets by highlight() for the letters shown; the details add the bare query
ranking every match (what the window saves). Details add what is not warm: making the index
again from the letters' records (the rebuild's step), the first search after a letter moved
into ``read``, and a whole ``agentmail search --no-sync`` process.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

from agentmail.spool import words as index_rows
from agentmail.spool.search import RANK_WINDOW, TOKENIZER

from .common import Runs, Settings, TempBus
from .report import Figure, Target, median
from .spoolgen import OWNER, PLATFORMS, SpoolBuilder

SAMPLES = 15  # per query kind and size
VOCABULARY = 5000


def _words(rng: random.Random) -> list[str]:
    """Pronounceable made-up words, distinct, in a fixed order (rank 1 is the most frequent)."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    seen: dict[str, None] = {}
    while len(seen) < VOCABULARY:
        syllables = rng.randint(2, 4)
        seen["".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables))] = None
    return list(seen)


class SearchSpool(SpoolBuilder):
    """The scale spool, with bodies that differ from letter to letter."""

    def __init__(self, tb: TempBus) -> None:
        super().__init__(tb, seed=11)
        self.vocabulary = _words(random.Random(5))
        weights = [1.0 / rank for rank in range(1, VOCABULARY + 1)]
        total, running = sum(weights), 0.0
        self.cumulative: list[float] = []
        for weight in weights:
            running += weight
            self.cumulative.append(running / total)
        self.texts: list[tuple[str, str]] = []  # (subject, body) of every letter, for the baseline

    def _body(self, kind: str, sender: str, to: str) -> str:
        words = self.rng.choices(self.vocabulary, cum_weights=self.cumulative, k=30)
        code = f"E{self.rng.randint(0, 999_999):06d}"
        return f"{super()._body(kind, sender, to).strip()}\n{' '.join(words)}. Error code {code}."

    def _store(self, sender: str, to: str, kind: str, thread: str, subject: str, parent: Any, depth: int) -> Any:
        stored = super()._store(sender, to, kind, thread, subject, parent, depth)
        self.texts.append((stored.subject, stored.body))
        return stored


def _size(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def _bare_index(path: Path, texts: list[tuple[str, str]]) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(subject, body, tokenize='{TOKENIZER}')")
    db.executemany("INSERT INTO t(subject, body) VALUES (?, ?)", texts)
    db.commit()
    return db


def _bare_query(db: sqlite3.Connection, match: str, window: bool = True) -> int:
    """The least a ranked query with snippets does: with ``window``, over the newest
    RANK_WINDOW matches, as agentmail ranks; without, over every match. The snippets as
    agentmail makes them: highlight() of the body for the 20 letters shown only."""
    cutoff = db.execute(
        "SELECT rowid FROM t WHERE t MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?", (match, RANK_WINDOW - 1)
    ).fetchone()
    rows = db.execute(
        "SELECT rowid FROM t WHERE t MATCH ? AND rowid >= ? ORDER BY rank LIMIT 20",
        (match, cutoff[0] if cutoff and window else 0),
    ).fetchall()
    marked = db.execute(
        f"SELECT rowid, highlight(t, 1, '**', '**') FROM t WHERE t MATCH ? AND rowid IN ({','.join('?' * len(rows))})",
        (match, *[r[0] for r in rows]),
    ).fetchall()
    return len(marked)


def search(root: Path, settings: Settings) -> list[Figure]:
    tb = TempBus(root, PLATFORMS)
    builder = SearchSpool(tb)
    am = tb.client(OWNER)
    sizes = settings.scale_sizes
    kinds = ("rare", "common", "two", "filtered")
    warm: dict[str, dict[int, list[float]]] = {k: {} for k in kinds}
    bare: dict[str, dict[int, list[float]]] = {k: {} for k in kinds}
    hits: dict[str, dict[int, int]] = {k: {} for k in kinds}
    built: dict[int, float] = {}
    after_move: dict[int, float] = {}
    process: dict[int, float] = {}
    full_rank: dict[int, list[float]] = {}
    vocabulary = builder.vocabulary
    for size in sizes:
        builder.grow_to(size)
        am.close()
        start = time.perf_counter()  # the index made again from the letters' records (the rebuild's step)
        with builder.spool.db.write() as tx:
            index_rows.clear(tx)
            index_rows.fill(tx)
        built[size] = time.perf_counter() - start
        bare_db = _bare_index(root / f"bare-{size}.sqlite", builder.texts)
        code = builder.texts[len(builder.texts) // 2][1].rsplit(" ", 1)[-1].rstrip(".")  # one letter's error code
        queries: dict[str, tuple[str, dict[str, Any]]] = {
            "rare": (code, {}),
            "common": (vocabulary[0], {}),
            "two": (f"{vocabulary[20]} {vocabulary[40]}", {}),
            "filtered": (vocabulary[30], {"sender": "alpha", "type": "report"}),
        }
        for kind, (words, filters) in queries.items():
            hits[kind][size] = len(am.search(words, sync=False, **filters))  # warm-up
            match = " ".join(f'"{w}"' for w in words.split())
            _bare_query(bare_db, match)
            warm[kind][size], bare[kind][size] = [], []
            for _ in Runs(5 if settings.quick else SAMPLES, settings.budget):
                start = time.perf_counter()
                am.search(words, sync=False, **filters)
                warm[kind][size].append((time.perf_counter() - start) * 1e3)
                start = time.perf_counter()
                _bare_query(bare_db, match)
                bare[kind][size].append((time.perf_counter() - start) * 1e3)
        full_rank[size] = []
        for _ in Runs(1 if settings.quick else 3, settings.budget):
            start = time.perf_counter()
            _bare_query(bare_db, f'"{vocabulary[0]}"', window=False)
            full_rank[size].append((time.perf_counter() - start) * 1e3)
        bare_db.close()
        os.unlink(root / f"bare-{size}.sqlite")
        # A letter moved into read: nothing for the index to catch up on (it reads the spool's state).
        letter_id = builder.spool.read.ids("unread")[0]
        builder.spool.write.move(letter_id, "unread", "read")
        start = time.perf_counter()
        am.search(vocabulary[30], sync=False)
        after_move[size] = (time.perf_counter() - start) * 1e3
        builder.spool.write.move(letter_id, "read", "unread")
        builder.unread = builder.spool.read.ids("unread")
        process[size] = tb.timed(OWNER, "search", "--no-sync", vocabulary[30]) * 1e3
    am.close()
    tb.remove()
    figures = []
    for label, size in zip(("small", "middle", "large"), sizes, strict=True):
        by_kind = {k: median(warm[k][size]) for k in kinds}
        slowest = max(kinds, key=lambda k: by_kind[k])
        details = {
            "letters": size,
            "slowest_kind": slowest,
            "ms_by_kind": {k: round(v, 2) for k, v in by_kind.items()},
            "bare_ms_by_kind": {k: round(median(bare[k][size]), 2) for k in kinds},
            "hits_by_kind": {k: hits[k][size] for k in kinds},
            "runs_by_kind": {k: [round(x, 2) for x in warm[k][size]] for k in kinds},
            "bare_common_ranking_every_match_ms": round(median(full_rank[size]), 2),
            "index_build_seconds": round(built[size], 2),
            "first_search_after_a_move_ms": round(after_move[size], 1),
            "cli_process_ms": round(process[size], 1),
        }
        figures.append(
            Figure(
                f"search_{label}",
                f"8. search, warm, at {_size(size)} ({slowest})",
                "ms",
                by_kind[slowest],
                median(bare[slowest][size]),
                "bare FTS5",
                Target("value", "<=", 50.0, "<= 50 ms"),
                len(warm[slowest][size]),
                details,
            )
        )
    return figures
