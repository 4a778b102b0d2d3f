"""Full-text search over one mailbox's letters (DESIGN §7, §8), on the index inside spool.db.

The index's rows (``words.py``: the ``found`` and FTS5 ``words`` tables) are written in the
transaction that files a letter, and read here with the letter's state from ``letters``: they
can never be out of step with the spool, so a search checks nothing first. They are a cache
like the spool's others: ``drop_caches`` and the rebuild make them again from the letters.

Queries are hostile input. By default the text is not FTS5 syntax: each word (or "quoted
phrase") becomes one quoted FTS5 phrase, all of them required (AND), a trailing ``*`` keeps a
prefix search; nothing a user types can be an operator or a column filter. ``syntax=True``
passes FTS5 query syntax through (AND/OR/NOT, NEAR, column:); it is parsed first against an
empty in-memory table, so a syntax error is ``BadInput`` (exit 2), never a storage error.
"""

from __future__ import annotations

import datetime
import re
import sqlite3
import time
from typing import TYPE_CHECKING, Any

from .._value import Frozen
from ..errors import BadInput
from ..model import check_filter_type, check_thread, ulid_floor
from ..text import FORBIDDEN
from .layout import STATES
from .words import BODY_LEAD, COLUMNS, TOKENIZER

if TYPE_CHECKING:
    from .views import SpoolReader

__all__ = ["BODY_LEAD", "COLUMNS", "TOKENIZER", "Hit", "Query", "SearchIndex", "since_ms", "to_fts"]

MAX_QUERY = 1000  # characters
MAX_TERMS = 32
MAX_LIMIT = 1000
SNIPPET_TOKENS = 12
RANK_WINDOW = 2000  # the newest letters matching the words that are ranked (see _search)
# bm25 column weights: subject, body, people, inherited, rest (a long body's words past
# BODY_LEAD: matched and ranked as the body's, never marked up for a snippet). A reply's "Re: ..." subject is the
# thread's, not its own title: it weighs as its body does, so the report that has a word in its
# subject and its body ranks above the short replies that only inherited it (bm25 normalises by
# the whole row's length, so a long report would otherwise lose to every one-line answer).
WEIGHTS = (8.0, 1.0, 2.0, 1.0, 1.0)
# The passage of a hit: the columns looked in for its first match, body first; the marks
# highlight() puts around a match (controls: text in the index never holds them, see _CONTROL's
# policy); how many words before the match it starts; how much text after it is read.
_SNIPPET_COLUMNS = (1, 0, 3, 2)  # body, subject, inherited, people
_MARKS = ("\x02", "\x03")
_LEAD_IN = 3
_LEAD_CHARS = 4096
_CONTROL = re.compile(f"[{FORBIDDEN}]")
_TERM = re.compile(r'"([^"]*)"?|(\S+)')
_DURATION = re.compile(r"^(\d{1,6})([mhdw])$")
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


class Query(Frozen):
    """What to look for. ``text``: words (or FTS5 syntax with ``syntax``); the filters narrow
    it; no words and at least one filter lists the matching letters, newest first."""

    text: str = ""
    sender: str | None = None  # a platform name or an address
    type: str | None = None
    thread: str | None = None
    since: str | None = None  # 2026-11-30, 2026-11-30T08:00 (UTC unless an offset), or 7d / 12h / 30m / 2w
    state: str | None = None
    limit: int = 20
    quarantine: bool = False  # quarantined letters too (``state="quarantine"`` implies it)
    syntax: bool = False


class Hit(Frozen):
    """One letter found: enough to choose which one to ``show``, and why it matched."""

    id: str
    state: str
    type: str
    sender: str
    to: str
    thread: str
    subject: str
    date: str
    severity: str | None
    reason: str | None
    score: float  # bm25 relevance, higher is better (0.0 when listing by filters alone)
    snippet: str  # the best-matching passage, matched terms in **double asterisks**

    def to_json(self) -> dict[str, Any]:
        """The documented ``search --json`` shape (DESIGN §8)."""
        return {
            "id": self.id,
            "state": self.state,
            "type": self.type,
            "from": self.sender,
            "to": self.to,
            "thread": self.thread,
            "subject": self.subject,
            "date": self.date,
            "severity": self.severity,
            "reason": self.reason,
            "score": self.score,
            "snippet": self.snippet,
        }


# --- query text -------------------------------------------------------------------------------


