"""Figures 2 and 3: the CLI, timed as whole processes (start to exit), which is what a user pays.

2. round trip: ``agentmail send`` then ``agentmail inbox`` shows the letter;
3. start-up: ``agentmail inbox --no-sync`` on a small spool and ``agentmail --help``, beside
   ``python -c "import email, ssl, asyncio"`` run by the same (real) interpreter.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from . import argparse_floor, bare, letters
from .common import PYTHON, Settings, TempBus, children_cpu, timed
from .report import Figure, Target, median

STDLIB_FLOOR = [PYTHON, "-c", "import email, ssl, asyncio"]
# Issue 11's floor for the round trip: two processes that only load what reading a letter needs.
PARSER_PAIR = [PYTHON, "-c", "import email.parser, email.policy"]


def round_trip(root: Path, settings: Settings) -> Figure:
    """Baseline: one pair of ``python -c "import email.parser, email.policy"`` processes (issue 11;
    target <= 2x). Also recorded: two bare processes, one delivering the same signed letter
    durably, one listing and reading the mailbox. Samples alternate with agentmail's."""
    tb = TempBus(root)
    beta = tb.client("beta")
    body = letters.OPENER.format(sender="alpha", to="beta")
    maildir = root / "roundtrip-maildir"
    for sub in ("tmp", "new", "cur"):
        (maildir / sub).mkdir(parents=True)
    ours: list[float] = []
    base: list[float] = []
    bare_pair: list[float] = []
    cpu: dict[str, list[float]] = {"ours": [], "base": []}
    for index in range(1 + settings.roundtrips):  # the first pair only warms caches
        cpu_start, start = children_cpu(), time.perf_counter()
        thread = tb.run("alpha", "send", "beta", "-s", f"Round trip {index}", "-b", body).stdout.split()[0]
        shown = tb.run("beta", "inbox").stdout
        elapsed, cpu_used = time.perf_counter() - start, children_cpu() - cpu_start
        assert thread in shown, "inbox did not show the letter just sent"
        for letter in beta.inbox(sync=False):  # the next inbox lists as much as this one did
            beta.done(letter.id)
        letter_file = sorted((tb.home / "spool" / "alpha" / "letters").iterdir())[-1]  # alpha only sends
        floor = timed([PYTHON, bare.__file__, "write", str(maildir), str(letter_file)])
        floor += timed([PYTHON, bare.__file__, "list", str(maildir)])
        for path in (maildir / "new").iterdir():
            path.unlink()
        cpu_start = children_cpu()
        pair = timed(PARSER_PAIR) + timed(PARSER_PAIR)
        pair_cpu = children_cpu() - cpu_start
        if index:
            ours.append(elapsed * 1e3)
            base.append(pair * 1e3)
            bare_pair.append(floor * 1e3)
            cpu["ours"].append(cpu_used * 1e3)
            cpu["base"].append(pair_cpu * 1e3)
    beta.close()
    tb.remove()
    return Figure(
        "cli_round_trip",
        "2. CLI round trip (send, then inbox)",
        "ms",
        median(ours),
        median(base),
        "2x python -c 'import email.parser, email.policy'",
        Target("ratio", "<=", 2.0, "<= 2x baseline"),
        len(ours),
        {
            "runs": [round(x, 1) for x in ours],
            "baseline_runs": [round(x, 1) for x in base],
            "bare_writer_reader_ms": median(bare_pair),
            **_cpu_details(cpu["ours"], cpu["base"]),
            "peers_ms": "231-294",
        },
    )


