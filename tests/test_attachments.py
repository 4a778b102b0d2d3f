"""Attachments and patches (issue 13): built, signed, read back strictly, saved and applied."""

from __future__ import annotations

from pathlib import Path

from agentmail import attach
from agentmail.client import AgentMail

from .conftest import OPENER


def test_a_letter_with_attachments_arrives_with_them(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_bytes(b"line 1\nERROR boom\n")
    items = (
        attach.Attachment("run.log", "text/x-log", log.read_bytes()),
        attach.Attachment("shot.png", "image/png", bytes(range(256)) * 4, "the failing page"),
    )
    sent = alpha.send("beta", "Quota errors", OPENER, attachments=items)
    assert sent.state == "sent"
    [got] = beta.inbox()
    assert got.body == OPENER.strip()
    metas = got.extra["attachments"]
    assert [m["name"] for m in metas] == ["run.log", "shot.png"]
    assert metas[1]["size"] == 1024 and metas[1]["description"] == "the failing page"
    again = beta.attachments(got.id)
    assert again == tuple(attach.check(i) for i in items)
