"""``python -m benchmarks [--quick] [--json-out FILE] [--only STEP...]``: run, print, write.

Prints one table (agentmail, baseline, ratio, target) and writes the same figures as JSON
(default ``benchmarks/results.json``). Everything happens in one temp folder, removed at the
end whatever happens.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from . import bigsearch, cli, history, livedrill, local, scale, search, smtpimap
from .common import REPO, Settings, hermetic_environ, machine, remove_tree
from .install import user_cli
from .report import Figure, table, write_json

Step = Callable[[Path, Settings], Figure | list[Figure]]
STEPS: dict[str, Step] = {
    "latency": local.warm_latency,
    "roundtrip": cli.round_trip,
    "startup": cli.start_up,
    "send": local.send_throughput,
    "sync": local.sync_throughput,
    "scale": scale.scale,
    "history": history.history,
    "search": search.search,
    "bigsearch": bigsearch.big_search,
    "smtpimap": smtpimap.figures,
    "livedrill": livedrill.figures,  # only with the repo's mail stack running (else skipped, saying how)
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description="agentmail figures beside their baselines: one table, and JSON."
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, under a minute (what the test runs)")
    parser.add_argument("--json-out", type=Path, default=REPO / "benchmarks" / "results.json", metavar="FILE")
    parser.add_argument(
        "--only", nargs="+", choices=sorted(STEPS), metavar="STEP", help=f"run only these: {', '.join(STEPS)}"
    )
    args = parser.parse_args(argv)
    settings = Settings.fast() if args.quick else Settings.full()
    about = machine()
    about["load_before"] = [round(x, 2) for x in os.getloadavg()]
    print(
        f"agentmail benchmarks ({'quick' if args.quick else 'full'}): {about['cores']} cores, "
        f"Python {about['python']}, load {about['load_before']}",
        flush=True,
    )
    figures: list[Figure] = []
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="agentmail-bench-"))
    try:
        with hermetic_environ(root):
            about["cli"] = user_cli(root).how  # what the CLI figures measured
            for name, step in STEPS.items():
                if args.only and name not in args.only:
                    continue
                step_start = time.perf_counter()
                print(f"  {name} ...", end="", flush=True)
                made = step(root, settings)
                figures.extend(made if isinstance(made, list) else [made])
                print(f" {time.perf_counter() - step_start:.1f} s", flush=True)
    finally:
        remove_tree(root)
    seconds = time.perf_counter() - started
    about["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print()
    print(table(figures))
    for figure in figures:
        if "cpu_ms" in figure.details:
            d = figure.details
            print(
                f"CPU time (user + system), {figure.title}: {d['cpu_ms']:.1f} ms vs {d['baseline_cpu_ms']:.1f} ms = {d['cpu_ratio']:.2f}x"
            )
    for figure in figures:
        if "signed_floor_ratio" in figure.details:
            d = figure.details
            print(
                f"{figure.title}, its floor signed with dkimpy (signed_floor.py, then the bare delivery): "
                f"{d['signed_floor']:,.0f} letters/s = {d['signed_floor_ratio']:.2f}x baseline"
            )
        elif "signed_floor" in figure.details:
            d = figure.details
            print(
                f"{figure.title}, its floor signed and verified with dkimpy (signed_floor.py: bare delivery, "
                f"a reader that verifies and moves it to cur/ durably): median {d['signed_floor']:.1f} ms, p95 {d['signed_floor_p95']:.1f} ms"
            )
        if "argparse_floor_ms" in figure.details:
            d = figure.details
            print(
                f"{figure.title}, its floor in the CLI's interpreter: `python -c pass` {d['interpreter_ms']:.1f} ms; "
                f"a one-command argparse CLI printing the unread rows (argparse_floor.py) "
                f"{d['argparse_floor_ms']:.1f} ms = {d['argparse_floor_ratio']:.2f}x baseline"
            )
    for figure in figures:
        for command, costs in figure.details.get("imports", {}).items():
            listed = ", ".join(f"{name} {ms:.1f}" for name, ms in costs)
            print(
                f"\nimport costs, agentmail {command} (python -X importtime, self ms, least of 3 runs; 1 with --quick): {listed}"
            )
    print(f"\n{len(figures)} figures in {seconds:.0f} s; JSON: {args.json_out}")
    write_json(args.json_out, about, "quick" if args.quick else "full", seconds, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
