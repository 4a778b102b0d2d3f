"""The openers of the hour as ``opener_keys_since`` returns them, at the edge the random
histories of test_openers.py seldom draw: two letters of one mailbox under one key (a letter
queued again under its Message-ID) count at the older one's time, whatever order the database
reads their rows in (each order of states is one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.model import opener_key, ulid_ms
from agentmail.spool.store import Spool

from .test_spool import NAMES, _letter


@pytest.mark.parametrize(("first", "then"), [("sent", "outbox"), ("outbox", "sent"), ("held", "sent")])
def test_two_letters_of_one_mailbox_under_one_key_count_at_the_older_ones_time(
    tmp_path: Path, first: str, then: str
) -> None:
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    letter, raw = _letter(1)
    older = beta.write.store(first, letter, raw)
    newer = beta.write.store(then, letter, raw)
    assert older.id < newer.id
    key = opener_key(letter.message_id)
    assert beta.read.opener_keys_since(0) == {key: ulid_ms(older.id)}
    assert beta.read.opener_key_set(0) == ({key}, ulid_ms(older.id))
