"""The new-thread quota's cost against the hour's traffic (issue 40: target ≤ 1.2x).

    python -m benchmarks.quota_window [--small N] [--large N] [--runs N] [--no-fsync]

Two fresh local buses in one run; on each, ``alpha`` first sends ``--small`` (default 50) or
``--large`` (default 1,000) threads in the last hour (fsync off while they are made), then the
two are timed in alternation, ``--runs`` rounds (default 41): the count a send makes
(``client/quota.opened_count``; ``opened_times`` on a release before it:
this home's letters merged with the post office's markers) and a whole ``send()`` of one more
thread (with its fsyncs, unless ``--no-fsync``). Each timed send adds one letter, so the small
bus is timed at 50-91 letters sent in the hour and the large one at 1,000-1,041. Prints the
medians and the ratios large / small; no figure is asserted. The quota is lifted (a cap of a
million, never reached), as a busy platform would have it: the count is made on every send.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from agentmail.admin import bus
from agentmail.client import quota
from agentmail.client.facade import AgentMail
from agentmail.client.quota import opened_times
from agentmail.config.identity import Identity

from .spoolgen import no_fsync

OPENER = (
    "I am the agent of alpha (billing); we call beta's /quota endpoint for every invoice.\n"
    "Reproduction: `curl -s https://beta.example/quota?id=7` returns status 500 since 2.4.1.\n"
    "Expected 200 per the documented contract.\n"
)


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def sent_in_the_hour(size: int, root: Path) -> AgentMail:
    """A home whose ``alpha`` sent ``size`` threads just now."""
    home = root / f"home-{size}"
    reg = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test",
                   endpoints={"new_threads_per_hour": 1_000_000})  # fmt: skip
    alpha = AgentMail(reg, Identity("alpha"), home)
    with no_fsync():
        for i in range(size):
            alpha.send("beta", f"earlier {i}", OPENER)
    return alpha


def _count(alpha: AgentMail) -> int:
    """The count a send makes: ``opened_count`` (a release before it: ``opened_times``)."""
    now = time.time_ns() // 1_000_000
    counting = getattr(quota, "opened_count", None)
    if counting is None:
        return len(opened_times(alpha.spool, alpha.sender.transport, now))
    return int(counting(alpha.spool, alpha.sender.transport, now)[0])


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", type=int, default=50)
    ap.add_argument("--large", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=41)
    ap.add_argument("--no-fsync", action="store_true", help="time the sends without fsync (the count alone)")
    args = ap.parse_args(argv)
    sizes = (args.small, args.large)
    with tempfile.TemporaryDirectory() as tmp:
        homes = {size: sent_in_the_hour(size, Path(tmp)) for size in sizes}
        os.sync()
        count: dict[int, list[float]] = {size: [] for size in sizes}
        send: dict[int, list[float]] = {size: [] for size in sizes}
        with no_fsync() if args.no_fsync else nullcontext():
            for i in range(args.runs):
                for size in sizes if i % 2 == 0 else reversed(sizes):
                    alpha = homes[size]
                    count[size].append(_ms(lambda alpha=alpha: _count(alpha)))
                    send[size].append(_ms(lambda alpha=alpha, i=i: alpha.send("beta", f"timed {i}", OPENER)))
        counted = {size: _count(homes[size]) for size in sizes}
    for size in sizes:  # the count counts what was sent: the figure is of the real thing
        if counted[size] != size + args.runs:
            raise SystemExit(f"quota_window: {counted[size]} threads counted at {size}, not {size + args.runs}")
    load = os.getloadavg()[0]
    print(f"load average {load:.2f}; {args.runs} rounds; sends {'without' if args.no_fsync else 'with'} fsync")
    print(f"{'sent in the hour':>18} {'count ms':>9} {'send ms':>8}")
    medians = {size: (statistics.median(count[size]), statistics.median(send[size])) for size in sizes}
    for size in sizes:
        span = f"{size}-{size + args.runs}"
        print(f"{span:>18} {medians[size][0]:>9.3f} {medians[size][1]:>8.3f}")
    small, large = medians[sizes[0]], medians[sizes[1]]
    print(
        f"{'ratio large/small':>18} {large[0] / small[0]:>8.2f}x {large[1] / small[1]:>7.2f}x   (target for a send: <= 1.2x)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
