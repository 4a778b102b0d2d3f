"""The benchmark suite runs end to end (``--quick``) and writes every figure; speed is not judged here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..depth import THOROUGH

REPO = Path(__file__).resolve().parents[2]
FIGURES = {
    "warm_latency",
    "cli_round_trip",
    "startup_inbox",
    "startup_help",
    "send_throughput",
    "sync_throughput",
    "sync_memory",
    "scale_inbox",
    "scale_thread",
    "scale_status",
    "scale_quarantine",
    "history_send",
    "history_reply",
    "history_sync_one",
    "history_inbox",
    "history_status",
    "history_thread",
    "search_small",
    "search_middle",
    "search_large",
    "search_big_letters",
    "search_after_new_letters",
    "smtpimap_latency",
    "smtpimap_send",
    "live_drill",
}


def _run(tmp_path: Path, *argv: str, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m ARGV`` from the repository, its temp files in ``tmp_path/tmp`` (left empty)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.mark.skipif(not THOROUGH, reason="a minute of benchmarks: CI runs it (AGENTMAIL_TESTS=thorough)")
@pytest.mark.timeout(600)  # one process after another: on a loaded shared machine well past two minutes
def test_quick_run_writes_every_figure_with_its_baseline(tmp_path: Path) -> None:
    out, tmp, user_home = tmp_path / "figures.json", tmp_path / "tmp", tmp_path / "user"
    user_home.mkdir()
    done = _run(tmp_path, "benchmarks", "--quick", "--json-out", str(out), timeout=600, HOME=str(user_home))
    data = json.loads(out.read_text())
    assert data["mode"] == "quick"
    assert {"cores", "python", "interpreter"} <= set(data["machine"])
    figures = {f["key"]: f for f in data["figures"]}
    assert set(figures) == FIGURES
    for key, figure in figures.items():
        if figure["skipped"]:
            assert key.startswith(("smtpimap_", "live_")), f"{key} was skipped: {figure['skipped']}"
            continue
        assert figure["value"] > 0 and figure["baseline"] > 0, key
        assert figure["ratio"] == figure["value"] / figure["baseline"], key
        assert figure["runs"] >= 1, key
    for figure in data["figures"]:
        assert figure["title"] in done.stdout  # the table names every figure
    floors = figures["startup_inbox"]["details"]
    assert floors["interpreter_ms"] > 0 and floors["argparse_floor_ms"] > 0, floors
    assert "argparse_floor.py" in done.stdout
    assert figures["warm_latency"]["details"]["signed_floor"] > 0  # 1's floor, signed and verified
    assert figures["send_throughput"]["details"]["signed_floor"] > 0  # 4's floor, signed
    assert min(figures["sync_throughput"]["details"]["letters_per_cpu_second"]) > 0  # 5 in CPU time
    assert "signed_floor.py" in done.stdout
    assert os.listdir(tmp) == [], "the suite left files in its temp folder"
    assert not (user_home / ".agentmail").exists(), "the suite touched ~/.agentmail"


def test_the_timeline_wraps_every_step_it_names(tmp_path: Path) -> None:
    """``python -m benchmarks.timeline``: a renamed function it wraps fails it, a step never run is missing."""
    from benchmarks import timeline

    done = _run(tmp_path, "benchmarks.timeline", "2", timeout=300)
    shown = {line[6:40].strip() for line in done.stdout.splitlines()}
    # Every step but the wake's wait (printed only when it blocked, which a loaded machine may skip)
    expected = {label for _, _, label in timeline.SEND + timeline.RECEIVE if not label.startswith("inotify")}
    assert expected <= shown, expected - shown
    assert "line read: median" in done.stdout
    assert os.listdir(tmp_path / "tmp") == [], "the timeline left files in its temp folder"


def test_the_receive_floor_wraps_every_step_it_names(tmp_path: Path) -> None:
    """``python -m benchmarks.receive_floor``: both sides' steps timed, the idle CPU read, no step
    renamed away (a renamed function is said on stderr and its row is missing)."""
    from benchmarks import receive_floor

    done = _run(tmp_path, "benchmarks.receive_floor", "1", "--modes", "current,none", "--idle", "1", timeout=300)
    assert "(no agentmail" not in done.stderr, done.stderr[-2000:]
    shown = {line[6:44].strip() for line in done.stdout.splitlines()}
    # Every step but the wake's wait and the warm-up (both before the send on a loaded machine)
    steps = receive_floor.SEND + receive_floor.RECEIVE
    expected = {label for _, _, label in steps if not label.startswith(("inotify", "warm-up"))}
    assert expected <= shown, expected - shown
    assert "## current: n=5" in done.stdout and "## none: n=5" in done.stdout
    assert "idle receiver:" in done.stdout
    assert os.listdir(tmp_path / "tmp") == [], "the receive floor left files in its temp folder"