def start_up(root: Path, settings: Settings) -> list[Figure]:
    """The three commands take turns, so load on the machine hits them alike."""
    tb = TempBus(root)
    alpha = tb.client("alpha")
    body = letters.OPENER.format(sender="alpha", to="beta")
    for index in range(5):
        alpha.send("beta", f"Small spool {index}", body)
    beta = tb.client("beta")
    for letter in beta.inbox()[:2]:
        beta.done(letter.id)  # a small spool: 5 letters, 3 unread
    python = str(tb.installed.python)
    commands = {
        "inbox": tb.command("beta", "inbox", "--no-sync"),
        "help": tb.command(None, "--help"),
        "floor": STDLIB_FLOOR,
        # In the CLI's interpreter: the interpreter alone, and a one-command argparse CLI printing
        # the same unread rows raw: what 3a costs before anything agentmail does of its own.
        "interpreter": [python, "-c", "pass"],
        "argparse": [python, argparse_floor.__file__, "--as", "beta", "inbox", "--no-sync"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for index in range(1 + settings.startups):
        for name, argv in commands.items():
            cpu_start = children_cpu()
            elapsed = timed(argv, tb.env, tb.home) * 1e3
            if index:
                times[name].append(elapsed)
                cpu[name].append((children_cpu() - cpu_start) * 1e3)
    runs = 1 if settings.quick else 3
    imports = {
        "inbox --no-sync": import_costs(tb, ["--as", "beta", "inbox", "--no-sync"], runs),
        "--help": import_costs(tb, ["--help"], runs),
        "send": import_costs(tb, ["--as", "alpha", "send", "beta", "-s", "Imports", "-b", body], runs),
        "inbox (sync)": import_costs(tb, ["--as", "beta", "inbox"], runs),
    }
    alpha.close()
    beta.close()
    tb.remove()
    floor = median(times["floor"])
    target = Target("ratio", "<=", 0.7, "<= 0.7x baseline")
    label = "python -c 'import email, ssl, asyncio'"
    return [
        Figure(
            "startup_inbox",
            "3a. start-up: inbox --no-sync",
            "ms",
            median(times["inbox"]),
            floor,
            label,
            target,
            len(times["inbox"]),
            {
                "runs": [round(x, 1) for x in times["inbox"]],
                "imports": imports,
                **_cpu_details(cpu["inbox"], cpu["floor"]),
                "interpreter_ms": median(times["interpreter"]),
                "argparse_floor_ms": median(times["argparse"]),
                "argparse_floor_ratio": median(times["argparse"]) / floor,
            },
        ),
        Figure(
            "startup_help",
            "3b. start-up: --help",
            "ms",
            median(times["help"]),
            floor,
            label,
            target,
            len(times["help"]),
            {
                "runs": [round(x, 1) for x in times["help"]],
                "baseline_runs": [round(x, 1) for x in times["floor"]],
                **_cpu_details(cpu["help"], cpu["floor"]),
            },
        ),
    ]


def _cpu_details(ours: list[float], base: list[float]) -> dict[str, float]:
    """The same samples' CPU time (user + system, ms): under load it moves far less than the
    wall clock, so its ratio is the steadier before/after comparison."""
    return {"cpu_ms": median(ours), "baseline_cpu_ms": median(base), "cpu_ratio": median(ours) / median(base)}


_IMPORTTIME = re.compile(r"import time:\s+(\d+) \|\s+\d+ \| (\s*)(\S+)")


def import_costs(tb: TempBus, argv: list[str], runs: int = 3, top: int = 10) -> list[tuple[str, float]]:
    """``python -X importtime`` of one CLI command: self time (ms) summed per top-level package
    (agentmail per module), the least of ``runs`` runs, the ``top`` costliest first."""
    script = tb.cli[0] if len(tb.cli) == 1 else None
    command = [tb.installed.python, "-X", "importtime", *([script] if script else ["-m", "agentmail"]), *argv]
    best: dict[str, float] = {}
    for _ in range(runs):
        done = subprocess.run(command, env=tb.env, cwd=tb.home, capture_output=True, text=True, timeout=120)
        costs: dict[str, float] = {}
        for match in _IMPORTTIME.finditer(done.stderr):
            name = match.group(3)
            group = name if name.startswith("agentmail") else name.split(".")[0]
            costs[group] = costs.get(group, 0.0) + int(match.group(1)) / 1000
        for group, ms in costs.items():
            best[group] = min(best.get(group, ms), ms)
    return [(name, round(ms, 2)) for name, ms in sorted(best.items(), key=lambda kv: -kv[1])[:top]]
