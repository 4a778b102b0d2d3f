"""Figure 3 of the peers' benchmark taken apart: ``send()`` here, an already-running
``AgentMail.wait()`` loop in another process (as the peers' ``drive_py.py recv`` runs it).

    python -m benchmarks.receive_floor [SAMPLES] [--modes current,base-thread,base-inline,none] [--idle SECONDS] [--base DIR]

Each step of both sides is wrapped to record when it starts and ends (``timeline.py``'s
wrappers; ``time.perf_counter`` is CLOCK_MONOTONIC, one clock for the machine), and the
receiver hands its events back with each letter. Modes run in blocks of 5 samples, rotating,
each block with a receiver of its own, so a quiet or busy phase of the machine hits them alike:

- ``current``: the receiver as it is (``cur/`` flushed in the fetch, before the letters are
  read); ``base-thread`` and ``base-inline``: the
  tree at ``--base DIR`` (an export of the commit before, its ``agentmail/`` under DIR), with
  its ``cur/`` fsync on a thread (``transport/local.Flush`` as if a core were spare) or inline;
- ``none``: no receiver at all, the same sends (what a send costs with nobody waiting).

Before each send the receiver is blocked (``ready``), then a pause of 20 ms plus a uniform
random part of 50 ms from a fixed seed, as the peers' harness does. ``--idle`` then reads a
blocked receiver's CPU time (``/proc/<pid>/stat`` utime + stime) over that many seconds.
A diagnostic, not a figure: the wrappers cost a few µs each.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import timeline

# The receiver's steps beyond figure 1's (timeline.RECEIVE): the loop around them.
RECEIVE = [
    *[step for step in timeline.RECEIVE if step[0] != "agentmail.cli.agent"],
    ("agentmail.client.receiver", "Receiver.wait", "wait() (whole call)"),
    ("agentmail.client.receiver", "Receiver._warm_receiving", "warm-up before blocking"),
    ("agentmail.transport.local", "LocalTransport.settle", "settle (cur/ flush waited for)"),
    ("agentmail.client.receiver", "Receiver.done", "done (FULL commit)"),
]
SEND = [
    *timeline.SEND,
    ("agentmail.transport.local", "record", "sent record (link, rename)"),
    ("agentmail.transport.local", "LocalTransport._record_opener", "opener marker"),
    ("agentmail.spool.filing", "SpoolWriter.make_durable", "sent: folder fsync + FULL commit"),
]


def _wrap_all(steps: list[tuple[str, str, str]]) -> None:
    for module, path, label in steps:
        try:
            timeline._wrap(module, path, label)
        except AttributeError:  # a step renamed since: left out, said once
            print(f"(no {module}.{path})", file=sys.stderr)


def _receiver(home: str, mode: str) -> None:
    """The other process: ``wait()`` in a loop, one JSON line of events per letter."""
    os.environ["AGENTMAIL_HOME"] = home
    if mode.startswith("base-"):  # the editable install's finder would hand out this tree's agentmail
        sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")]
    from agentmail import AgentMail
    from agentmail.errors import Timeout
    from agentmail.transport import local

    if mode.startswith("base-"):  # the tree before the flush moved (--base): its thread, or inline
        local.spare_core = lambda: mode == "base-thread"  # type: ignore[attr-defined]
    print(f"receiver {mode}: {local.__file__}", file=sys.stderr)
    _wrap_all(RECEIVE)
    beta = AgentMail.from_env("beta")
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    while not stop.is_set():
        timeline.EVENTS.clear()
        try:
            letter, _how = beta.wait(timeout=0.5)
        except Timeout:
            continue
        out.write(f"got {letter.message_id} {time.perf_counter()}\n")
        out.flush()
        beta.done(letter.id)
        out.write(json.dumps(timeline.EVENTS) + "\n")
        out.write("ready\n")
        out.flush()
    beta.close()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def main(samples: int, modes: list[str], idle: float, base: str) -> None:
    from agentmail.admin import bus
    from agentmail.client.facade import AgentMail
    from agentmail.config.identity import Identity

    from . import letters
    from .common import REPO, hermetic_environ

    root = Path(tempfile.mkdtemp(prefix="agentmail-receive-floor-"))
    rng = random.Random(40)
    rows: dict[str, list[tuple[float, float, float, list[timeline.Event], list[timeline.Event]]]] = {
        m: [] for m in modes
    }
    idle_cpu: dict[str, float] = {}
    with hermetic_environ(root):
        home = root / "home"
        registry = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test", transport="local",
                            endpoints={"new_threads_per_hour": 0})  # fmt: skip
        alpha = AgentMail(registry, Identity("alpha"), home)
        beta = AgentMail(registry, Identity("beta"), home)
        body = letters.OPENER.format(sender="alpha", to="beta")
        env = {**os.environ, "AGENTMAIL_HOME": str(home)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        _wrap_all(SEND)
        blocks = -(-samples // 5) + 1  # the first block of each mode is a warm-up
        for block in range(blocks):
            for mode in modes[block % len(modes) :] + modes[: block % len(modes)]:
                proc = None
                if mode != "none":
                    argv = [sys.executable, "-m", "benchmarks.receive_floor", "--receiver", str(home), mode]
                    tree = (
                        {**env, "PYTHONPATH": f"{base}{os.pathsep}{env['PYTHONPATH']}"}
                        if mode.startswith("base-")
                        else env
                    )
                    proc = subprocess.Popen(
                        argv,
                        env=tree,
                        cwd=base if mode.startswith("base-") else REPO,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                    )
                    assert proc.stdout is not None and proc.stdin is not None
                    assert proc.stdout.readline().strip() == b"ready"
                try:
                    _block(alpha, beta, proc, block, blocks, mode, body, rng, rows, idle, idle_cpu)
                finally:
                    if proc is not None and proc.poll() is None:
                        proc.kill()
                if proc is not None:
                    proc.stdin.close()  # type: ignore[union-attr]
                    proc.wait(timeout=30)
        alpha.close()
        beta.close()
    shutil.rmtree(root, ignore_errors=True)
    _print(rows, idle_cpu)


def _block(alpha, beta, proc, block, blocks, mode, body, rng, rows, idle, idle_cpu) -> None:  # type: ignore[no-untyped-def]
    for index in range(5):
        time.sleep(0.02 + rng.random() * 0.05)
        timeline.EVENTS.clear()
        t0 = time.perf_counter()
        letter = alpha.send("beta", f"Probe {block}.{index}", body, type="question")
        t1 = time.perf_counter()
        sent_events = list(timeline.EVENTS)
        got: float = t1
        waited: list[timeline.Event] = []
        if proc is not None:
            assert proc.stdout is not None and proc.stdin is not None
            line = proc.stdout.readline()
            got = float(line.split()[2])  # the receiver's clock as it printed (CLOCK_MONOTONIC)
            assert line.split()[1].decode().lower() == letter.message_id.lower(), (line, letter.message_id)
            waited = [tuple(e) for e in json.loads(proc.stdout.readline())]  # type: ignore[misc]
            assert proc.stdout.readline().strip() == b"ready"
            last = block == blocks - 1 and index == 4
            if last and idle and mode not in idle_cpu:
                before = _cpu_seconds(proc.pid)
                time.sleep(idle)
                idle_cpu[mode] = (_cpu_seconds(proc.pid) - before) / idle
        else:  # nobody waits: read outside the clock, so the next block finds one letter
            beta.done(*[x.id for x in beta.inbox()])
        if block > 0:
            rows[mode].append((t0, t1, got, sent_events, waited))


def _print(rows: dict[str, list[tuple[float, float, float, list[timeline.Event], list[timeline.Event]]]],
           idle_cpu: dict[str, float]) -> None:  # fmt: skip
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    for mode, samples in rows.items():
        sends = sorted((t1 - t0) * 1e3 for t0, t1, *_ in samples)
        totals = sorted((got - t0) * 1e3 for t0, _, got, *_ in samples)
        p95 = totals[int(0.95 * (len(totals) - 1))]
        print(f"\n## {mode}: n={len(samples)}  send() median {statistics.median(sends):.2f} ms;"
              f"  send -> got median {statistics.median(totals):.2f} ms (p95 {p95:.2f})")  # fmt: skip
        if mode in idle_cpu:
            print(f"   idle receiver: {idle_cpu[mode] * 100:.2f} % of a core")
        table: dict[tuple[str, str], list[list[float]]] = {}
        for t0, _t1, _got, sent_events, waited in samples:
            timeline._rows("send", sent_events, t0, table)
            timeline._rows("wait", waited, t0, table)

        def med(key: tuple[str, str], column: int, table: dict[tuple[str, str], list[list[float]]] = table) -> float:
            return statistics.median(row[column] for row in table[key])

        print(f"{'side':5} {'step':38} {'start':>7} {'end':>7} {'took':>6}  n   µs from send(), medians")
        for key in sorted(table, key=lambda k: (med(k, 0), med(k, 1))):
            print(
                f"{key[0]:5} {key[1]:38} {med(key, 0):7.0f} {med(key, 1):7.0f} {med(key, 2):6.0f} {len(table[key]):3}"
            )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--receiver"]:
        _receiver(sys.argv[2], sys.argv[3])
    else:
        args = sys.argv[1:]
        modes = ["current", "none"]
        idle = 10.0
        if "--modes" in args:
            at = args.index("--modes")
            modes = args[at + 1].split(",")
            del args[at : at + 2]
        if "--idle" in args:
            at = args.index("--idle")
            idle = float(args[at + 1])
            del args[at : at + 2]
        base = ""
        if "--base" in args:
            at = args.index("--base")
            base = args[at + 1]
            del args[at : at + 2]
        main(int(args[0]) if args else 30, modes, idle, base)
