"""Lint and format under ruff (configured in pyproject.toml): part of the one test command CI runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_lint_is_clean() -> None:
    result = ruff("check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_leaves_every_file_unchanged() -> None:
    result = ruff("format", "--no-cache", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_property_test_measures_the_machine() -> None:
    """A per-test ``suppress_health_check`` list replaces the profile's, so one written as a plain
    list drops the suite's load tolerance (a busy machine failed on ``too_slow``); a per-test
    ``deadline`` is a timed assertion. Every list goes through ``tests.depth.suppressed``."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        text = path.read_text()
        for match in re.finditer(
            r"suppress_health_check\s*=\s*(?!suppressed\(|LOAD_CHECKS\))|[(,]\s*deadline\s*=\s*(?!None\b)", text
        ):
            line = text.count("\n", 0, match.start()) + 1
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    offenders = [o for o in offenders if not o.startswith("tests/system/test_lint.py")]
    assert not offenders, "use suppress_health_check=suppressed(...) and no deadline: " + ", ".join(offenders)
