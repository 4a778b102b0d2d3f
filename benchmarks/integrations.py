"""Figures for the integrations (MCP, watch), each beside its baseline, on a throw-away bus.

    python benchmarks/integrations.py [--samples N]

1. the MCP tool list: characters as the SDK's client receives it, and an estimate in tokens;
2. the round trip of ``inbox`` with 10 unread letters: an MCP tool call on an open session
   (SDK client over stdio) beside ``agentmail inbox --json`` as a process, and the API call;
3. delivery into the local post office → the watcher's CMD start (a separate
   ``agentmail watch`` process; CMD is ``date``), median of N.

Nothing outside a temp directory is read or written.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.model import new_thread_id
from agentmail.stages.compose import Draft, compose
from agentmail.transport.local import deliver

PYTHON = sys.executable  # the venv's own: its realpath would lose the venv's packages
BODY = (
    "I am the agent of alpha; we call beta's /quota endpoint for every invoice. Reproduction: "
    "`curl -s https://beta.example/quota?id=7` returns status 500 since 2.4.1. Expected 200 per the "
    "documented contract. Blast radius: all free-plan invoices. Please fix."
)


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.1f} ms (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f}, n={len(values)})"


def tool_list(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    params = StdioServerParameters(
        command=PYTHON, args=["-m", "agentmail", "--as", "beta", "mcp"], env=env, cwd=str(cwd)
    )
    result: dict[str, Any] = {}

    async def main() -> None:
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            wire = json.dumps([t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools])
            result.update(tools=len(tools), chars=len(wire), tokens_estimate=round(len(wire) / 4))

    anyio.run(main)
    return result


def inbox_round_trips(env: dict[str, str], cwd: Path, samples: int) -> dict[str, list[float]]:
    params = StdioServerParameters(
        command=PYTHON, args=["-m", "agentmail", "--as", "beta", "mcp"], env=env, cwd=str(cwd)
    )
    times: dict[str, list[float]] = {"mcp": [], "cli": [], "api": [], "mcp_session_start": []}

    async def main() -> None:
        start = time.perf_counter()
        async with Client(params) as client:
            await client.call_tool("whoami", {})
            times["mcp_session_start"].append(time.perf_counter() - start)
            for _ in range(samples):
                start = time.perf_counter()
                result = await client.call_tool("inbox", {})
                times["mcp"].append(time.perf_counter() - start)
                assert len(json.loads(result.content[0].text)) == 10  # type: ignore[union-attr]

    anyio.run(main)
    for _ in range(samples):
        start = time.perf_counter()
        out = subprocess.run(
            [PYTHON, "-m", "agentmail", "--as", "beta", "--json", "inbox"],
            env=env,
            cwd=cwd,
            capture_output=True,
            check=True,
        ).stdout
        times["cli"].append(time.perf_counter() - start)
        assert len(json.loads(out)) == 10
    with AgentMail.from_env("beta") as am:
        for _ in range(samples):
            start = time.perf_counter()
            assert len(am.inbox()) == 10
            times["api"].append(time.perf_counter() - start)
    return times


def watch_latency(
    home: Path, alpha: AgentMail, env: dict[str, str], cwd: Path, samples: int
) -> tuple[list[float], list[float]]:
    out = cwd / "starts.txt"
    watcher = subprocess.Popen(
        [PYTHON, "-m", "agentmail", "--as", "beta", "watch", "--exec", f"date +%s.%N >> {out}"],
        env=env,
        cwd=cwd,
        stderr=subprocess.DEVNULL,
    )
    latencies, deliveries = [], []
    try:
        time.sleep(1.5)  # let it start and settle on its wait
        for _ in range(samples):
            beta = alpha.registry.get("beta")
            _, raw = compose(
                alpha.registry,
                alpha.home,
                alpha.me.platform,
                Draft(beta.name, "report", new_thread_id(), "Quota 500s", BODY),
            )
            before = len(out.read_text().splitlines()) if out.exists() else 0
            start = time.time()
            deliver(home / "postoffice" / "beta", raw)
            deliveries.append(time.time() - start)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                seen = out.read_text().splitlines() if out.exists() else []
                if len(seen) > before:
                    latencies.append(float(seen[-1]) - start)
                    break
                time.sleep(0.002)
            else:
                raise RuntimeError("the watcher did not run CMD within 10 s")
            time.sleep(0.05)
    finally:
        watcher.terminate()
        watcher.wait(10)
    return latencies, deliveries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentmail-bench-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        os.environ["AGENTMAIL_HOME"] = str(home)
        env = {**os.environ, "AGENTMAIL_HOME": str(home)}
        registry = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
        alpha = AgentMail(registry, Identity("alpha"), home)
        for n in range(10):
            alpha.send("beta", f"Problem {n}", BODY)

        listing = tool_list(env, Path(tmp))
        print(
            f"1. MCP tool list: {listing['tools']} tools, {listing['chars']} characters, ~{listing['tokens_estimate']} tokens (chars/4)"
        )
        times = inbox_round_trips(env, Path(tmp), args.samples)
        print(f"2. inbox with 10 unread: MCP tool call {ms(times['mcp'])}")
        print(f"                         CLI process   {ms(times['cli'])}")
        print(f"                         API call      {ms(times['api'])}")
        print(
            f"   (MCP server start + session + first call: {times['mcp_session_start'][0] * 1000:.0f} ms, once per session)"
        )
        latencies, deliveries = watch_latency(home, alpha, env, Path(tmp), args.samples)
        print(f"3. delivery → watcher CMD start: {ms(latencies)} (delivery itself {ms(deliveries)})")


if __name__ == "__main__":
    main()
