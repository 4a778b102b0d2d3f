"""A fork server for the crash tests (tests/system/test_crash.py): the victims start in ~1 ms.

A fresh ``python`` spends ~250 ms importing agentmail, email, dkimpy and PyNaCl before it
touches a letter, so a SIGKILL "5-80 ms after start" would almost always hit the import, never
the spool. This process imports everything once, then on each command forks a child that
builds its own AgentMail (``AgentMail.from_env``, like the CLI) and does real work at once.
The test kills that child with SIGKILL at a random instant and asks us to reap it.

    python crash_zygote.py MODE PLATFORM [AGENT]     (AGENTMAIL_HOME from the environment)

MODE: ``sync`` (sync in a loop, forever), ``consume`` (``inbox(sync=False, consume=True)``
until empty), ``done`` (list a few unread ids, ``done`` them, until empty), ``send TO``
(send letters to TO, forever). ``consume``/``done`` append every id their call claimed to
``$CRASH_LOG`` (one ``os.write`` per line, unbuffered) and exit 0 when the inbox is empty.

Protocol on stdin/stdout, one line each: ``ready`` once; ``fork [K]`` → the child's pid;
``reap PID`` → ``signal N`` or ``exit N``; ``quit``.

``fork K`` (``consume``/``done`` only) makes a kill land at a chosen point instead of a random
instant: right after the child's K-th claiming call returned and before it logged what that
call claimed, the child writes ``paused`` on stdout and waits to be killed. The pid line is
always written before the child starts, so the two lines never cross.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import dkim  # noqa: F401  (preloaded so children start working at once)
import nacl.signing  # noqa: F401

from agentmail.client.facade import AgentMail
from agentmail.letter import wire  # noqa: F401

BODY = (
    "Crash test letter. Reproduction: run the crash test; expected: every letter exactly once.\n"
    "Observed output: none yet. Blast radius: the test bus only.\n"
)


def _log(fd: int | None, ids: list[str]) -> None:
    if fd is not None and ids:
        os.write(fd, "".join(f"{i}\n" for i in ids).encode())


def _pause_at(calls: int, stop_after: int | None) -> None:
    """The chosen kill point: say so, then wait for the SIGKILL."""
    if stop_after is not None and calls >= stop_after:
        os.write(1, b"paused\n")
        while True:
            signal.pause()


def work(mode: str, platform: str, agent: str | None, args: list[str], stop_after: int | None = None) -> None:
    am = AgentMail.from_env(platform, agent=agent)
    log = os.environ.get("CRASH_LOG")
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if log else None
    calls = 0
    if mode == "sync":
        while True:
            report = am.sync()
            if not report.accepted and not report.duplicates:
                time.sleep(0.001)  # caught up: leave the CPU to the deliverer
    elif mode == "consume":
        while True:
            claimed = am.inbox(sync=False, consume=True, limit=3)
            calls += 1
            _pause_at(calls, stop_after)
            _log(fd, [letter.id for letter in claimed])
            if not claimed and not am.spool.read.ids("unread"):
                return
    elif mode == "done":
        while True:
            listed = [letter.id for letter in am.inbox(sync=False, limit=5)]
            if not listed:
                return
            moved = am.done(*listed)
            calls += 1
            _pause_at(calls, stop_after)
            _log(fd, moved)
    elif mode == "send":
        to = args[0]
        n = 0
        while True:
            am.send(to, f"crash-send {os.getpid()} #{n}", BODY, type="question")
            n += 1
    else:
        raise SystemExit(f"unknown mode {mode}")


def main() -> None:
    mode, platform = sys.argv[1], sys.argv[2]
    agent = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
    args = sys.argv[4:]
    AgentMail.from_env(platform, agent=agent)  # fail here, loudly, rather than in every child
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        if cmd[0] == "fork":
            stop_after = int(cmd[1]) if len(cmd) > 1 else None
            go_r, go_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    os.close(go_w)
                    os.read(go_r, 1)  # start only once our pid line is out
                    os.close(go_r)
                    work(mode, platform, agent, args, stop_after)
                except BaseException as exc:  # report, never fall back into the command loop
                    sys.stderr.write(f"crash_zygote child: {exc.__class__.__name__}: {exc}\n")
                    code = 1
                finally:
                    os._exit(code)
            os.close(go_r)
            out.write(f"{pid}\n")
            out.flush()
            try:
                os.write(go_w, b"g")
            except BrokenPipeError:
                pass  # the test killed the child before it read its go: that is a kill point too
            os.close(go_w)
        elif cmd[0] == "reap":
            _, status = os.waitpid(int(cmd[1]), 0)
            if os.WIFSIGNALED(status):
                out.write(f"signal {os.WTERMSIG(status)}\n")
            else:
                out.write(f"exit {os.WEXITSTATUS(status)}\n")
        out.flush()


if __name__ == "__main__":
    main()
