"""A rebuild reads the ledger as hostile input (a torn or hand-edited file, a mistaken operator):
what it says was sent here is filed only when the bytes it names are this platform's own sent
letter, and a letter file that cannot be read as a plain file is left, never followed."""

from __future__ import annotations

import os
from pathlib import Path

from agentmail.config.registry import Registry
from agentmail.spool import ledger
from agentmail.spool.layout import _raw_key

from ..conftest import OPENER
from .test_rebuild_restores import _client, _lose_and_rebuild, views


def test_a_ledger_line_naming_a_received_letters_post_office_file_as_sent_here_files_nothing(
    registry: Registry, home: Path
) -> None:
    """A line says alpha sent letter X (``copy_by`` alpha) and points at beta's letter in alpha's
    own Maildir, with its true key: the bytes are found, but they are beta's letter to alpha,
    not alpha's sent one; the rebuild removes what it restored and files no letter X."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    beta.send("alpha", "Quota 500s", OPENER)
    alpha.sync()
    before = views(alpha)
    root = alpha.spool.root
    (theirs,) = [p for p in (home / "postoffice" / "alpha" / "cur").iterdir() if p.is_file()]
    raw = theirs.read_bytes()
    forged = "01JZZZZZZZZZZZZZZZZZZZZZZZ"
    notes = {
        "copy": os.path.relpath(theirs, root),
        "copy_key": _raw_key(raw),
        "copy_size": len(raw),
        "copies": [],
        "copy_by": alpha.spool.read.mailbox,
    }
    ledger.append(
        str(root),
        [ledger.line({"id": forged, "state": "sent", "seq": 99}), ledger.line({"id": forged, "set": notes})],
    )
    _lose_and_rebuild([alpha], [root])
    alpha = _client(home, "alpha")
    assert alpha.spool.read.locate(forged) is None
    assert f"{forged}.eml" not in os.listdir(root / "letters") + os.listdir(root / "tmp")
    assert views(alpha) == before


def test_a_fifo_in_place_of_a_letter_file_is_left_and_never_opened(registry: Registry, home: Path) -> None:
    """A co-tenant replaces a received letter's spool file with a FIFO: the rebuild never blocks
    on it (read without following, no FIFO opened) and leaves it; the letter is fetched again."""
    alpha, beta = _client(home, "alpha"), _client(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    root = beta.spool.root
    path = root / "letters" / f"{letter.id}.eml"
    path.unlink()
    os.mkfifo(path)
    _lose_and_rebuild([beta], [root])
    beta = _client(home, "beta")
    assert beta.spool.read.locate(letter.id) is None
    assert path.exists() and not path.is_file()  # left as it was