def to_fts(text: str) -> str | None:
    """User text as a safe FTS5 query: every word or "quoted phrase" one quoted phrase, all
    required; ``word*`` a prefix. None when the text has no word to look for."""
    text = _clean_query(text)
    terms = []
    for match in _TERM.finditer(text):
        phrase, word = match.group(1), match.group(2)
        prefix = False
        if word is not None:
            stripped = word.rstrip("*")
            prefix = stripped != word
            phrase = stripped.replace('"', " ")  # a stray quote inside a word separates, as in a phrase
        if not phrase or not any(ch.isalnum() for ch in phrase):
            continue  # punctuation alone is no token: an empty phrase would match nothing
        terms.append('"' + phrase.replace('"', '""') + '"' + ("*" if prefix else ""))
    if len(terms) > MAX_TERMS:
        raise BadInput(f"the query has {len(terms)} terms; at most {MAX_TERMS}")
    return " ".join(terms) or None


def _clean_query(text: str) -> str:
    if len(text) > MAX_QUERY:
        raise BadInput(f"the query is {len(text)} characters; at most {MAX_QUERY}")
    # Control characters go; a lone surrogate (undecodable argv bytes) becomes U+FFFD.
    return _CONTROL.sub(" ", text).encode("utf-8", "replace").decode("utf-8")


