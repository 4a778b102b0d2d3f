"""A victim for the commit-point crash tests: run one operation and SIGKILL ourselves the Nth
time it reaches a named crash point of the spool (``agentmail.spool.db.reached``).

    python kill_point.py MODE POINT N [PLATFORM [BODY]]     (AGENTMAIL_HOME from the environment)

MODE: ``open`` (open the spools of alpha, beta and beta@bob, in that order: a conversion of
the old layout runs here) · ``sync`` (one ``sync()`` of PLATFORM) · ``send`` (PLATFORM sends
beta one letter whose body is the next argument) · ``deliver``: the same send, killed right
after the Nth ``os.POINT`` call (``link``, ``fsync``, ``rename``) on a path in the post office
returns: the steps of a delivery, which has no spool commit point. Exits 0 when the operation
ended before the point was reached N times, so the test can tell a kill that never happened.
The points are deterministic places in the code, so which kill lands where never depends on
the machine's speed.
"""

from __future__ import annotations

import os
import signal
import sys

from agentmail.spool import db


def main() -> None:
    mode, point, nth = sys.argv[1], sys.argv[2], int(sys.argv[3])
    hits = [0]

    def hook(name: str) -> None:
        if name == point:
            hits[0] += 1
            if hits[0] == nth:
                os.kill(os.getpid(), signal.SIGKILL)

    db.crash_point = hook
    if mode == "deliver":
        _kill_after_syscall(point, nth)
        mode = "send"
    from agentmail.client.facade import AgentMail

    if mode == "open":
        for platform, agent in (("alpha", None), ("beta", None), ("beta", "bob")):
            AgentMail.from_env(platform, agent=agent).spool.read.ids("unread")
    elif mode == "sync":
        AgentMail.from_env(sys.argv[4]).sync()
    elif mode == "send":  # PLATFORM sends one letter to beta
        AgentMail.from_env(sys.argv[4]).send("beta", "Killed while sending", sys.argv[5])
    else:
        raise SystemExit(f"unknown mode {mode}")


def _kill_after_syscall(name: str, nth: int) -> None:
    """SIGKILL ourselves when the Nth ``os.<name>`` touching the post office has returned."""
    real = getattr(os, name)
    hits = [0]

    def postoffice(arg: object) -> bool:
        path = os.readlink(f"/proc/self/fd/{arg}") if isinstance(arg, int) else os.fspath(arg)  # type: ignore[arg-type]
        return f"{os.sep}postoffice{os.sep}" in str(path)

    def wrapper(*args: object, **kwargs: object) -> object:
        result = real(*args, **kwargs)
        if any(postoffice(a) for a in args[:2]):
            hits[0] += 1
            if hits[0] == nth:
                os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(os, name, wrapper)


if __name__ == "__main__":
    main()
