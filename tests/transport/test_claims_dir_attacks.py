"""Attacks on the post office's ``.claims/`` folder itself (reply claims and a stall's claims
share it), by a co-tenant of the local post office: the folder or its lock replaced by a file, a
folder, a link or a FIFO. A claim then fails as the post office's failure (exit 5, one line),
never as "not found" with an operating system's words, nor with a traceback: a reply is queued as
when a server cannot be asked, and leaves once the folder is usable again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.errors import TransportError
from agentmail.transport.claim_marks import Claims

from ..conftest import OPENER, Cli

KINDS = ["folder as a file", "lock as a folder", "lock as a link", "lock as a fifo"]


def _plant(claims: Path, kind: str) -> None:
    if kind == "folder as a file":
        claims.write_bytes(b"x")
        return
    claims.mkdir(parents=True)
    if kind == "lock as a folder":
        (claims / ".lock").mkdir()
    elif kind == "lock as a link":
        (claims / ".lock").symlink_to("/dev/null")
    else:
        os.mkfifo(claims / ".lock")


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_claims_folder_or_lock_is_the_post_offices_failure(tmp_path: Path, kind: str) -> None:
    claims = Claims(tmp_path / ".claims")
    _plant(claims.root, kind)
    if kind == "lock as a fifo":  # a FIFO opened read-write never waits: it locks as a file does
        assert claims.claim("<named@x>", "beta R1") is None
        return
    with pytest.raises(TransportError, match=r"^the post office's claims \(.*\.claims\) cannot be used \("):
        claims.claim("<named@x>", "beta R1")


@pytest.mark.parametrize("kind", KINDS)
def test_a_reply_through_a_planted_claims_folder_fails_in_one_line_with_exit_5(
    alpha: AgentMail, beta: AgentMail, home: Path, cli: Cli, kind: str
) -> None:
    alpha.send("beta", "Quota 500s", OPENER)
    (got,) = beta.inbox()
    _plant(home / "postoffice" / "beta" / ".claims", kind)
    code, out, err = cli("--as", "beta", "reply", got.id, "-b", "Reproduced.")
    if kind == "lock as a fifo":
        assert code == 0 and err == "", err
        return
    # as when a server cannot be asked: queued, said, claimed when it is submitted
    assert code == 5 and out.split()[-1] == "queued" and "post office's claims" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 2, err
    planted = home / "postoffice" / "beta" / ".claims"
    if planted.is_file():
        planted.unlink()
    else:
        lock = planted / ".lock"
        lock.rmdir() if lock.is_dir() and not lock.is_symlink() else lock.unlink()
    code, _, err = cli("--as", "beta", "flush")
    assert code == 0, err
    assert [x.state for x in beta.sent()] == ["sent"]  # once
