"""The archive (issue 42): a full write of a 10,000-letter spool, then the incremental run that
finds nothing changed, then one after a single new letter.

    python -m benchmarks.archive [--letters N] [--root DIR]

The spool is figure 6's (``spoolgen.py``: one platform's history with four peers, threads of
1-5 letters, 20 open, 5 forgeries), built in the spool's own format; the archive is written by
``agentmail.archive.site.write`` in process, as ``agentmail archive`` does after its sync. Prints
one JSON object: seconds per run, threads and letters written, the site's size on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from agentmail.admin import bus
from agentmail.archive import site
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry

from .spoolgen import OWNER, PLATFORMS, SpoolBuilder


class _Bus:
    """What ``SpoolBuilder`` needs of a bus (``common.TempBus`` without its installed CLI)."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.home.mkdir()
        self.registry: Registry = bus.init(self.home, self.home / "registry", list(PLATFORMS), domain="bus.test",
                                           endpoints={"new_threads_per_hour": 0})  # fmt: skip

    def client(self, platform: str) -> AgentMail:
        return AgentMail(self.registry, Identity(platform), self.home)


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def measure(root: Path, letters: int) -> dict[str, Any]:
    tb = _Bus(root)
    builder = SpoolBuilder(tb)  # type: ignore[arg-type]
    builder.grow_to(letters)
    os.environ["AGENTMAIL_HOME"] = str(tb.home)
    client = tb.client(OWNER)
    client.sync()
    out = root / "site"
    runs: dict[str, Any] = {}
    for name in ("full", "unchanged"):
        start = time.perf_counter()
        done = site.write([client], out, bus="bench", quarantine=True)
        runs[name] = {"seconds": round(time.perf_counter() - start, 2), "threads": done.threads,
                      "rewritten": done.rewritten, "letters": done.letters}  # fmt: skip
    peer = tb.client("alpha")
    peer.send(OWNER, "One more", "A new report, so one thread changes: I am alpha's agent; /quota fails.")
    client.sync()
    start = time.perf_counter()
    done = site.write([client], out, bus="bench", quarantine=True)
    runs["one_new_thread"] = {"seconds": round(time.perf_counter() - start, 2), "threads": done.threads,
                              "rewritten": done.rewritten, "letters": done.letters}  # fmt: skip
    for each in (client, peer):
        each.close()
    return {"spool_letters": builder.stats(), "runs": runs, "site_bytes": _size(out), "cpus": os.cpu_count(),
            "load_after": os.getloadavg()}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--letters", type=int, default=10_000)
    parser.add_argument("--root", type=Path, default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="archive-", dir=args.root))
    try:
        print(json.dumps(measure(root, args.letters), indent=1))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
