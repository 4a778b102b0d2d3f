"""Figure 9: what one operation costs with a short and with a long history (issue 28, target 0).

Two buses in the same run, each with the scale figure's platform (``spoolgen``): one spool of
``history_sizes[0]`` letters (100), one of ``history_sizes[1]`` (100,000; 2,000 with
``--quick``). Rounds alternate between them, so load from other processes hits both alike.
Each round, in process, on each bus: a peer sends the platform a report (not timed), then
the platform's ``sync()`` files that one letter, ``reply()`` answers it, ``send()`` opens a
new thread (the new-thread quota on, with a cap the figure never reaches: it counts the last
hour's openers, and the history is older), and ``inbox``/``status``/``thread`` read
(``sync=False``). The figure per operation is the large spool's median over the small one's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import Settings, TempBus
from .report import Figure, Target, median, p95
from .spoolgen import OWNER, PEERS, PLATFORMS, SpoolBuilder

OPERATIONS = ("send", "reply", "sync_one", "inbox", "status", "thread")
QUOTA = 1_000_000  # the quota counts, and never refuses


def _size(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


class _Side:
    """One bus and its platform's spool at one size, with the clients the rounds use."""

    def __init__(self, root: Path, size: int) -> None:
        self.tb = TempBus(root, PLATFORMS, endpoints={"new_threads_per_hour": QUOTA})
        self.builder = SpoolBuilder(self.tb)
        self.builder.grow_to(size)
        self.stats = {**self.builder.stats(), "build_seconds": round(self.builder.seconds, 1)}
        self.me = self.tb.client(OWNER)
        self.peer = self.tb.client(PEERS[0])
        self.times: dict[str, list[float]] = {name: [] for name in OPERATIONS}
        synced = self.me.sync()  # the checkpoint is at the end: nothing to do
        assert not synced.accepted and not synced.quarantined, "the built spool's sync had work to do"

    def _timed(self, name: str, call: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        out = call()
        self.times[name].append((time.perf_counter() - start) * 1e3)
        return out

    def round(self, index: int) -> None:
        self.peer.send(OWNER, f"history round {index}", f"Round {index}: POST /v1/x returned 500.\n", type="report")
        report = self._timed("sync_one", self.me.sync)
        assert len(report.accepted) == 1, f"one letter was sent, {len(report.accepted)} filed"
        letter = self.me.show(report.accepted.ids_since(0)[0])
        answered = self._timed("reply", lambda: self.me.reply(letter, "Reproduced; fixing.", raise_refused=True))
        assert answered is not None and answered.state == "sent", answered
        sent = self._timed("send", lambda: self.me.send(PEERS[1], f"opened {index}", "GET /v2/y: 404 since today."))
        assert sent.state == "sent", sent
        self._timed("inbox", lambda: self.me.inbox(sync=False))
        self._timed("status", lambda: self.me.status(sync=False))
        self._timed("thread", lambda: self.me.thread(self.builder.sample_thread, sync=False))

    def close(self) -> None:
        self.me.close()
        self.peer.close()
        self.tb.remove()


def history(root: Path, settings: Settings) -> list[Figure]:
    small_n, large_n = settings.history_sizes
    # As many open threads at both sizes (spoolgen leaves exactly 20, what ``status`` lists)
    small, large = _Side(root, small_n), _Side(root, large_n)
    try:
        for side in (small, large):  # warm-up: the code paths' imports and caches, not counted
            side.round(-1)
            side.times = {name: [] for name in OPERATIONS}
        for index in range(settings.history_rounds):
            for side in (small, large) if index % 2 == 0 else (large, small):
                side.round(index)
    finally:
        spools = {str(small_n): small.stats, str(large_n): large.stats}
        small.close()
        large.close()
    target = Target("ratio", "<=", 1.2, f"<= 1.2x ({_size(large_n)}/{_size(small_n)})")
    figures = []
    for name in OPERATIONS:
        big, little = median(large.times[name]), median(small.times[name])
        details = {
            "ms_by_size": {str(small_n): round(little, 2), str(large_n): round(big, 2)},
            "p95_by_size": {str(n): round(p95(s.times[name]), 2) for n, s in ((small_n, small), (large_n, large))},
            "runs_by_size": {
                str(n): [round(x, 2) for x in s.times[name]] for n, s in ((small_n, small), (large_n, large))
            },
            "spools": spools,
        }
        title = name.replace("_", " ") if name != "sync_one" else "sync of one letter"
        figures.append(
            Figure(
                f"history_{name}",
                f"9. history: {title} at {_size(large_n)}",
                "ms",
                big,
                little,
                f"at {_size(small_n)}",
                target,
                len(large.times[name]),
                details,
            )
        )
    return figures
