"""The CLI as a user has it: this tree built into a wheel and installed, not editable, into a
throw-away venv of the same interpreter the baselines run (issue 11).

A development checkout (``pip install -e``) starts every process through the editable install's
import finder, loaded by ``site`` from a ``.pth`` file (pathlib, urllib.parse, importlib.util:
~8 ms a process on a quiet machine) that no user's wheel install pays. Only agentmail is
installed into the venv; its dependencies (PyNaCl, dkimpy...) are the running
environment's own, reached through a plain path line in a ``.pth`` file, which adds a folder to
``sys.path`` and runs none of that folder's ``.pth`` files (so not the editable finder).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the tree built into the wheel
# The real interpreter binary: a pyenv shim is a shell script that would add its own start-up.
PYTHON = os.path.realpath(sys.executable)


@dataclass(frozen=True)
class Cli:
    argv: list[str]  # how a process of the CLI is started
    python: str  # the interpreter behind it (for ``-X importtime``)
    how: str  # what was measured, for the JSON


_installed: dict[Path, Cli] = {}


def user_cli(root: Path) -> Cli:
    """The CLI installed once per run under ``root``; if building or installing fails (no build
    backend reachable), the development install's console script, said so in ``how``."""
    if root not in _installed:
        _installed[root] = _install(root)
    return _installed[root]


def _install(root: Path) -> Cli:
    src, wheels, venv = root / "cli-src", root / "cli-wheel", root / "cli-venv"
    try:
        # A copy of the tree: building writes build/ and *.egg-info beside the sources.
        src.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(REPO / name, src / name)
        shutil.copytree(REPO / "agentmail", src / "agentmail", ignore=shutil.ignore_patterns("__pycache__"))
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
        _run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(src)])
        _run([PYTHON, "-m", "venv", "--without-pip", str(venv)])
        python = venv / "bin" / "python"
        (wheel,) = wheels.glob("agentmail-*.whl")
        _run([*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)])
        site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip())
        deps = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
        (site / "agentmail-bench-deps.pth").write_text("".join(f"{path}\n" for path in sorted(deps)))
        script = venv / "bin" / "agentmail"
        _run([str(script), "--help"])
        return Cli([str(script)], str(python), f"wheel of this tree installed in a venv of {PYTHON}")
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        print(f"\n  (could not install the CLI, measuring the development install: {exc})", flush=True)
        script = Path(sys.executable).parent / "agentmail"
        argv = [str(script)] if script.exists() else [sys.executable, "-m", "agentmail"]
        return Cli(argv, sys.executable, f"development install ({exc})")
    finally:
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(wheels, ignore_errors=True)


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise subprocess.SubprocessError(f"{' '.join(argv[:6])} exited {done.returncode}: {done.stderr[-300:]}")
    return done.stdout
