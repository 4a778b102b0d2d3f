"""``agentmail serve`` in a real child process on a free loopback port, for the tests of the live
view and the browser tests: the address it printed, and a clean stop (Ctrl-C) afterwards."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def served(home: Path, *argv: str, options: tuple[str, ...] = ()) -> Iterator[str]:
    """The base URL of ``agentmail ARGV serve --listen 127.0.0.1:0 OPTIONS`` (its token query included)."""
    env = {**os.environ, "AGENTMAIL_HOME": str(home)}
    child = subprocess.Popen([sys.executable, "-m", "agentmail", *argv, "serve", "--listen", "127.0.0.1:0", *options],
                             stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True)  # fmt: skip
    try:
        assert child.stderr is not None
        line = child.stderr.readline()  # the first line it prints says where it listens
        found = re.search(r"(http://\S+)", line)
        assert found, line + child.stderr.read()
        yield found.group(1)
    finally:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stderr is not None:
            child.stderr.close()
