"""Figures 1, 4 and 5: the API on the embedded local post office.

1. warm delivery latency: ``send()`` here → an already-running ``agentmail wait`` returns;
4. send throughput: render + sign + deliver through the API;
5. sync throughput: parse + verify + commit into the spool.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from functools import partial
from pathlib import Path

from agentmail.config.credentials import read_private_key

from . import bare, letters, signed_floor
from .common import PYTHON, Runs, Settings, TempBus
from .report import Figure, Target, median, p95
from .waiting import time_answer

WARMUP = 2  # first processes pay for cold caches and .pyc writes


def _maildir(path: Path) -> Path:
    for sub in ("tmp", "new", "cur"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    return path


def _opener(sender: str, to: str) -> str:
    return letters.OPENER.format(sender=sender, to=to)


def warm_latency(root: Path, settings: Settings) -> Figure:
    """Agentmail and bare samples alternate, so both see the same machine at the same time."""
    tb = TempBus(root)
    alpha, beta = tb.client("alpha"), tb.client("beta")
    body = _opener("alpha", "beta")
    waiter = tb.command("beta", "wait", "--timeout", "60")
    maildir = _maildir(root / "latency-maildir")
    reader = [PYTHON, bare.__file__, "wait", str(maildir)]
    # The second floor: signed with dkimpy as agentmail signs, verified by dkimpy in the reader.
    me = tb.registry.get("alpha")
    dkim_domain, private = me.dkim_domain or me.domain, read_private_key(tb.home, "alpha")
    signed_maildir = _maildir(root / "latency-signed-maildir")
    signed_reader = [str(tb.installed.python), signed_floor.__file__, "wait", str(signed_maildir)]
    signed_env = {**tb.env, "DKIM_RECORD": f"v=DKIM1; k=ed25519; p={me.public_key}"}
    raw = b""
    ours: list[float] = []
    ours_exit: list[float] = []
    base: list[float] = []
    base_exit: list[float] = []
    signed: list[float] = []
    for index in range(WARMUP + settings.latency_samples):
        answer = time_answer(waiter, tb.env, tb.home, partial(alpha.send, "beta", "Latency probe", body))
        beta.done(answer.output.split()[0].decode())  # so the next waiter waits for a new letter
        raw = raw or alpha.spool.read.raw(alpha.spool.read.ids("sent")[-1])
        bare_answer = time_answer(reader, tb.env, tb.home, partial(bare.deliver, maildir, raw))
        (maildir / "new" / bare_answer.output.decode().strip()).unlink()
        deliver_signed = partial(
            signed_floor.deliver, signed_maildir, signed_floor.unsigned(raw), dkim_domain, me.selector, private
        )
        signed_answer = time_answer(signed_reader, signed_env, tb.home, deliver_signed)
        (signed_maildir / "cur" / signed_answer.output.decode().strip()).unlink()
        if index >= WARMUP:
            ours.append(answer.to_output * 1e3)
            ours_exit.append(answer.to_exit * 1e3)
            base.append(bare_answer.to_output * 1e3)
            base_exit.append(bare_answer.to_exit * 1e3)
            signed.append(signed_answer.to_output * 1e3)
    alpha.close()
    beta.close()
    tb.remove()
    return Figure(
        "warm_latency",
        "1. warm delivery latency (send -> wait returns)",
        "ms",
        median(ours),
        median(base),
        "bare fsync+rename / inotify reader",
        Target("value", "<=", 3.0, "median <= 3, p95 <= 6 ms", p95_limit=6.0),
        len(ours),
        {
            "p95": p95(ours),
            "baseline_p95": p95(base),
            "median_to_exit": median(ours_exit),
            "baseline_median_to_exit": median(base_exit),
            "signed_floor": median(signed),
            "signed_floor_p95": p95(signed),
            "letter_bytes": len(raw),
            "measured_to": "the waiter's printed line (to_exit: its process exit)",
        },
    )


def send_throughput(root: Path, settings: Settings) -> Figure:
    tb = TempBus(root)
    alpha = tb.client("alpha")
    body = _opener("alpha", "beta")
    for _ in range(5):  # imports and first-use caches are not throughput
        alpha.send("beta", "Warm-up", body)
    me = tb.registry.get("alpha")
    dkim_domain, private = me.dkim_domain or me.domain, read_private_key(tb.home, "alpha")
    ours: list[float] = []
    base: list[float] = []
    signed: list[float] = []  # the same bytes signed with dkimpy as agentmail signs, then bare
    count = settings.send_letters
    made: list[Path] = []  # the baselines' folders, removed only after the last timed run
    for run in Runs(settings.repeats, settings.budget):
        before = set(alpha.spool.read.ids("sent"))
        start = time.perf_counter()
        for index in range(count):
            alpha.send("beta", f"Throughput probe {index}", body)
        ours.append(count / (time.perf_counter() - start))
        raws = [alpha.spool.read.raw(i) for i in alpha.spool.read.ids("sent") if i not in before]
        assert len(raws) == count, f"{len(raws)} of {count} letters were sent"
        maildir = _maildir(root / f"send-baseline-{run}")
        made.append(maildir)
        start = time.perf_counter()
        for raw in raws:
            bare.deliver(maildir, raw)
        base.append(count / (time.perf_counter() - start))
        maildir = _maildir(root / f"send-signed-{run}")
        made.append(maildir)
        unsigned = [signed_floor.unsigned(raw) for raw in raws]
        start = time.perf_counter()
        for raw in unsigned:
            signed_floor.deliver(maildir, raw, dkim_domain, me.selector, private)
        signed.append(count / (time.perf_counter() - start))
    alpha.close()
    for folder in made:  # only now: a deletion's clean-up must not land on a timed run
        shutil.rmtree(folder)
    tb.remove()
    return Figure(
        "send_throughput",
        "4. send throughput (API, signed)",
        "letters/s",
        median(ours),
        median(base),
        "same bytes, fsync+rename+dir fsync",
        Target("ratio", ">=", 0.5, ">= 0.5x baseline"),
        len(ours),
        {
            "letters_per_run": count,
            "runs": [round(r) for r in ours],
            "baseline_runs": [round(r) for r in base],
            "signed_floor": median(signed),
            "signed_floor_ratio": median(signed) / median(base),
        },
    )


# Started by a small interpreter, not by this process: Linux carries the peak RSS of the process
# that forks (or vforks) into its child's rusage across exec, so a child of this one (which holds
# every letter it made) reported this process's peak, not its own (the 77 MB of 5b before issue 11).
_PEAK_RSS = """\
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def _peak_rss_mb(tb: TempBus, *args: str) -> float:
    """The peak resident memory of one whole CLI process (its own rusage, from wait4)."""
    out = subprocess.run(
        [PYTHON, "-c", _PEAK_RSS, *tb.command("beta", *args)], env=tb.env, cwd=tb.home, capture_output=True
    )
    code, peak_kb = (int(x) for x in out.stdout.split())
    assert code == 0, f"{args} exited {code}: {out.stderr.decode(errors='replace')[-2000:]}"
    return peak_kb / 1024  # Linux: kB


