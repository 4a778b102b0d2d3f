"""Issue 28, target 4: one whole ``agentmail sync`` process filing a million letters.

Not one of the suite's figures (building and filing a million letters takes most of an hour on
2 cores): ``python -m benchmarks.million [--letters N] [--root DIR]``. The letters are figure
5's (``letters.iter_conversation``: two senders, 60% follow-ups, each really signed), written
into the post office's ``new/`` a slice at a time; then ``agentmail sync`` (the CLI as a user
has it) runs under ``local._PEAK_RSS``'s launcher, which reads the process's own peak resident
memory from ``wait4``. Prints one JSON line: the peak, the time, the rate, the load averages,
and what the spool takes per letter on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from . import letters
from .common import PYTHON, TempBus, scratch_root
from .local import _PEAK_RSS, _maildir


def _disk(path: Path) -> tuple[int, int, int]:
    """Files, their bytes, and the blocks they take (st_blocks: 512-byte units), under ``path``."""
    count = size = blocks = 0
    for folder, _, names in os.walk(path):
        for name in names:
            st = os.lstat(os.path.join(folder, name))
            count, size, blocks = count + 1, size + st.st_size, blocks + st.st_blocks
    return count, size, blocks * 512


def million(root: Path, count: int) -> dict[str, object]:
    tb = TempBus(root, ("alpha", "gamma", "beta"))
    new = _maildir(tb.home / "postoffice" / "beta") / "new"
    start = time.perf_counter()
    made = letters.make_into(
        tb.home, tb.registry.root, letters.iter_conversation(("alpha", "gamma"), "beta", count), new
    )
    os.sync()
    return {**filed(tb, made), "build_seconds": round(time.perf_counter() - start, 1)}


def filed(tb: TempBus, made: int) -> dict[str, object]:
    """The sync of the ``made`` letters waiting in beta's post office, in its own process."""
    load_before = os.getloadavg()
    start = time.perf_counter()
    out = subprocess.run(
        [PYTHON, "-c", _PEAK_RSS, *tb.command("beta", "sync")], env=tb.env, cwd=tb.home, capture_output=True
    )
    seconds = time.perf_counter() - start
    code, peak_kb = (int(x) for x in out.stdout.split())
    assert code == 0, f"sync exited {code}: {out.stderr.decode(errors='replace')[-2000:]}"
    spool = tb.home / "spool" / "beta"
    files, file_bytes, file_disk = _disk(spool)
    database = sum(p.stat().st_size for p in spool.glob("spool.db*"))
    return {
        "letters": made,
        "sync_seconds": round(seconds, 1),
        "letters_per_second": round(made / seconds),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "spool_files": files,
        "spool_db_bytes_per_letter": round(database / made),
        "spool_bytes_per_letter": round(file_bytes / made),  # the database and the letter files
        "spool_disk_per_letter": round(file_disk / made),  # blocks taken: a letter file is one 4 KB block
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.million")
    parser.add_argument("--letters", type=int, default=1_000_000)
    parser.add_argument("--root", type=Path, default=None, help="where to build (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the bus, print where")
    args = parser.parse_args()
    with scratch_root("agentmail-million-", args.root, args.keep) as root:
        print(json.dumps(million(root, args.letters)), flush=True)


if __name__ == "__main__":
    main()
