"""The least an argparse CLI can do for ``inbox --no-sync``: figure 3a's floor.

    python argparse_floor.py --as PLATFORM inbox --no-sync    # AGENTMAIL_HOME names the spools

One command in one group, parsed by the standard library's argparse (as agentmail's CLI is); the
mailbox's unread rows read from its SQLite spool and printed raw. No registry, no checkout, no
rendering: what is left between this and ``agentmail inbox --no-sync`` is agentmail's own.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3


def main() -> None:
    parser = argparse.ArgumentParser(prog="agentmail")
    parser.add_argument("--as", dest="platform", required=True)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("inbox").add_argument("--no-sync", action="store_true")
    args = parser.parse_args()
    path = os.path.join(os.environ["AGENTMAIL_HOME"], "spool", args.platform, "spool.db")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    for row in db.execute("SELECT * FROM letters WHERE state = 'unread' ORDER BY seq"):
        print(json.dumps([str(cell) for cell in row]))
    db.close()


if __name__ == "__main__":
    main()