def _sync_memory(tb: TempBus, files: list[Path]) -> Figure:
    """``agentmail sync`` of all the letters, and of a tenth of them: memory must not follow."""
    peaks = {}
    for count in (len(files) // 10, len(files)):
        shutil.rmtree(tb.home / "postoffice" / "beta", ignore_errors=True)
        shutil.rmtree(tb.home / "spool" / "beta", ignore_errors=True)
        new = _maildir(tb.home / "postoffice" / "beta") / "new"
        for path in files[:count]:
            os.link(path, new / f"{path.stem}.bench")
        peaks[count] = _peak_rss_mb(tb, "sync")
    small, large = sorted(peaks)
    return Figure(
        "sync_memory",
        f"5b. sync memory: {large:,} letters (peak RSS)",
        "MB",
        round(peaks[large], 1),
        round(peaks[small], 1),
        f"{small:,} letters",
        Target("value", "<=", 100, "<= 100 MB"),
        1,
        {"peak_mb_by_letters": {str(k): round(v, 1) for k, v in peaks.items()}},
    )


def sync_throughput(root: Path, settings: Settings) -> list[Figure]:
    """A fresh post office and spool for every run, filled with the same signed letters."""
    tb = TempBus(root, ("alpha", "gamma", "beta"))
    count = settings.sync_letters
    made = max(count, settings.sync_memory_letters)
    raws = letters.make(tb.home, tb.registry.root, letters.conversation(("alpha", "gamma"), "beta", made))
    source = root / "sync-source"
    source.mkdir()
    every = []
    for index, raw in enumerate(raws):
        every.append(source / f"{index:08d}.eml")
        every[-1].write_bytes(raw)
    del raws
    files = every[:count]
    ours: list[float] = []
    ours_cpu: list[float] = []  # per CPU second of this process: what a loaded machine stretches least
    base: list[float] = []
    # A run's folders are moved aside, not deleted, until the figure is done: deleting 10,000
    # files just before the next run put the filesystem's own clean-up (ext4 with discard,
    # here) on that run's clock, ~20% a run by the third (measured: 1,126 -> 809/s).
    aside = root / "sync-done"
    aside.mkdir()
    for run in Runs(settings.repeats, settings.budget):
        for folder in (tb.home / "postoffice" / "beta", tb.home / "spool" / "beta"):
            if folder.exists():
                os.rename(folder, aside / f"{folder.parent.name}-{run}")
        new = _maildir(tb.home / "postoffice" / "beta") / "new"
        for path in files:  # delivered while nobody looked; sorted names keep arrival order
            os.link(path, new / f"{path.stem}.bench")
        os.sync()  # the fixture's dirty pages must not be flushed on the clock
        with tb.client("beta") as beta:
            start, cpu = time.perf_counter(), time.process_time()
            accepted = len(beta.sync().accepted)
            ours.append(count / (time.perf_counter() - start))
            ours_cpu.append(count / (time.process_time() - cpu))
        assert accepted == count, f"sync accepted {accepted} of {count}"
        target = root / f"sync-baseline-{run}"
        os.sync()
        start = time.perf_counter()
        bare.copy_durably(files, target)
        base.append(count / (time.perf_counter() - start))
        os.rename(target, aside / target.name)
    shutil.rmtree(aside)
    memory = _sync_memory(tb, every[: settings.sync_memory_letters])
    shutil.rmtree(source)
    tb.remove()
    throughput = Figure(
        "sync_throughput",
        "5. sync throughput (parse+verify+commit)",
        "letters/s",
        median(ours),
        median(base),
        "copy with fsync",
        Target("value", ">=", 1000, ">= 1,000/s"),
        len(ours),
        {
            "letters_per_run": count,
            "runs": [round(r) for r in ours],
            "baseline_runs": [round(r) for r in base],
            "letters_per_cpu_second": [round(r) for r in ours_cpu],
        },
    )
    return [throughput, memory]
