"""One competing process for tests/system/test_concurrency.py.

    python consume_worker.py MODE PLATFORM AGENT OUT     (AGENTMAIL_HOME from the environment;
                                                         AGENT "-" for none)

Prints ``ready`` once AgentMail is built, then blocks until ``go`` arrives on stdin, so every
worker of a test starts at the same instant. Then:

- ``consume``: ``inbox(sync=False, consume=True, limit=10)`` until a call claims nothing and
  unread/ is empty; OUT gets the ids it claimed.
- ``done``: list unread ids (``inbox(sync=False, limit=10)``), ``done`` them, until none are
  listed; OUT gets the ids ``done`` reported as moved by this call.

  Both print ``first`` after their first call and wait for ``on``: the test releases them once
  every worker made one call, so the contention it proves never depends on scheduling.
- ``sync``: ``sync()`` in a loop until the file ``OUT.stop`` exists and a sync after that
  accepted nothing; OUT gets the Message-IDs it accepted and the duplicates it dropped.

OUT is written once, at the end, as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from agentmail.client.facade import AgentMail

_FIRST = [True]


def _barrier(*_: object) -> None:
    """After the first call only: say so and wait for the test's ``on``."""
    if _FIRST[0]:
        _FIRST[0] = False
        print("first", flush=True)
        if sys.stdin.readline().strip() != "on":
            raise SystemExit("no on")


def main() -> None:
    mode, platform, agent, out = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
    am = AgentMail.from_env(platform, agent=None if agent == "-" else agent)
    am.spool.ensure()
    from agentmail.trust import authenticity  # noqa: F401  (imported before the start line, not after)

    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go")
    result: dict[str, object] = {"pid": os.getpid()}
    if mode == "consume":
        claimed: list[str] = []
        while True:
            got = am.inbox(sync=False, consume=True, limit=10)
            claimed += [letter.id for letter in got]
            _barrier(claimed, got)
            if not got and not am.spool.read.ids("unread"):
                break
        result["ids"] = claimed
    elif mode == "done":
        moved: list[str] = []
        while True:
            listed = [letter.id for letter in am.inbox(sync=False, limit=10)]
            if not listed:
                break
            moved += am.done(*listed)
            _barrier(moved, listed)
        result["ids"] = moved
    elif mode == "sync":
        stop = out.with_name(out.name + ".stop")
        accepted: list[str] = []
        duplicates = skipped = rounds = 0
        while True:
            stopping = stop.exists()
            report = am.sync()
            rounds += 1
            accepted += [letter.message_id for letter in report.accepted]
            duplicates += report.duplicates
            skipped += report.skipped
            if report.quarantined:
                raise SystemExit(f"quarantined: {[(q.reason, q.detail) for q in report.quarantined]}")
            if stopping and not report.accepted:
                break
            if not report.accepted:
                time.sleep(0.002)
        result.update(accepted=accepted, duplicates=duplicates, skipped=skipped, rounds=rounds)
    else:
        raise SystemExit(f"unknown mode {mode}")
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