def since_ms(value: str, now: float | None = None) -> int:
    """``--since``: an ISO date or date-time (UTC unless it says), or a duration back from now."""
    value = value.strip()
    found = _DURATION.match(value)
    if found:
        seconds = int(found.group(1)) * _UNITS[found.group(2)]
        return int(((time.time() if now is None else now) - seconds) * 1000)
    try:
        when = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise BadInput(
            f"--since {value[:40]!r}: give a date (2026-11-30), a date-time (2026-11-30T08:00) or 7d / 12h / 30m / 2w"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(0, int(when.timestamp() * 1000))


def check_query(query: Query) -> None:
    """Refuse a bad filter with one line (exit 2) before anything is opened."""
    check_filter_type(query.type)
    if query.state is not None and query.state not in STATES:
        raise BadInput(f"unknown state {query.state!r}; one of: {', '.join(STATES)}")
    if query.thread is not None:
        check_thread(query.thread)
    if not 1 <= query.limit <= MAX_LIMIT:
        raise BadInput(f"--limit must be 1 to {MAX_LIMIT}")
    if query.sender is not None and (len(query.sender) > 320 or _CONTROL.search(query.sender)):
        raise BadInput("--from is a platform name or a mail address")
    if query.since is not None:
        since_ms(query.since)


# --- the index ----------------------------------------------------------------------------------


class SearchIndex:
    """The search index of one mailbox's spool: its tables in the spool's own database."""

    def __init__(self, spool: SpoolReader) -> None:
        self.spool = spool  # a reader: a search changes no letter
        self._checker: sqlite3.Connection | None = None

    def close(self) -> None:
        if self._checker is not None:
            self._checker.close()
        self._checker = None

    def search(self, query: Query) -> list[Hit]:
        """The letters that match, best first."""
        check_query(query)
        match = query.text if query.syntax else to_fts(query.text)
        if query.syntax:
            match = _clean_query(match or "").strip() or None
        if match is not None:
            self._check_syntax(match)
        elif not any((query.sender, query.type, query.thread, query.since, query.state)):
            raise BadInput(
                "nothing to search for: give words, or a filter (--from, --type, --thread, --since, --state)"
            )
        return self._search(self.spool.sql(), query, match)

    def _check_syntax(self, match: str) -> None:
        """Parse ``match`` against an empty table of the same shape: only the query can fail here."""
        if self._checker is None:
            self._checker = sqlite3.connect(":memory:", check_same_thread=False)
            self._checker.execute(f"CREATE VIRTUAL TABLE words USING fts5({COLUMNS}, tokenize='{TOKENIZER}')")
        try:
            self._checker.execute("SELECT rowid FROM words WHERE words MATCH ?", (match,)).fetchall()
        except sqlite3.Error as exc:
            raise BadInput(
                f"not a search query: {_one_line(str(exc))} (FTS5 syntax; drop --fts for plain words)"
            ) from None

    def _search(self, db: sqlite3.Connection, query: Query, match: str | None) -> list[Hit]:
        where, params = _filters(query)
        columns = (
            "l.seq, l.id, l.state, f.type, f.sender, f.recipient, f.thread, f.subject, f.date, f.severity, f.reason"
        )
        if match is None:
            rows = db.execute(
                f"SELECT {columns}, 0.0 FROM letters l JOIN found f ON f.seq = l.seq WHERE {where}"
                " ORDER BY l.id DESC LIMIT ?",
                (*params, query.limit),
            ).fetchall()
            snippets = {
                n: _lead(body)
                for n, body in db.execute(  # the lead of a huge body only: its first words are shown
                    f"SELECT rowid, substr(body, 1, {_LEAD_CHARS}) FROM words WHERE rowid IN ({','.join('?' * len(rows))})",
                    [r[0] for r in rows],
                )
            }
        else:
            # Ranking costs per matching letter (~4 µs, and a join per letter when filtered): a
            # word in most of a 100k history would take ~400 ms. So the newest RANK_WINDOW
            # letters matching the words are ranked (found in rowid order, which is filing
            # order, without ranking), and the filters narrow those; when they leave fewer hits
            # than asked for, the window widens fourfold until it holds every match.
            weights = ", ".join(map(str, WEIGHTS))
            lowest, highest = _bounds(db, query, params)
            window, rows = RANK_WINDOW, []
            while lowest <= highest:
                cutoff = db.execute(
                    "SELECT rowid FROM words WHERE words MATCH ? AND rowid BETWEEN ? AND ?"
                    " ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                    (match, lowest, highest, window - 1),
                ).fetchone()
                span = (max(lowest, cutoff[0] if cutoff else 0), highest)
                if any((query.sender, query.type, query.thread, query.since)):
                    rows = _ranked_joined(db, match, weights, span, columns, where, params, query.limit)
                else:
                    rows = _ranked(db, match, weights, span, columns, where, params, query.limit)
                if cutoff is None or len(rows) >= query.limit:
                    break
                window *= 4
            # Snippets for the letters shown only, not for every match that was ranked. Not
            # FTS5's snippet(): it scores every match against every other, so a word repeated
            # 9,000 times in one 900 KB letter took 2 s a search. highlight() marks the matches
            # of the bounded columns in about one pass; the passage is cut around the first.
            marked = ", ".join(f"highlight(words, {column}, ?, ?)" for column in _SNIPPET_COLUMNS)
            snippets = {
                row[0]: _passage(row[1:])
                for row in db.execute(
                    f"SELECT rowid, {marked} FROM words WHERE words MATCH ? AND rowid IN ({','.join('?' * len(rows))})",
                    (*_MARKS * len(_SNIPPET_COLUMNS), match, *[r[0] for r in rows]),
                )
            }
        return [
            Hit(
                id=r[1],
                state=r[2],
                type=r[3],
                sender=r[4],
                to=r[5],
                thread=r[6],
                subject=r[7],
                date=r[8],
                severity=r[9],
                reason=r[10],
                score=float(f"{-float(r[11]):.6g}") + 0.0,  # bm25 is lower-is-better; shown higher-is-better
                snippet=" ".join(str(snippets.get(r[0], "")).split()),
            )
            for r in rows
        ]


def _ranked_joined(
    db: sqlite3.Connection,
    match: str,
    weights: str,
    span: tuple[int, int],
    columns: str,
    where: str,
    params: list[Any],
    limit: int,
) -> list[tuple[Any, ...]]:
    """``_ranked`` for a query that filters by sender, type, thread or date: every match in
    ``span`` joined and ranked at once, since such a filter may pass few of the best matches."""
    return db.execute(
        f"SELECT {columns}, bm25(words, {weights}) AS score FROM words JOIN letters l ON l.seq = words.rowid"
        f" JOIN found f ON f.seq = words.rowid WHERE words MATCH ? AND {where} AND words.rowid BETWEEN ? AND ?"
        " ORDER BY score, l.id DESC LIMIT ?",
        (match, *params, *span, limit),
    ).fetchall()


def _ranked(
    db: sqlite3.Connection,
    match: str,
    weights: str,
    span: tuple[int, int],
    columns: str,
    where: str,
    params: list[Any],
    limit: int,
) -> list[tuple[Any, ...]]:
    """The best ``limit`` letters matching within ``span`` that pass the filters, best first
    (ties: newest id first), each row ``columns`` and its bm25 score.

    Ranked in the FTS table alone, then joined to ``letters`` and ``found`` only for the best
    few: the join per ranked letter was two thirds of a search's time (8.1 against 2.8 ms for a
    common word at 100k). The best ``taken`` by score, less those tied with the last one, are
    every match scoring below it; when the state filter leaves ``limit`` of them, no letter
    outside can rank above, else twice as many are taken, up to every match in the span."""
    taken = 2 * limit
    while True:
        best = db.execute(
            f"SELECT rowid, bm25(words, {weights}) AS score FROM words"
            " WHERE words MATCH ? AND rowid BETWEEN ? AND ? ORDER BY score LIMIT ?",
            (match, *span, taken),
        ).fetchall()
        every = len(best) < taken
        if not every:  # the last score may be shared by matches not taken: below it, all are in
            best = [b for b in best if b[1] < best[-1][1]]
        scores = dict(best)
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(best), 500):  # a statement of at most 500 parameters
            seqs = [b[0] for b in best[start : start + 500]]
            rows += [
                (*r, scores[r[0]])
                for r in db.execute(
                    f"SELECT {columns} FROM letters l JOIN found f ON f.seq = l.seq"
                    f" WHERE l.seq IN ({','.join('?' * len(seqs))}) AND {where}",
                    (*seqs, *params),
                )
            ]
        if every or len(rows) >= limit:
            rows.sort(key=lambda r: r[1], reverse=True)  # ties: the newest id first (stable sorts)
            rows.sort(key=lambda r: r[-1])
            return rows[:limit]
        taken *= 2


