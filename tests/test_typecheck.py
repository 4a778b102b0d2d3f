"""The package type-checks under mypy --strict: part of the one test command CI runs."""

from __future__ import annotations

from pathlib import Path

from mypy import api


def test_the_package_is_clean_under_mypy_strict() -> None:
    package = Path(__file__).parent.parent / "agentmail"
    out, err, status = api.run(["--strict", "--ignore-missing-imports", "--no-incremental", str(package)])
    assert status == 0, out + err
