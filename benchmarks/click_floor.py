"""The least a click CLI can do for ``inbox --no-sync``: figure 3a's floor.

    python click_floor.py --as PLATFORM inbox --no-sync    # AGENTMAIL_HOME names the spools

One command in one group, parsed by click; the mailbox's unread rows read from its SQLite
spool and printed raw. No registry, no checkout, no rendering: what is
left between this and ``agentmail inbox --no-sync`` is agentmail's own.
"""

from __future__ import annotations

import json
import os
import sqlite3

import click


@click.group()
@click.option("--as", "platform", required=True)
@click.pass_context
def main(ctx: click.Context, platform: str) -> None:
    ctx.obj = os.path.join(os.environ["AGENTMAIL_HOME"], "spool", platform, "spool.db")


@main.command()
@click.option("--no-sync", is_flag=True)
@click.pass_obj
def inbox(path: str, no_sync: bool) -> None:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    for row in db.execute("SELECT * FROM letters WHERE state = 'unread' ORDER BY seq"):
        click.echo(json.dumps([str(cell) for cell in row]))
    db.close()


if __name__ == "__main__":
    main()
