"""``click_floor.py`` with the standard library's argparse instead of click: figure 3a's floor
if the CLI were built on argparse (what replacing click would leave to agentmail's own work).

    python argparse_floor.py --as PLATFORM inbox --no-sync    # AGENTMAIL_HOME names the spools
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
