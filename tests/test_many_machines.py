"""Reply claims across homes and machines of one platform (issue 25): the post office's claims, the IMAP claim, and the wired reply path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from agentmail.transport.claims import Claims

RACER = """
import json, sys
from pathlib import Path
from agentmail.transport.claims import Claims
root, me, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sys.stdin.readline()  # start together
won = [i for i in range(n) if Claims(root).claim(f"<letter-{i}@alpha.test>", me) is None]
print(json.dumps(won))
"""


def test_two_processes_racing_50_letters_each_won_once(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(tmp_path), f"home{h} R{h}", "50"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for h in range(2)
    ]
    outs = [p.communicate("go\n", timeout=60)[0] for p in procs]
    won = [set(json.loads(o)) for o in outs]
    assert won[0].isdisjoint(won[1]) and won[0] | won[1] == set(range(50))
    claims = Claims(tmp_path)
    for i in range(50):
        winner = "home0 R0" if i in won[0] else "home1 R1"
        assert claims.holder(f"<letter-{i}@alpha.test>") == winner
        loser = "home1 R1" if winner == "home0 R0" else "home0 R0"
        assert claims.claim(f"<letter-{i}@alpha.test>", loser) == winner  # the loser is told who


def test_a_dead_homes_claim_is_taken_over_after_the_stated_time_once(tmp_path: Path) -> None:
    clock = [1_000.0]
    a = Claims(tmp_path, stale_after=600, now=lambda: clock[0])
    b = Claims(tmp_path, stale_after=600, now=lambda: clock[0])
    c = Claims(tmp_path, stale_after=600, now=lambda: clock[0])
    assert a.claim("<x@t>", "A r1") is None  # then A dies before sending
    clock[0] += 599
    assert b.claim("<x@t>", "B r2") == "A r1"  # still in flight
    clock[0] += 2
    assert b.claim("<x@t>", "B r2") is None  # taken over
    assert c.claim("<x@t>", "C r3") == "B r2"  # exactly once
    assert b.sent("<x@t>", "B r2")
    assert not a.sent("<x@t>", "A r1")  # A's late reply is told it lost the claim
    clock[0] += 10_000
    assert c.claim("<x@t>", "C r3") == "B r2"  # a sent claim is never taken over


def test_a_sent_claim_holds_for_ever_and_the_holder_may_ask_again(tmp_path: Path) -> None:
    claims = Claims(tmp_path, now=lambda: 0.0)
    assert claims.claim("<y@t>", "A r1") is None
    assert claims.claim("<y@t>", "A r1") is None
    assert claims.sent("<y@t>", "A r1")
    assert claims.claim("<y@t>", "A r1") == "A r1"  # answered: not even its holder answers twice
    assert Claims(tmp_path, now=lambda: 1e9).claim("<y@t>", "B r2") == "A r1"


class Homes(RuleBasedStateMachine):
    """Several homes reply / send / crash / rejoin: never two sent replies to one letter, and
    every letter ends answerable or answered (nothing lost)."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.dir = Path(tempfile.mkdtemp())
        self.clock = 0.0
        self.live: dict[str, str | None] = {}  # home -> letter it holds a claim on, unsent
        self.sent: dict[str, list[str]] = {}  # letter -> homes whose reply went out

    def claims(self) -> Claims:
        return Claims(self.dir, stale_after=60, now=lambda: self.clock)

    @rule(home=st.sampled_from("ABC"), letter=st.sampled_from(["<1@t>", "<2@t>", "<3@t>"]))
    def reply(self, home: str, letter: str) -> None:
        if self.claims().claim(letter, home) is None:
            self.live[home] = letter

    @rule(home=st.sampled_from("ABC"))
    def send(self, home: str) -> None:
        letter = self.live.pop(home, None)
        if letter and self.claims().sent(letter, home):
            self.sent.setdefault(letter, []).append(home)

    @rule(home=st.sampled_from("ABC"))
    def crash(self, home: str) -> None:
        self.live.pop(home, None)  # its claim stays on disk, never sent

    @rule(seconds=st.sampled_from([1.0, 30.0, 61.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock += seconds

    @invariant()
    def never_two_replies(self) -> None:
        assert all(len(set(homes)) == len(homes) == 1 for homes in self.sent.values())

    @invariant()
    def nothing_lost(self) -> None:
        for letter in ["<1@t>", "<2@t>", "<3@t>"]:
            if letter not in self.sent:  # unanswered: some home can still win it in time
                later = Claims(self.dir, stale_after=60, now=lambda: self.clock + 61)
                holder = later.holder(letter)
                assert later.claim(letter, holder or "Z") is None
                if holder is None:
                    for gen in self.dir.glob(Claims.key(letter) + ".*"):
                        gen.unlink()  # the probe's own claim: undo it


TestHomes = Homes.TestCase
TestHomes.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
