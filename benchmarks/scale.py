"""Figure 6: whole-process CLI commands on spools of growing history.

Cost should follow the work, never the history: ``inbox --no-sync``, ``thread``, ``status`` and
``quarantine`` on the same platform at three sizes, the largest compared with the smallest.
``thread``, ``status`` and ``quarantine`` sync first (they have no --no-sync); the post office
holds nothing new, so that sync is the no-op an agent meets on most calls.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .common import Runs, Settings, TempBus
from .report import Figure, Target, median
from .spoolgen import OWNER, PLATFORMS, SpoolBuilder


def _size(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def scale(root: Path, settings: Settings) -> list[Figure]:
    tb = TempBus(root, PLATFORMS)
    builder = SpoolBuilder(tb)
    builder.grow_to(settings.scale_sizes[0])  # first, so that a thread exists to show
    commands = {
        "inbox": ("inbox", "--no-sync"),
        "thread": ("thread", builder.sample_thread),
        "status": ("status",),
        "quarantine": ("quarantine",),
    }
    times: dict[str, dict[int, list[float]]] = {name: {} for name in commands}
    spools: dict[str, dict[str, float]] = {}
    for size in settings.scale_sizes:
        builder.grow_to(size)
        spools[str(size)] = {**builder.stats(), "build_seconds": round(builder.seconds, 1)}
        synced = json.loads(tb.run(OWNER, "--json", "sync").stdout)  # also warms the page cache
        assert synced["accepted"] == synced["quarantined"] == 0, f"a sync had work to do: {synced}"
        for name, args in commands.items():
            if size == settings.scale_sizes[0]:
                tb.timed(OWNER, *args)  # warm-up: .pyc files, the interpreter's own pages
            times[name][size] = [tb.timed(OWNER, *args) * 1e3 for _ in Runs(settings.scale_runs, settings.budget)]
    start = time.perf_counter()
    tb.remove()
    cleanup = round(time.perf_counter() - start, 1)
    small, large = settings.scale_sizes[0], settings.scale_sizes[-1]
    target = Target("ratio", "<=", 1.5, f"<= 1.5x ({_size(large)}/{_size(small)})")
    figures = []
    for name in commands:
        by_size = {size: median(runs) for size, runs in times[name].items()}
        title = "inbox --no-sync" if name == "inbox" else name
        details = {
            "ms_by_size": {str(s): round(v, 1) for s, v in by_size.items()},
            "runs_by_size": {str(s): [round(x, 1) for x in r] for s, r in times[name].items()},
            "spools": spools,
            "cleanup_seconds": cleanup,
        }
        figures.append(
            Figure(
                f"scale_{name}",
                f"6. scale: {title} at {_size(large)}",
                "ms",
                by_size[large],
                by_size[small],
                f"at {_size(small)}",
                target,
                len(times[name][large]),
                details,
            )
        )
    return figures
