"""Issue 28, target 4: ``inbox``, ``thread``, ``status`` and ``search`` at a million letters.

Not one of the suite's figures (a million-letter spool takes ~10 minutes to build):
``python -m benchmarks.millionreads [--sizes 1000 100000 1000000] [--root DIR]``. Two buses of
the search figure's platform (``search.SearchSpool``: the scale spool, 20 open threads at every
size, bodies of Zipf-distributed words): one stays at the smallest size, the other grows
through the sizes. At each size, rounds alternate between them (load from other processes hits
both alike): in process, ``sync=False``, the client warm. Prints one JSON line per size: the
medians, each one's ratio to the small bus's in the same rounds, and the load averages.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity

from .common import TempBus, hermetic_environ, scratch_root
from .report import median
from .search import SearchSpool, _words
from .spoolgen import OWNER, PLATFORMS

ROUNDS = 15


class _Side:
    """One bus: built here (``SearchSpool``), or one built by an earlier run (``home``)."""

    def __init__(self, root: Path, home: Path | None = None) -> None:
        self.builder: SearchSpool | None = None
        if home is None:
            tb = TempBus(root, PLATFORMS)
            self.builder, self.home, self.registry = SearchSpool(tb), tb.home, tb.registry
        else:
            self.home, self.registry = home, registry_mod.load(home / "registry")
        self.vocabulary = _words(random.Random(5))  # SearchSpool's
        self.me = AgentMail(self.registry, Identity(OWNER), self.home)

    def grow(self, size: int) -> None:
        assert self.builder is not None
        self.me.close()
        self.builder.grow_to(size)
        self.builder.texts.clear()  # the suite's bare baseline reads them; not here
        self.me = AgentMail(self.registry, Identity(OWNER), self.home)

    def reads(self) -> dict[str, Callable[[], Any]]:
        words, me = self.vocabulary, self.me
        # a closed five-letter thread (the builder's sample): the same one at every size
        (thread,) = (
            me.spool.db.conn()
            .execute(
                "SELECT thread FROM letters WHERE type='close' AND json_extract(meta, '$.depth')=4 ORDER BY seq LIMIT 1"
            )
            .fetchone()
        )
        return {
            "inbox": lambda: me.inbox(sync=False),
            "thread": lambda: me.thread(thread, sync=False),
            "status": lambda: me.status(sync=False),
            "search_common": lambda: me.search(words[0], sync=False),
            "search_two": lambda: me.search(f"{words[20]} {words[40]}", sync=False),
            "search_filtered": lambda: me.search(words[30], sync=False, sender="alpha", type="report"),
            "search_rare": lambda: me.search(words[-1], sync=False),  # ~1 letter in 1,500
            # a code: a letter's body ends in one of a million (at most ~1 hit at any size)
            "search_code": lambda: me.search("E123456", sync=False),
        }


def _timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1e3


def measure(small: _Side, large: _Side) -> dict[str, Any]:
    """Rounds alternating between the buses; the medians and their ratios."""
    calls = {"small": small.reads(), "large": large.reads()}
    names = list(calls["small"])
    times: dict[str, dict[str, list[float]]] = {"small": {n: [] for n in names}, "large": {n: [] for n in names}}
    for side in calls.values():  # warm-up: the index's pages, the code paths
        for call in side.values():
            call()
    load_before = os.getloadavg()
    for index in range(ROUNDS):
        for label in ("small", "large") if index % 2 == 0 else ("large", "small"):
            for name, call in calls[label].items():
                times[label][name].append(_timed(call))
    count = "SELECT count(*) FROM letters"
    return {
        "letters": large.me.spool.db.conn().execute(count).fetchone()[0],
        "small_letters": small.me.spool.db.conn().execute(count).fetchone()[0],
        "open_threads": len(large.me.spool.read.open_threads()),
        "small_open_threads": len(small.me.spool.read.open_threads()),
        "spool_db_bytes_per_letter": round(
            (large.me.spool.root / "spool.db").stat().st_size / large.me.spool.db.conn().execute(count).fetchone()[0]
        ),
        "ms": {n: round(median(times["large"][n]), 3) for n in names},
        "small_ms": {n: round(median(times["small"][n]), 3) for n in names},
        "ratio": {n: round(median(times["large"][n]) / median(times["small"][n]), 2) for n in names},
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


def reads(root: Path, sizes: list[int]) -> None:
    small, large = _Side(root), _Side(root)
    small.grow(sizes[0])
    (root / "sides.json").write_text(json.dumps({"small": str(small.home), "large": str(large.home)}))
    for size in sizes:
        large.grow(size)
        assert large.builder is not None
        print(json.dumps({**measure(small, large), "build_seconds": round(large.builder.seconds, 1)}), flush=True)
    small.me.close()
    large.me.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.millionreads")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000, 1_000_000])
    parser.add_argument("--root", type=Path, default=None, help="where to build (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the buses (for --measure), print where")
    parser.add_argument("--measure", type=Path, default=None, metavar="DIR", help="measure a kept run's buses again")
    args = parser.parse_args()
    if args.measure:
        sides = json.loads((args.measure / "sides.json").read_text())
        with hermetic_environ(args.measure):
            print(
                json.dumps(
                    measure(_Side(args.measure, Path(sides["small"])), _Side(args.measure, Path(sides["large"])))
                )
            )
        return
    with scratch_root("agentmail-reads-", args.root, args.keep) as root:
        reads(root, args.sizes)


if __name__ == "__main__":
    main()
