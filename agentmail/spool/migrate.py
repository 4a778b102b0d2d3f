"""Convert a spool of the per-file layout (releases up to 8664ef0) to spool.db, once.

    old:  unread/ read/ sent/ outbox/ held/ failed/ quarantine/<id>.eml   (state = folder)
          meta/<id>.json  index/{msgid,raw,open,replied,annotations}/  threads/<thread>
          annotations/<id>.json  checkpoint.json

Three steps, each safe to repeat, under the spool's setup lock (other processes wait):

1. one transaction: the schema, a row per letter file (its state from its folder, its cached
   fields from meta/ when readable), the annotations and the checkpoints; the file's version
   says MOVING. A crash before the commit leaves no database: the next start begins again.
2. each letter file is renamed from its state folder into letters/ (never copied: a letter is
   in one place), the folders fsynced. A crash midway: the next start renames the rest.
3. one transaction: caches the old meta/ did not hold are rebuilt from the letter files, the
   old caches and the empty state folders removed, and the version set to CURRENT.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from .._fs import fsync_dir
from .db import reached
from .layout import STATES

OLD_CACHES = ("meta", "index", "threads", "annotations")
OLD_FILES = ("checkpoint.json",)
# The search index of releases before it moved into spool.db (a cache: removed, never read)
OLD_INDEX = ("search.sqlite", "search.sqlite-wal", "search.sqlite-shm", "search.sqlite-journal")


def has_old_layout(root: Path) -> bool:
    return any((root / name).exists() for name in (*STATES, *OLD_CACHES, *OLD_FILES))


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _letter_files(root: Path) -> list[tuple[str, str]]:
    """(id, state) of every letter file in the old state folders."""
    found = []
    for state in STATES:
        try:
            names = os.listdir(root / state)
        except FileNotFoundError:
            continue
        found += [(n[:-4], state) for n in names if n.endswith(".eml") and n[:-4].isalnum()]
    return found


def import_rows(root: Path, tx: sqlite3.Connection) -> bool:
    """Step 1 (inside the caller's transaction); False when there is nothing to convert."""
    if not has_old_layout(root):
        return False
    for letter_id, state in sorted(_letter_files(root)):  # ids sort by creation: the filing order
        meta = _json(root / "meta" / f"{letter_id}.json")
        if meta is not None:
            meta.pop("state", None)
        tx.execute(
            "INSERT OR IGNORE INTO letters(id, state, meta) VALUES(?, ?, ?)",
            (letter_id, state, None if meta is None else json.dumps(meta)),
        )
    for folder in (root / "index" / "annotations", root / "annotations"):  # the newer wins
        for name in sorted(os.listdir(folder)) if folder.is_dir() else []:
            notes = _json(folder / name) if name.endswith(".json") else None
            if notes is not None:
                tx.execute("INSERT OR REPLACE INTO notes(id, data) VALUES(?, ?)", (name[:-5], json.dumps(notes)))
    for transport, value in (_json(root / "checkpoint.json") or {}).items():
        if isinstance(value, str):
            tx.execute("INSERT OR REPLACE INTO checkpoints(transport, value) VALUES(?, ?)", (transport, value))
    return True


def move_files(root: Path) -> None:
    """Step 2: every letter file from its state folder into letters/, durably."""
    (root / "letters").mkdir(exist_ok=True, mode=0o700)
    (root / "tmp").mkdir(exist_ok=True, mode=0o700)
    for moved, (letter_id, state) in enumerate(_letter_files(root)):
        os.rename(root / state / f"{letter_id}.eml", root / "letters" / f"{letter_id}.eml")
        if moved == 0:
            reached("migration-moving")
    fsync_dir(root / "letters")
    for state in STATES:
        if (root / state).is_dir():
            fsync_dir(root / state)
    reached("migration-moved")


def remove_old(root: Path) -> None:
    """Step 3's clean-up (its rows are committed: nothing here is needed any more)."""
    for name in OLD_CACHES:
        shutil.rmtree(root / name, ignore_errors=True)
    for name in OLD_FILES:
        (root / name).unlink(missing_ok=True)
    for state in STATES:
        try:
            (root / state).rmdir()
        except FileNotFoundError:
            pass
        except OSError:  # something that is no letter of ours was left there: kept for a person
            pass


def remove_old_index(root: Path) -> None:
    """The search index that lay beside spool.db: its rows are made again inside it."""
    for name in OLD_INDEX:
        (root / name).unlink(missing_ok=True)
