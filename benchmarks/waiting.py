"""An already-running waiter in another process, and the time until it answers.

"Already running" means blocked: the process holds its inotify watch (or has sent IDLE to
the IMAP server) and sleeps. We read that from /proc rather than sleeping a fixed while, so
the clock starts only once start-up is over and never includes it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

_BLOCKED = ("poll", "select", "epoll")


def _fds(pid: int) -> list[str]:
    folder = f"/proc/{pid}/fd"
    found = []
    for name in os.listdir(folder):
        try:
            found.append(os.readlink(f"{folder}/{name}"))
        except OSError:
            continue
    return found


def _sleeping_in_poll(pid: int) -> bool | None:
    """None when the kernel hides wchan."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        return None
    if wchan in ("", "0"):
        return None
    return any(word in wchan for word in _BLOCKED)


def sleeping(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "S"
    except (OSError, IndexError):
        return False


def on_inotify(pid: int) -> bool:
    """Holds an inotify watch and sleeps in select/poll: an armed local waiter."""
    try:
        armed = any("inotify" in link for link in _fds(pid))
    except FileNotFoundError:
        return False
    blocked = _sleeping_in_poll(pid) if armed else False
    return armed and (blocked is None or blocked)  # wchan hidden: the watch is the best sign


def wait_until(proc: subprocess.Popen[bytes], ready: Callable[[int], bool], timeout: float = 30.0) -> None:
    """Return once ``ready(pid)`` held for three checks in a row (a passing state is not a wait)."""
    deadline = time.monotonic() + timeout
    streak = 0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"the waiter exited early ({proc.returncode}): {err[-300:]}")
        streak = streak + 1 if ready(proc.pid) else 0
        if streak >= 3:
            return
        time.sleep(0.003)
    raise RuntimeError("the waiter never blocked")


@dataclass(frozen=True)
class Answer:
    output: bytes
    to_output: float  # seconds from the start of the delivery to the waiter's printed line
    to_exit: float  # ... to the waiter's process exit (what a shell waiting on it sees)


def time_answer(
    argv: Sequence[str],
    env: dict[str, str],
    cwd: Path,
    deliver: Callable[[], object],
    ready: Callable[[int], bool] = on_inotify,
) -> Answer:
    with subprocess.Popen(list(argv), env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            wait_until(proc, ready)
            start = time.perf_counter()
            deliver()
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()
            printed = time.perf_counter()
            proc.wait(timeout=30)
            exited = time.perf_counter()
            if proc.returncode != 0 or not line:
                err = proc.stderr.read().decode(errors="replace")
                raise RuntimeError(f"the waiter failed ({proc.returncode}): {err[-300:]}")
        finally:
            if proc.poll() is None:
                proc.kill()
    return Answer(line, printed - start, exited - start)
