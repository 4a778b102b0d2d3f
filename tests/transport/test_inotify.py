"""The inotify watch on its own: an event wakes it once (drained), nothing means False, and a
kernel that refuses an inotify instance makes ``watch`` None so callers poll."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentmail.transport import inotify


def test_an_event_wakes_the_watch_once_and_is_drained(tmp_path: Path) -> None:
    watch = inotify.Watch(tmp_path)
    try:
        assert watch.wait(0) is False  # nothing happened yet
        assert watch.wait(-5) is False  # a timeout already past is no wait at all, not an error
        for n in range(50):  # many events: one wait drains them all
            (tmp_path / f"tmp{n}").write_bytes(b"x")
            os.rename(tmp_path / f"tmp{n}", tmp_path / f"new{n}")
        assert watch.wait(600) is True  # returns on the events, long before the ten minutes
        assert watch.wait(0) is False  # drained: the same events do not wake it again
        (tmp_path / "another").write_bytes(b"x")
        assert watch.wait(600) is True
    finally:
        watch.close()


_NO_INSTANCE = r"""
import errno, os, resource, sys
from pathlib import Path
from agentmail._fs import libc
from agentmail.transport import inotify

libc()  # loaded (and cached) first: finding the C library needs descriptors of its own
directory = Path(sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
held = []
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass  # every descriptor taken: the kernel cannot hand out an inotify instance now
try:
    inotify.Watch(directory)
except OSError as exc:
    print("refused", errno.errorcode[exc.errno], "inotify_init1" in str(exc))
print("watch", inotify.watch(directory))
for fd in held:
    os.close(fd)  # coverage writes its data at exit: it needs a descriptor too
"""


def test_no_inotify_instance_to_be_had_means_no_watch(tmp_path: Path) -> None:
    """With every file descriptor in use, inotify_init1 fails (EMFILE): Watch says so and
    ``watch`` is None, the caller's cue to poll. In a child process: the limit is process-wide."""
    done = subprocess.run(
        [sys.executable, "-c", _NO_INSTANCE, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["refused EMFILE True", "watch None"]
