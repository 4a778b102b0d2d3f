"""The search index's rows inside spool.db (DESIGN §7): what a filed letter puts in it.

Two tables beside ``letters``, keyed by its filing number (``seq``), so a letter and its index
rows are written in one transaction (``SpoolWriter._insert``) and a state change needs no index
write at all (the state is read from ``letters``):

    found   the fields a search filters on and shows (sender, recipient, subject, date, ...)
    words   FTS5: subject · body (its first BODY_LEAD characters, what a snippet is cut from)
            · people (names, addresses, thread, ref, attachment names) · inherited (a reply's
            "Re: <the thread's subject>") · rest (the body past BODY_LEAD, up to INDEX_CHARS)

What is indexed of a letter: its subject, its people and its attachments' names and
descriptions (never their bytes), and its body's first INDEX_CHARS characters (1 MiB, the
default ``max_size``: every body of a default bus whole; words further into a bigger one are
not found). Both tables are caches: ``Spool.drop_caches`` empties them and the rebuild fills
them again from the letters' records (``fill``).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..model import strip_re

TOKENIZER = "porter unicode61 remove_diacritics 2"
COLUMNS = "subject, body, people, inherited, rest"
# A body's first BODY_LEAD characters are the part a snippet is cut from, so marking the
# matches for one costs the same for a 1 MB letter as for a 16 KB one; the rest is matched and
# ranked as the body's, never marked up.
BODY_LEAD = 16_384
INDEX_CHARS = 1_048_576  # of a body: what lies past it is not indexed
# The rest begins with the lead's last words again, so a phrase that straddles the cut (up to
# about this many characters of it before the cut) is still found, in the rest.
STRADDLE = 256

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS found(seq INTEGER PRIMARY KEY, type TEXT NOT NULL, sender TEXT NOT NULL,
  sender_address TEXT NOT NULL, recipient TEXT NOT NULL, thread TEXT NOT NULL, subject TEXT NOT NULL,
  date TEXT NOT NULL, severity TEXT, reason TEXT);
CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5({COLUMNS}, tokenize='{TOKENIZER}');
"""


def create(tx: sqlite3.Connection) -> None:
    for statement in SCHEMA.split(";"):
        if statement.strip():
            tx.execute(statement)


def put(tx: sqlite3.Connection, seq: int, data: dict[str, Any]) -> None:
    """Index the letter filed as ``seq`` whose record (meta) is ``data``."""

    def text(key: str) -> str:
        value = data.get(key)
        return value if isinstance(value, str) else ""

    tx.execute(
        "INSERT INTO found(seq, type, sender, sender_address, recipient, thread, subject, date, severity, reason)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            seq,
            text("type"),
            text("from"),
            text("sender_address").lower(),
            text("to"),
            text("thread"),
            text("subject"),
            text("date"),
            text("severity") or None,
            text("reason") or None,
        ),
    )
    people = [
        text(k) for k in ("from", "sender_address", "sender_name", "to", "to_address", "to_agent", "thread", "ref")
    ]
    for item in data.get("attachments") or ():
        if isinstance(item, dict):
            people += [str(item.get("name") or ""), str(item.get("description") or "")]
    body = text("body") + ("\n" + text("detail") if text("detail") else "")
    lead, rest = lead_and_rest(body[:INDEX_CHARS])
    if rest:
        tail = lead[-STRADDLE:]
        rest = tail[tail.find(" ") + 1 :] + rest if " " in tail else tail + rest
    subject, inherited = text("subject"), ""
    if text("in_reply_to") and strip_re(subject) != subject:  # a reply's "Re: <the thread's subject>"
        subject, inherited = "", subject
    tx.execute(
        f"INSERT INTO words(rowid, {COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
        (seq, subject, lead, " ".join(people), inherited, rest),
    )


def forget(tx: sqlite3.Connection, seq: int) -> None:
    tx.execute("DELETE FROM words WHERE rowid = ?", (seq,))
    tx.execute("DELETE FROM found WHERE seq = ?", (seq,))


def again(tx: sqlite3.Connection, letter_id: str, data: dict[str, Any]) -> None:
    """A letter's record changed (a quarantined letter released as the letter it is)."""
    row = tx.execute("SELECT seq FROM letters WHERE id = ?", (letter_id,)).fetchone()
    if row is not None:
        forget(tx, int(row[0]))
        put(tx, int(row[0]), data)


def clear(tx: sqlite3.Connection) -> None:
    tx.execute("DELETE FROM words")
    tx.execute("DELETE FROM found")


def fill(tx: sqlite3.Connection) -> int:
    """Index every letter from its record, in filing order (after ``clear``, or into a spool
    that had no index); a letter whose record cannot be read is left out. Returns how many."""
    count = 0
    for seq, meta in tx.execute("SELECT seq, meta FROM letters ORDER BY seq").fetchall():
        try:
            data = json.loads(meta) if meta else None
        except ValueError:
            data = None
        if isinstance(data, dict):
            put(tx, int(seq), data)
            count += 1
    return count


def lead_and_rest(body: str) -> tuple[str, str]:
    """``body`` cut at the last white space before BODY_LEAD (a word is never split in two)."""
    if len(body) <= BODY_LEAD:
        return body, ""
    cut = max(body.rfind(" ", 0, BODY_LEAD), body.rfind("\n", 0, BODY_LEAD))
    cut = cut if cut > 0 else BODY_LEAD
    return body[:cut], body[cut:]
