"""The send's floor (issue 40): the quota's count and the credential scan, before and after, in one process.

    python -m benchmarks.send_floor [--small N] [--large N] [--runs N]

Two fresh local buses whose ``alpha`` sent ``--small`` (default 50) and ``--large`` (default
1,000) threads in the last hour; then ``--runs`` rounds (default 41), each timing in
alternation, on each bus: the count as a send made it before (this home's openers read with
the plain query, the post office's hour folders listed, their names parsed once a process) and
the count a long-lived process makes now (``client/quota.opened_count``: the window kept, a big
folder watched), both checked equal. Then the credential scan of a 2 KB report of prose
(``guards.body_refusal``) with the pre-check of before (one group of literals a pattern) and
of now (every group), alternated. Prints medians; no figure is asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agentmail.client import quota
from agentmail.client.facade import AgentMail
from agentmail.model import ulid_floor
from agentmail.stages import guards
from agentmail.transport import local
from agentmail.transport.local import WATCH_FROM, LocalTransport

from .quota_window import sent_in_the_hour

PROSE = (
    "".join(
        f"{i:02d} "
        + (
            "Observed: the burst limit never releases after the window resets; retries extend it again.",
            "Expected: the counter drops to zero at the window boundary and new requests pass.",
            "Reproduce: send 20 requests in one second, wait 61 seconds, send one more; it is refused.",
            "Version: tokengate 2.4.1, runflow client 0.9.3, default configuration, no proxy between.",
        )[i % 4]
        + "\n"
        for i in range(23)
    )[:2047]
    + "\n"
)


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


_LISTING: dict[int, LocalTransport] = {}  # per bus: the transport that lists, as a process did before


def _aggregate(alpha: AgentMail, cutoff: int) -> tuple[set[str], int | None]:
    """This home's part as it was read before: one aggregate of the window's rows, split."""
    text, low = (
        alpha.spool.db.conn()
        .execute(
            "SELECT group_concat(o.key, ''), min(o.ms) FROM openers o JOIN letters l ON l.id = o.id"
            " WHERE o.id >= ? AND o.ms >= ? AND l.state IN ('sent', 'outbox', 'held', 'sibling')",
            (ulid_floor(cutoff)[:10], cutoff),
        )
        .fetchone()
    )
    keys = {text[i : i + 16] for i in range(0, len(text or ""), 16)}
    return keys, None if low is None else int(low)


def _count_as_before(alpha: AgentMail, now: int) -> tuple[int, int | None]:
    """The count a send made before: the plain query, the hour folders listed (names parsed
    once a process, as before: the listing transport is kept)."""
    mine, oldest = _aggregate(alpha, now - quota.HOUR_MS)
    transport = alpha.sender.transport
    assert isinstance(transport, LocalTransport)
    listing = _LISTING.setdefault(
        id(alpha), LocalTransport(transport.postoffice, transport.platform, transport.resolve)
    )
    local.WATCH_FROM = 1 << 62  # never watched: listed at every count
    try:
        remote = listing.opener_keys_since(now - quota.HOUR_MS) or {}
    finally:
        local.WATCH_FROM = WATCH_FROM
    others = remote.keys() - mine
    times = [remote[k] for k in others] + ([] if oldest is None else [oldest])
    return len(mine) + len(others), min(times, default=None)


# The pre-check before this session: one group of literals a pattern, often punctuation.
_BEFORE = (
    ("PRIVATE KEY",), ("AKIA",), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), ("github_pat_",), ("glpat-",), ("npm_",),
    ("AIza",), ("k_live_", "k_test_"), ("xox",), ("sk-",), ("sk-",), ("eyJ",), (":", "="), ("=",), ("=",),
    ("pass", "pwd"), ("'", '"'), ("://",), ("authorization",),
)  # fmt: skip
_FOLDED = {15, 18}  # the groups above looked for lowercased


def _scan_before(text: str) -> str | None:
    folded = text.lower() if text.isascii() else None
    for n, ((pattern, what, _), needles) in enumerate(zip(guards._CREDENTIALS, _BEFORE, strict=True)):
        if guards._may_match(text, folded, needles, n in _FOLDED) and re.search(pattern, text):
            return what
    return None


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", type=int, default=50)
    ap.add_argument("--large", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=41)
    args = ap.parse_args(argv)
    sizes = (args.small, args.large)
    before: dict[int, list[float]] = {size: [] for size in sizes}
    after: dict[int, list[float]] = {size: [] for size in sizes}
    cpu = {"before": 0.0, "after": 0.0}
    with tempfile.TemporaryDirectory() as tmp:
        homes = {size: sent_in_the_hour(size, Path(tmp)) for size in sizes}
        os.sync()
        for size in sizes:  # the kept window and the watch made (a long-lived process's second count on)
            for _ in range(2):
                quota.opened_count(homes[size].spool, homes[size].sender.transport, time.time_ns() // 1_000_000)
        for i in range(args.runs):
            for size in sizes if i % 2 == 0 else reversed(sizes):
                alpha, now = homes[size], time.time_ns() // 1_000_000
                c0 = time.process_time()
                before[size].append(_ms(lambda alpha=alpha, now=now: _count_as_before(alpha, now)))
                c1 = time.process_time()
                after[size].append(
                    _ms(lambda alpha=alpha, now=now: quota.opened_count(alpha.spool, alpha.sender.transport, now))
                )
                cpu["before"] += c1 - c0
                cpu["after"] += time.process_time() - c1
                assert _count_as_before(alpha, now) == quota.opened_count(alpha.spool, alpha.sender.transport, now)
    scan_before: list[float] = []
    scan_after: list[float] = []
    assert _scan_before(PROSE) is None and guards.credential_in(PROSE) is None
    for i in range(args.runs * 10):
        pair = [(scan_before, _scan_before), (scan_after, guards.credential_in)]
        for out, fn in pair if i % 2 == 0 else reversed(pair):
            out.append(_ms(lambda fn=fn: fn(PROSE)) * 1000)
    print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} rounds, each pair interleaved in one process")
    print(f"{'sent in the hour':>18} {'count before ms':>16} {'count now ms':>13}")
    for size in sizes:
        print(f"{size:>18} {statistics.median(before[size]):>16.3f} {statistics.median(after[size]):>13.3f}")
    small_b, large_b = (statistics.median(before[s]) for s in sizes)
    small_a, large_a = (statistics.median(after[s]) for s in sizes)
    print(f"{'ratio large/small':>18} {large_b / small_b:>15.2f}x {large_a / small_a:>12.2f}x")
    print(f"CPU for all counts: before {cpu['before'] * 1000:.1f} ms, now {cpu['after'] * 1000:.1f} ms")
    print(
        f"credential scan of 2 KB of prose: before {statistics.median(scan_before):.1f} us, "
        f"now {statistics.median(scan_after):.1f} us"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
