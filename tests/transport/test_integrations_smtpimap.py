"""MCP, hooks and watch on the smtp+imap transport (in-process servers on 127.0.0.1)."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentmail.cli.app import main
from agentmail.cli.watch import Watcher
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity

from ..cli.test_mcp import call, session
from ..conftest import OPENER
from ..mailservers import MailServers
from .test_transport_smtpimap import make_bus, servers  # noqa: F401  (the fixture)


def test_hooks_mcp_and_watch_work_over_smtp_and_imap(
    home: Path,
    servers: MailServers,
    tmp_path: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: Any,
) -> None:
    reg = make_bus(home, servers)
    with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
        sent = alpha.send("beta", "Quota 500s", OPENER)
        assert sent.state == "sent"

        stop = {
            "session_id": "s",
            "transcript_path": "/t.jsonl",
            "cwd": str(tmp_path),
            "hook_event_name": "Stop",
            "stop_hook_active": False,
        }
        monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(stop)))
        assert main(["--as", "beta", "hook", "claude", "stop"]) == 0
        assert "Quota 500s" in json.loads(capsys.readouterr().out)["reason"]

        async def scenario(client: Any) -> None:
            failed, letters = await call(client, "inbox")
            assert not failed and [x["thread"] for x in letters["items"]] == [sent.thread]

        session(home, tmp_path, "--as", "beta")(scenario)

        out = tmp_path / "runs.txt"
        watcher = Watcher(beta, f'echo "$AGENTMAIL_THREAD" >> {out}', log=lambda _: None)
        watcher.slice = 1.0  # so stop() from this thread is seen quickly
        runner = threading.Thread(target=watcher.run, kwargs={"timeout": 20})
        runner.start()
        try:
            deadline = time.monotonic() + 10
            while not out.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            second = alpha.send("beta", "Another", OPENER)  # arrives while the watcher waits (IDLE)
            while len(out.read_text().split()) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            watcher.stop()
            runner.join()
        assert out.read_text().split() == [sent.thread, second.thread]