def _bounds(db: sqlite3.Connection, query: Query, params: list[Any]) -> tuple[int, int]:
    """The rowids a thread's or a --since query's letters lie between (rowids are filing
    order), so ranking never walks the rest of the history; (1, 0) when none can match."""
    lowest, highest = 0, 1 << 62
    if query.thread is not None:
        low, high = db.execute("SELECT min(seq), max(seq) FROM letters WHERE thread = ?", (query.thread,)).fetchone()
        lowest, highest = (low, high) if low is not None else (1, 0)
    if query.since is not None:
        floor = params[-1]  # _filters puts the --since bound last
        # seq + 0: no min() shortcut walking every rowid; the id index finds the range instead
        (first,) = db.execute("SELECT min(seq + 0) FROM letters WHERE id >= ?", (floor,)).fetchone()
        lowest = max(lowest, first) if first is not None else highest + 1
    return lowest, highest


def _filters(query: Query) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if query.state is not None:
        clauses.append("l.state = ?")
        params.append(query.state)
    elif not query.quarantine:
        clauses.append("l.state != 'quarantine'")
    if query.sender is not None:
        clauses.append("(f.sender = ? OR f.sender_address = ?)")
        params += [query.sender, query.sender.strip().lower()]
    if query.type is not None:
        clauses.append("f.type = ?")
        params.append(query.type)
    if query.thread is not None:
        clauses.append("f.thread = ?")
        params.append(query.thread)
    if query.since is not None:
        clauses.append("l.id >= ?")
        params.append(ulid_floor(since_ms(query.since)))  # the smallest id filed since then
    return " AND ".join(clauses) or "1", params


def _passage(columns: tuple[object, ...], words: int = SNIPPET_TOKENS) -> str:
    """About ``words`` words around the first match of the first column that has one (the
    columns as highlight() marked them), matched words in ``**``; "…" where the text was cut.
    A letter matched only past its BODY_LEAD shows its body's first words."""
    start, end = _MARKS
    for text in columns:
        text = str(text or "")
        at = text.find(start)
        if at < 0:
            continue
        before = text[:at].split()[-_LEAD_IN:]
        after = text[at : at + _LEAD_CHARS].split()
        taken = (before + after)[:words]
        cut_before = len(before) < len(text[:at].split())
        cut_after = len(before) + len(after) > words or at + _LEAD_CHARS < len(text)
        passage = " ".join(taken)
        if passage.count(start) > passage.count(end):
            passage += end  # a phrase cut by the window's end still closes its mark
        passage = passage.replace(start, "**").replace(end, "**")
        return ("…" if cut_before else "") + passage + ("…" if cut_after else "")
    return _lead(columns[0] if columns else "", words)


def _lead(body: object, words: int = SNIPPET_TOKENS) -> str:
    """The start of a body, as the snippet of a letter listed by filters alone."""
    parts = str(body or "").split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


def _one_line(text: str) -> str:
    return " ".join(_CONTROL.sub(" ", text).split())[:200]
