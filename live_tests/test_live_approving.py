"""Approving, live (issue 12): with a bus ``hold`` rule a letter is signed and kept in held/;
``flush`` never sends it; only ``agentmail approve`` does, exactly once. Run as CLI processes
against the live bus, as a person would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import LiveBus, opener, receive

from agentmail import registry as registry_mod
from agentmail.spool import Spool


def _cli(home: Path, registry: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL_")}
    env.update(AGENTMAIL_HOME=str(home), AGENTMAIL_REGISTRY=str(registry))
    done = subprocess.run([sys.executable, "-m", "agentmail", *args], env=env, cwd=home, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_a_held_letter_leaves_only_after_approve(bus: LiveBus, token: str) -> None:
    registry, home = bus.variant("approving", own_registry=True)
    me, them = bus.cfg.sender, bus.cfg.receiver
    code, _, err = _cli(home, registry.root, "bus", "set", "hold", registry.platforms[them].address)
    assert code == 0, err
    registry = registry_mod.load(registry.root)
    receiver = bus.client(them, home=home, registry=registry)  # its checkpoint: only what comes now
    code, out, err = _cli(home, registry.root, "--as", me, "--json", "send", them, "-s", f"Held {token}", "-b",
                          opener(me, them, token))  # fmt: skip
    assert code == 0, err
    held = json.loads(out)
    assert held["state"] == "held"
    assert _cli(home, registry.root, "--as", me, "flush")[0] in (0, 1)
    code, out, _ = _cli(home, registry.root, "--as", me, "--json", "held")
    assert [x["id"] for x in json.loads(out)] == [held["id"]]  # flush left it where it was
    assert Spool(home / "spool" / me).ids("sent") == []
    code, out, _ = _cli(home, registry.root, "--as", me, "--json", "status", "--no-sync")
    assert [r["delivery"] for r in json.loads(out) if r["thread"] == held["thread"]] == ["held"]
    code, out, err = _cli(home, registry.root, "--as", me, "approve", held["id"])
    assert code == 0 and out.split() == [held["thread"], held["id"], "sent"], (out, err)
    assert _cli(home, registry.root, "--as", me, "approve", held["id"])[0] == 1  # a second approve sends nothing
    (got,) = receive(receiver, held["thread"])
    assert got.message_id == held["message_id"]
