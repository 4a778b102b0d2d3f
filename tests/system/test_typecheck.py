"""The package type-checks under mypy --strict: part of the one test command CI runs.

mypy runs in its own process: in the pytest process its hundreds of thousands of objects stayed
behind for every later garbage collection to walk (the leak check collects around each test)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_package_is_clean_under_mypy_strict() -> None:
    package = Path(__file__).parents[2] / "agentmail"
    # Not under coverage: the child would be traced for nothing (mypy runs none of agentmail).
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    done = subprocess.run(
        # incremental, with the cache beside the code (.mypy_cache, git-ignored): a second run
        # re-checks only what changed (mypy's own cache; a clean clone checks everything)
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--ignore-missing-imports",
            "--cache-dir",
            str(package.parent / ".mypy_cache"),
            str(package),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env=env,
        timeout=115,  # under pytest-timeout's 120 s, so the child is reaped
    )
    assert done.returncode == 0, done.stdout + done.stderr
