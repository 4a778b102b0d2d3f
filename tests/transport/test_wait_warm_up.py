"""``wait`` judges one letter of its own before it blocks (issue 11: the first letter that lands
then pays no first-use costs). The warm-up must leave no trace: nothing filed, sent or claimed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.errors import Timeout
from agentmail.letter import wire
from agentmail.spool import STATES
from agentmail.spool.filing import SpoolWriter
from agentmail.trust import authenticity


def test_the_warm_up_before_blocking_files_and_sends_nothing(
    beta: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verdicts: list[str] = []
    real = authenticity.judge_unguarded

    def judge(raw: bytes, registry: object) -> authenticity.Verdict:
        verdict = real(raw, registry)  # type: ignore[arg-type]
        verdicts.append(verdict.route)
        return verdict

    looked: list[object] = []
    quick = wire.quick_identity

    def quick_identity(raw: bytes) -> tuple[str, str] | None:
        looked.append(quick(raw))
        return looked[-1]  # type: ignore[return-value]

    monkeypatch.setattr(authenticity, "judge_unguarded", judge)
    monkeypatch.setattr(wire, "quick_identity", quick_identity)
    with pytest.raises(Timeout):
        beta.wait(timeout=0.05)
    assert verdicts == ["accept"]  # the letter signed here passes the checks a real one meets
    assert len(looked) == 1 and looked[0] is not None  # and the duplicate check before judging ran too
    assert {state: beta.spool.read.ids(state) for state in STATES} == {state: [] for state in STATES}
    postoffice = home / "postoffice"
    assert not postoffice.exists() or not any(os.scandir(postoffice / "beta" / "new"))


def test_a_waiter_warms_up_once_not_at_every_wait_it_starts_again(
    beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``wait()`` loop (an agent waiting in turns, the peers' receiver) idles without signing,
    judging and a durable commit before each turn: the first wait warmed the process up."""
    judged: list[bytes] = []
    commits: list[str] = []
    real_judge, real_warm = authenticity.judge_unguarded, SpoolWriter.warm

    def judge(raw: bytes, registry: object) -> authenticity.Verdict:
        judged.append(raw)
        return real_judge(raw, registry)  # type: ignore[arg-type]

    def warm(self: SpoolWriter) -> None:
        commits.append("warm")
        real_warm(self)

    monkeypatch.setattr(authenticity, "judge_unguarded", judge)
    monkeypatch.setattr(SpoolWriter, "warm", warm)
    for _ in range(3):
        with pytest.raises(Timeout):
            beta.wait(timeout=0.01)
    assert len(judged) == 1 and commits == ["warm"]
