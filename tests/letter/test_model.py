"""Locally generated ids: ULIDs that sort by creation, thread ids of a fixed shape."""

from __future__ import annotations

import re
import threading

from agentmail.model import THREAD_RE, new_thread_id, new_ulid


def test_ulids_are_unique_sorted_and_well_formed() -> None:
    ids = [new_ulid() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)  # monotonic within a millisecond too
    assert all(re.fullmatch(r"[0-7][0-9a-hjkmnp-tv-z]{25}", i) for i in ids)


def test_ulids_from_many_threads_never_collide() -> None:
    found: list[str] = []

    def make() -> None:
        found.extend(new_ulid() for _ in range(2_000))

    workers = [threading.Thread(target=make) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(set(found)) == 16_000


def test_thread_ids_match_the_fixed_pattern() -> None:
    assert all(THREAD_RE.fullmatch(new_thread_id()) for _ in range(1000))
