"""Where figure 1's milliseconds go: one timeline across the sender and the waiter.

    python -m benchmarks.timeline [SAMPLES]

``send()`` in this process, an ``agentmail wait`` in another (the development tree, blocked on
inotify as figure 1's is), each with the steps of a letter's path wrapped to record when they
start and end. ``time.perf_counter`` is CLOCK_MONOTONIC on Linux, one clock for the whole
machine, so both sides' times are read from the same start: the instant ``send`` was called.
Prints each step's median start, end and duration in µs over the samples (medians of
different samples: starts and ends do not add up exactly). Not a figure: the wrappers cost a
few µs each. A diagnostic for issue 11, standard library only beside agentmail.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Event = tuple[str, float, float]
EVENTS: list[Event] = []

# (module, attribute path, label). The waiter's side: from the wake to the printed line.
RECEIVE = [
    ("agentmail.transport.inotify", "Watch.wait", "inotify wait (wake)"),
    ("agentmail.client.receiver", "Receiver.sync", "client sync"),
    ("agentmail.spool.filing", "SpoolWriter.sweep_tmp", "sweep tmp/"),
    ("agentmail.transport.local", "Mailbox.assign", "assign UIDs (rename into cur/)"),
    ("agentmail.transport.local", "fsync_dir", "fsync cur/"),
    ("agentmail.transport.local", "Mailbox.read", "read the letter"),
    ("agentmail.client.receiver", "Receiver._seen", "duplicate check (its look-ups)"),
    ("agentmail.letter.wire", "parse_message", "parse"),
    ("agentmail.letter.mime", "header_problem", "MIME header checks"),
    ("agentmail.trust.signing", "verify", "DKIM verify"),
    ("agentmail.letter.wire", "to_letter", "to_letter"),
    ("agentmail.trust.authenticity", "judge_unguarded", "judge (parse..to_letter)"),
    ("agentmail.client.receiver", "Receiver.facts", "route facts"),
    ("agentmail.spool.filing", "SpoolWriter.store", "spool store (link, rows)"),
    ("agentmail.spool.db", "Db.commit_batch", "COMMIT (WAL fsync)"),
    ("agentmail.spool.filing", "SpoolWriter._publish", "rename into letters/"),
    ("agentmail.spool.filing", "SpoolWriter.set_checkpoint", "checkpoint"),
    ("agentmail.client.receiver", "Receiver.inbox", "inbox (read back)"),
    ("agentmail.cli.agent", "echo", "print"),
]
# The sender's side, from the call to send() to its return.
SEND = [
    ("agentmail.client.facade", "AgentMail.send", "send"),
    ("agentmail.client.sender", "Sender._check", "guards"),
    ("agentmail.client.mailbox", "compose", "compose (render + sign)"),
    ("agentmail.trust.signing", "sign", "DKIM sign"),
    ("agentmail.client.outbox", "Outbox.file", "outbox (file, row)"),
    ("agentmail.transport.local", "put_linked", "deliver"),
    ("agentmail.transport.maildir", "fsync_file", "fsync post-office file"),
    ("agentmail.transport.maildir", "fsync_dir", "fsync new/"),
    ("agentmail.client.outbox", "Outbox._record", "outbox -> sent"),
]


def _wrap(module: str, path: str, label: str) -> None:
    owner: Any = importlib.import_module(module)
    *parents, name = path.split(".")
    for part in parents:
        owner = getattr(owner, part)
    fn: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            EVENTS.append((label, start, time.perf_counter()))

    setattr(owner, name, timed)


def _waiter(argv: list[str]) -> None:
    """The waiter process: wrap, run the CLI, write the events at exit."""
    for step in RECEIVE:
        _wrap(*step)

    def save() -> None:
        with open(os.environ["TIMELINE_OUT"], "a") as out:
            out.write(json.dumps(EVENTS) + "\n")

    atexit.register(save)
    from agentmail.cli.app import main

    code = main(argv)
    sys.stdout.flush()
    raise SystemExit(code)


def _rows(side: str, events: list[Event], start: float, into: dict[tuple[str, str], list[list[float]]]) -> None:
    count: dict[str, int] = {}
    for label, begin, end in events:
        if end < start:
            continue  # before this delivery (start-up, the warm-up, the first look)
        count[label] = count.get(label, 0) + 1
        name = label if count[label] == 1 else f"{label} #{count[label]}"
        into.setdefault((side, name), []).append([(begin - start) * 1e6, (end - start) * 1e6, (end - begin) * 1e6])


def main(samples: int) -> None:
    from agentmail.admin import bus
    from agentmail.client.facade import AgentMail
    from agentmail.config.identity import Identity

    from . import letters
    from .common import REPO, hermetic_environ
    from .waiting import time_answer

    root = Path(tempfile.mkdtemp(prefix="agentmail-timeline-"))
    with hermetic_environ(root):
        home = root / "home"
        registry = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test", transport="local",
                            endpoints={"new_threads_per_hour": 0})  # fmt: skip
        alpha, beta = AgentMail(registry, Identity("alpha"), home), AgentMail(registry, Identity("beta"), home)
        body = letters.OPENER.format(sender="alpha", to="beta")
        env = {**os.environ, "AGENTMAIL_HOME": str(home), "TIMELINE_OUT": str(root / "waiter.jsonl")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        argv = [sys.executable, "-m", "benchmarks.timeline", "--waiter", "--as", "beta", "wait", "--timeout", "60"]
        for step in SEND:
            _wrap(*step)
        sent: list[tuple[float, float, list[Event]]] = []
        for index in range(samples + 2):  # two warm-ups: cold caches, .pyc writes
            EVENTS.clear()
            answer = time_answer(argv, env, REPO, lambda: alpha.send("beta", "Latency probe", body))
            beta.done(answer.output.split()[0].decode())
            start = next(begin for label, begin, _ in EVENTS if label == "send")
            if index >= 2:
                sent.append((start, answer.to_output, list(EVENTS)))
        waited = [json.loads(line) for line in (root / "waiter.jsonl").read_text().splitlines()[2:]]
        alpha.close()
        beta.close()
    shutil.rmtree(root, ignore_errors=True)

    table: dict[tuple[str, str], list[list[float]]] = {}
    for (start, to_output, events), waiter_events in zip(sent, waited, strict=True):
        _rows("send", events, start, table)
        _rows("wait", [tuple(e) for e in waiter_events], start, table)  # type: ignore[misc]
        table.setdefault(("bench", "line read by the benchmark"), []).append([to_output * 1e6] * 2 + [0.0])

    def med(key: tuple[str, str], column: int) -> float:
        return statistics.median(row[column] for row in table[key])

    print(f"{'side':5} {'step':34} {'start':>7} {'end':>7} {'took':>6}   µs from send(), medians of {len(sent)}")
    for key in sorted(table, key=lambda k: (med(k, 0), med(k, 1))):
        if key[1].startswith("inotify wait") and med(key, 2) < 1000:
            continue  # the wait(0) drain before blocking, not the wake
        print(f"{key[0]:5} {key[1]:34} {med(key, 0):7.0f} {med(key, 1):7.0f} {med(key, 2):6.0f}")
    outputs = sorted(s[1] * 1e3 for s in sent)
    print(
        f"line read: median {statistics.median(outputs):.2f} ms, p95 {outputs[int(0.95 * (len(outputs) - 1))]:.2f} ms"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--waiter"]:
        _waiter(sys.argv[2:])
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
