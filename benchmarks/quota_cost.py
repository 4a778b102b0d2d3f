"""The new-thread quota's count against the spool's history (issue 25; issue 28 target 0).

    python -m benchmarks.quota_cost [SIZES...]     # default: 100 10000

For each size, a fresh local bus; ``alpha`` sends that many threads dated two days ago (the
history: ``ages.clock`` moved back), then 20 in the last hour. Timed, alternating, median of
41: the count as main had it (``Spool.opened_since``, this home only: now the tests' oracle,
``tests/helpers/opened.py``), the count as it is now
(``client/quota.opened_times``: this home merged with the post office's markers of every
home), and a whole ``send()`` of one more thread (fsync off: the figure is the counting, not
the disk). Ratios are against the smallest size in the same run; no figure is asserted.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agentmail import ages
from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.client.quota import opened_times
from agentmail.config.identity import Identity
from tests.helpers.opened import opened_since

from .spoolgen import no_fsync

OPENER = (
    "I am the agent of alpha (billing); we call beta's /quota endpoint for every invoice.\n"
    "Reproduction: `curl -s https://beta.example/quota?id=7` returns status 500 since 2.4.1.\n"
    "Expected 200 per the documented contract.\n"
)
RUNS = 41


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def history(size: int, root: Path) -> AgentMail:
    """A home whose ``alpha`` sent ``size`` threads two days ago. Every size's history is made
    before any letter of now: letter ids are monotonic, one made now would pull later ones up."""
    home = root / f"home-{size}"
    reg = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test",
                   endpoints={"new_threads_per_hour": 1_000_000})  # fmt: skip
    alpha = AgentMail(reg, Identity("alpha"), home)
    past = time.time() - 2 * 86400
    ages.clock = lambda: past
    try:
        for i in range(size):
            alpha.send("beta", f"old {i}", OPENER)
    finally:
        ages.clock = None
    return alpha


def measure(alpha: AgentMail) -> dict[str, float]:
    for i in range(20):
        alpha.send("beta", f"new {i}", OPENER)
    before, after, send = [], [], []
    for i in range(RUNS):
        now = time.time_ns() // 1_000_000
        before.append(_ms(lambda now=now: opened_since(alpha.spool.read, now - 3_600_000)))
        after.append(_ms(lambda now=now: opened_times(alpha.spool, alpha.sender.transport, now)))
        send.append(_ms(lambda i=i: alpha.send("beta", f"timed {i}", OPENER)))
    counted = len(opened_times(alpha.spool, alpha.sender.transport, time.time_ns() // 1_000_000))
    assert counted == 20 + RUNS, counted
    return {"count_main_ms": statistics.median(before), "count_now_ms": statistics.median(after),
            "send_ms": statistics.median(send)}  # fmt: skip


def main(argv: list[str]) -> None:
    sizes = [int(x) for x in argv] or [100, 10_000]
    with tempfile.TemporaryDirectory() as tmp, no_fsync():
        homes = {size: history(size, Path(tmp)) for size in sizes}
        figures = {size: measure(alpha) for size, alpha in homes.items()}
    base = figures[sizes[0]]
    print(f"{'history':>8} {'count (main) ms':>16} {'count (now) ms':>15} {'send ms':>8}   ratios vs {sizes[0]}")
    for size, f in figures.items():
        ratios = " ".join(f"{f[k] / base[k]:.2f}" for k in ("count_main_ms", "count_now_ms", "send_ms"))
        print(f"{size:>8} {f['count_main_ms']:>16.3f} {f['count_now_ms']:>15.3f} {f['send_ms']:>8.3f}   {ratios}")


if __name__ == "__main__":
    main(sys.argv[1:])
