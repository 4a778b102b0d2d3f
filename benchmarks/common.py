"""What every figure shares: sizes, a throw-away bus, processes, clocks and the machine.

Each figure builds its own bus in a fresh ``AGENTMAIL_HOME`` under one temp root per run,
which ``__main__`` removes at the end; ``~/.agentmail`` is never read or written.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry

from .install import PYTHON, REPO, user_cli  # the tree and the interpreter, named where the CLI is built

DOMAIN = "bus.test"


@dataclass(frozen=True)
class Settings:
    quick: bool
    latency_samples: int  # figure 1
    roundtrips: int  # figure 2
    startups: int  # figure 3, per command
    send_letters: int  # figure 4
    sync_letters: int  # figure 5
    scale_sizes: tuple[int, int, int]  # figure 6: small, middle, large
    scale_runs: int  # figure 6, per command and size
    repeats: int  # throughput figures: at most this many runs...
    budget: float  # ...and no new run once a figure has spent this many seconds
    smtp_samples: int  # figure 7
    sync_memory_letters: int  # figure 5b (the target is stated for 100,000)
    history_sizes: tuple[int, int] = (100, 100_000)  # figure 9: a short and a long history
    history_rounds: int = 30  # figure 9, per size

    @classmethod
    def full(cls) -> Settings:
        return cls(False, 100, 15, 20, 1000, 10_000, (1_000, 10_000, 100_000), 3, 3, 45.0, 20, 100_000)

    @classmethod
    def fast(cls) -> Settings:
        return cls(True, 8, 2, 5, 50, 300, (100, 500, 2_000), 1, 2, 5.0, 4, 300, (100, 2_000), 4)


@dataclass
class Runs:
    """Repeat a measurement up to ``most`` times, but start a run only if, taking as long as
    the last one, it would end within the figure's time budget (the first always runs)."""

    most: int
    budget: float

    def __iter__(self) -> Iterator[int]:
        start = last = time.perf_counter()
        for index in range(self.most):
            now = time.perf_counter()
            if index and (now - start) + (now - last) > self.budget:
                return
            last = now
            yield index


def agentmail_command() -> list[str]:
    """The development install's console script (next to this interpreter); the figures run
    the CLI installed from a wheel instead (``install.py``)."""
    script = Path(sys.executable).parent / "agentmail"
    return [str(script)] if script.exists() else [sys.executable, "-m", "agentmail"]


@contextmanager
def hermetic_environ(root: Path) -> Iterator[None]:
    """No AGENTMAIL_* from the caller (a DKIM key there would sign with the wrong key), and a
    default home inside the temp root, so even a slip never touches ~/.agentmail."""
    saved = dict(os.environ)
    for name in [n for n in os.environ if n.startswith("AGENTMAIL_")]:
        del os.environ[name]
    os.environ["AGENTMAIL_HOME"] = str(root / "default-home")
    # Processes run with bytecode cached, as an installed package has it (pip compiles on
    # install): with PYTHONDONTWRITEBYTECODE every CLI process would compile agentmail's source
    # again (~40 ms). The cache lives in the temp root; agentmail and baseline alike use it.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class TempBus:
    """A bus of ``platforms`` in its own AGENTMAIL_HOME under ``root``."""

    def __init__(
        self,
        root: Path,
        platforms: Sequence[str] = ("alpha", "beta"),
        *,
        transport: str = "local",
        endpoints: dict[str, Any] | None = None,
    ) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="home-", dir=root))
        self.registry: Registry = bus.init(self.home, self.home / "registry", list(platforms), domain=DOMAIN,
                                           transport=transport,
                                           # the benchmarks open thousands of threads: no hourly cap
                                           endpoints={"new_threads_per_hour": 0, **(endpoints or {})})  # fmt: skip
        self.installed = user_cli(root)  # the CLI as a user has it: a wheel, not the editable install
        self.cli = self.installed.argv

    def client(self, platform: str) -> AgentMail:
        return AgentMail(self.registry, Identity(platform), self.home)

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL_")}
        env["AGENTMAIL_HOME"] = str(self.home)
        return env

    def command(self, platform: str | None, *args: str) -> list[str]:
        return [*self.cli, *(("--as", platform) if platform else ()), *args]

    def run(self, platform: str | None, *args: str) -> subprocess.CompletedProcess[bytes]:
        return run(self.command(platform, *args), self.env, self.home)

    def timed(self, platform: str | None, *args: str) -> float:
        """Seconds for one whole CLI process, start to exit: what a user pays."""
        return timed(self.command(platform, *args), self.env, self.home)

    def remove(self) -> None:
        remove_tree(self.home)


@contextmanager
def scratch_root(prefix: str, under: Path | None, keep: bool) -> Iterator[Path]:
    """A new folder (under ``under`` when given) in the hermetic environment, removed afterwards
    unless ``keep`` (then its path is printed, as JSON, for a later ``--measure``)."""
    if under:
        under.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=under))
    try:
        with hermetic_environ(root):
            yield root
    finally:
        if keep:
            print(json.dumps({"kept": str(root)}), flush=True)
        else:
            remove_tree(root)


def remove_tree(path: Path) -> None:
    """rmtree, with crowded folders emptied side by side: unlinks in different folders run in
    parallel, which halves removing a 100k-letter spool."""
    crowded = [Path(folder) for folder, _, files in os.walk(path) if len(files) > 1000]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(partial(shutil.rmtree, ignore_errors=True), crowded))
    shutil.rmtree(path, ignore_errors=True)


def run(
    argv: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(list(argv), env=env, cwd=cwd, capture_output=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[:6])} exited {done.returncode}: {done.stderr.decode(errors='replace')[-500:]}"
        )
    return done


def timed(argv: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> float:
    start = time.perf_counter()
    run(argv, env, cwd)
    return time.perf_counter() - start


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process ended and waited for so far: the
    difference around a process is its CPU time, which the machine's load inflates far less
    than its wall-clock time (a shared machine's other jobs make a process wait, not work)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    return {
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "cpu": model,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "interpreter": PYTHON,
        "os": f"{platform.system()} {platform.release()}",
        "agentmail_commit": _git_commit(),
        "cli": " ".join(agentmail_command()),
    }


def _git_commit() -> str:
    """HEAD, marked "+dirty" when agentmail/ has uncommitted changes (the code measured)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "agentmail"], cwd=REPO, capture_output=True, timeout=10)
    except OSError:
        return ""
    return head.stdout.decode().strip() + ("+dirty" if dirty.stdout.strip() else "")
