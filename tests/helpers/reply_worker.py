"""One agent of a platform answering letters, for the cross-process reply-claim test.

    python reply_worker.py PLATFORM AGENT OUT MESSAGE-ID...   (AGENTMAIL_HOME from the environment)

Syncs its mailbox and finds its own copy of each letter (by Message-ID), prints ``ready``, then
blocks until ``go`` arrives on stdin, so the workers of a test start at the same instant. Then
it answers every letter, in the order given, through the real CLI entry point
(``agentmail --as PLATFORM --agent AGENT reply ID -b ...``), and writes to OUT, as JSON, one
``{"message_id", "exit", "stderr"}`` per letter.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

from agentmail.cli import app as cli
from agentmail.client.facade import AgentMail


def main() -> None:
    platform, agent, out, wanted = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4:]
    am = AgentMail.from_env(platform, agent=agent)
    am.sync()
    ids = {letter.message_id: letter.id for letter in am.inbox(sync=False)}
    missing = [m for m in wanted if m not in ids]
    if missing:
        raise SystemExit(f"{agent} did not receive {missing}")
    from agentmail.letter import wire  # noqa: F401  (loaded before the start line)

    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go")
    results = []
    for message_id in wanted:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(
                [
                    "--as",
                    platform,
                    "--agent",
                    agent,
                    "reply",
                    ids[message_id],
                    "-b",
                    f"Reproduced by {agent}; fixing.",
                    "-t",
                    "ack",
                ]
            )
        results.append({"message_id": message_id, "exit": code, "stderr": err.getvalue()})
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "results": results}))
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
