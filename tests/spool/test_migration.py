"""A spool written by the release before spool.db is converted once, on first use, and answers
exactly as before; a conversion killed at any of its steps is finished by the next start.

The spool in tests/data/spool-8664ef0.tar.gz was written by commit 8664ef0 (the per-file
layout) with tests/helpers/old_spool.py, which also recorded what that code answered about it
(``expected.json``: every letter's fields, state and bytes, threads, open threads, status,
reply claims, notes, checkpoints). Nothing here knows the old layout beyond its folder names.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import load

from ..helpers.old_spool import MAILBOXES, answers

FIXTURE = Path(__file__).parents[1] / "data" / "spool-8664ef0.tar.gz"
KILL_POINT = Path(__file__).parents[1] / "helpers" / "kill_point.py"
OLD_FOLDERS = (
    "unread",
    "read",
    "sent",
    "outbox",
    "held",
    "failed",
    "quarantine",
    "meta",
    "index",
    "threads",
    "annotations",
)
# The conversion's steps, in order, each reached once per mailbox (alpha, beta, beta@bob).
MIGRATION_POINTS = ("migration-rows", "migration-moving", "migration-moved", "migration-cleaned")


def _unpack(into: Path) -> dict[str, Any]:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(into, filter="data")
    expected: dict[str, Any] = json.loads((into / "expected.json").read_text())
    return expected


def _old_letters(home: Path) -> dict[str, bytes]:
    """mailbox/id -> bytes, from the old state folders."""
    found = {}
    for spool in (home / "spool").iterdir():
        for state in OLD_FOLDERS[:7]:
            for path in (spool / state).glob("*.eml") if (spool / state).is_dir() else []:
                found[f"{spool.name}/{path.stem}"] = path.read_bytes()
    return found


def _assert_converted(home: Path, letters: dict[str, bytes]) -> None:
    for spool in (home / "spool").iterdir():
        assert not [n for n in OLD_FOLDERS if (spool / n).exists()], spool.name
        assert not (spool / "checkpoint.json").exists()
    for key, raw in letters.items():
        mailbox, letter_id = key.split("/")
        assert (home / "spool" / mailbox / "letters" / f"{letter_id}.eml").read_bytes() == raw


def test_a_spool_of_the_release_before_is_converted_with_the_same_answers(tmp_path: Path, home: Path) -> None:
    expected = _unpack(tmp_path)
    letters = _old_letters(home)
    assert len(letters) >= 15 and expected["beta"]["states"]["quarantine"]  # the scene is what it claims
    assert any(x["replied_by"] for x in expected["beta@bob"]["letters"].values())
    assert expected["alpha"]["states"]["held"] and expected["alpha"]["states"]["failed"]

    assert answers(home) == expected
    _assert_converted(home, letters)
    assert answers(home) == expected  # once: the second opening converts nothing

    # Dedup came along: once caught up (bob had not fetched the forgery yet), the post office
    # read again from the start gives duplicates only.
    registry = load(home / "registry")
    for platform, agent in MAILBOXES:
        am = AgentMail(registry, Identity(platform, agent), home)
        caught_up = am.sync()
        assert caught_up.accepted == [] and len(caught_up.quarantined) == (am.me.mailbox == "beta@bob")
        am.spool.write.set_checkpoint("local", None)
        report = am.sync()
        assert (report.accepted, report.quarantined, report.skipped) == ([], [], 0), am.me.mailbox
        assert report.duplicates == report.fetched > 0
        am.close()


@pytest.mark.parametrize("point", MIGRATION_POINTS)
def test_a_conversion_killed_at_any_step_is_finished_by_the_next_start(tmp_path: Path, home: Path, point: str) -> None:
    expected = _unpack(tmp_path)
    letters = _old_letters(home)
    pristine = tmp_path / "pristine.tar"
    with tarfile.open(pristine, "w") as tar:
        tar.add(home, arcname="home")
    env = dict(os.environ, AGENTMAIL_HOME=str(home))
    for nth in (1, 2, 3):  # the step in alpha's, beta's, then beta@bob's conversion
        victim = subprocess.run(
            [sys.executable, str(KILL_POINT), "open", point, str(nth)], env=env, capture_output=True, timeout=300
        )
        assert victim.returncode == -signal.SIGKILL, (point, nth, victim.stderr[-2000:])
        assert answers(home) == expected, f"killed at {point} #{nth}"
        _assert_converted(home, letters)
        # the next kill lands on an unconverted spool again
        for child in home.iterdir():
            subprocess.run(["rm", "-rf", str(child)], check=True)
        with tarfile.open(pristine) as tar:
            tar.extractall(tmp_path, filter="data")
