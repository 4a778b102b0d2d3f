"""Attacks on "a stall is announced once across the machines of a platform" by a co-tenant of the
local post office (docs/threat/attacks-session7x.md, C): the shared ``.claims/`` folder replaced
by a file, or its lock by a folder. The sync is not failed, the problem is said in one line, no
letter goes to people while no claim can be made, and once the folder is usable the stalls are
announced once each, however many machines sync."""

from __future__ import annotations

from pathlib import Path

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry

from .test_digest import FOLLOWER, Clock, clock, mailbox_of  # noqa: F401  (the fixture)
from .test_escalation import followed, records  # noqa: F401  (the fixture)
from .test_escalation_machines_attack import MINUTE, second_home, stalled


def test_a_claims_folder_planted_as_a_file_holds_back_every_stall_then_each_is_announced_once(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
) -> None:
    other = second_home(home)
    stalled(followed, home, other, clock, ("Quota 500s", "Disk full"))
    claims = home / "postoffice" / "alpha" / ".claims"
    if claims.is_dir():
        for path in claims.iterdir():
            path.unlink()
        claims.rmdir()
    claims.write_bytes(b"planted\n")
    on_a, on_b = AgentMail(followed, Identity("alpha"), home), AgentMail(followed, Identity("alpha"), other)
    for machine in (on_a, on_b):
        problem = machine.sync().escalation_problem
        assert problem is not None and problem.startswith(
            "could not announce to the followers: the post office's claims"
        )
        assert "\n" not in problem
    assert mailbox_of(home, FOLLOWER) == []
    claims.unlink()
    clock.advance(2 * MINUTE)
    for machine in (on_a, on_b, on_a):
        assert machine.sync().escalation_problem is None
    assert len(mailbox_of(home, FOLLOWER)) == 2  # each stall once, across both machines
    assert sorted(str(r["state"]) for r in records(home)) == ["sent", "sent"]
