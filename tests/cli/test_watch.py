"""`agentmail watch --exec`: once per letter, never again after a restart, bounded, budgeted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agentmail.cli.app import main
from agentmail.cli.watch import Watcher
from agentmail.client.facade import AgentMail
from agentmail.errors import ConfigError

from ..conftest import OPENER, eventually

RECORD = 'echo "$AGENTMAIL_LETTER_ID $AGENTMAIL_TYPE $AGENTMAIL_THREAD $AGENTMAIL_FROM $AGENTMAIL_PLATFORM" >> {out}'


def lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def test_each_letter_runs_once_with_its_facts_in_the_environment(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path
) -> None:
    out = tmp_path / "runs.txt"
    first = alpha.send("beta", "Quota 500s", OPENER)
    second = alpha.send("beta", "Another one", OPENER)
    assert main(["--as", "beta", "watch", "--once", "--exec", RECORD.format(out=out)]) == 0
    ids = [x.id for x in beta.inbox()]
    assert sorted(lines(out)) == sorted(
        [[ids[0], "report", first.thread, "alpha", "beta"], [ids[1], "report", second.thread, "alpha", "beta"]]
    )
    assert main(["--as", "beta", "watch", "--once", "--exec", RECORD.format(out=out)]) == 0  # a restart
    assert len(lines(out)) == 2
    alpha.send("beta", "A third", OPENER)
    assert main(["--as", "beta", "watch", "--once", "--exec", RECORD.format(out=out)]) == 0
    assert len(lines(out)) == 3


def test_the_command_can_answer_as_this_mailbox(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    import sys

    alpha.send("beta", "Quota 500s", OPENER)
    answer = f'{sys.executable} -m agentmail reply "$AGENTMAIL_LETTER_ID" -b "Reproduced." -t ack'
    assert Watcher(beta, answer, log=lambda _: None).run(once=True) == 1
    assert [x.type for x in alpha.inbox()] == ["ack"] and beta.inbox() == []


def test_a_thread_gets_at_most_its_budget_of_runs_per_hour(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    out, said = tmp_path / "runs.txt", []
    report = alpha.send("beta", "Quota 500s", OPENER)
    for _ in range(3):
        alpha.follow_up(report.thread, "And one more detail.", type="question")
    other = alpha.send("beta", "Unrelated", OPENER)
    assert Watcher(beta, RECORD.format(out=out), budget=2, log=said.append).run(once=True) == 3
    threads = [x[2] for x in lines(out)]
    assert threads.count(report.thread) == 2 and threads.count(other.thread) == 1
    assert len(said) == 2 and all("not run" in s for s in said)
    assert Watcher(beta, RECORD.format(out=out), budget=2, log=said.append).run(once=True) == 0  # still over budget
    assert len(beta.inbox()) == 5  # nothing was consumed behind the agent's back


def test_concurrency_is_bounded(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    """Each run holds its slot until the test has seen two running at once, then lets them all go;
    each run records how many were running as it started. No clock is involved."""
    running, counts, release = tmp_path / "running", tmp_path / "counts.txt", tmp_path / "release"
    running.mkdir()
    for n in range(5):
        alpha.send("beta", f"Letter {n}", OPENER)
    command = (
        f"touch {running}/$AGENTMAIL_LETTER_ID; ls {running} | wc -l >> {counts}; "
        f"while [ ! -e {release} ]; do sleep 0.01; done; rm {running}/$AGENTMAIL_LETTER_ID"
    )
    watcher = Watcher(beta, command, jobs=2)
    runner = threading.Thread(target=watcher.run, kwargs={"once": True})
    runner.start()
    try:
        assert eventually(lambda: len(os.listdir(running)) == 2), "two runs never ran at once"
    finally:
        release.touch()
        runner.join(60)
    assert watcher.started == 5
    assert max(int(x) for x in counts.read_text().split()) == 2


def test_a_run_cut_short_is_reported_not_repeated(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    letter = alpha.send("beta", "Quota 500s", OPENER)
    (received,) = beta.inbox()
    state = beta.spool.root / "watch" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text(
        json.dumps({"handled": {received.message_id: {"id": received.id, "status": "running", "at": time.time()}}})
    )
    said: list[str] = []
    assert Watcher(beta, "false", log=said.append).run(once=True) == 0
    assert "was running when the last watcher stopped" in said[0] and letter.thread
    assert json.loads(state.read_text())["handled"][received.message_id]["status"] == "interrupted"


def test_one_watcher_per_mailbox_and_once_is_refused_while_another_runs(
    beta: AgentMail, registry: object, home: Path
) -> None:
    first = Watcher(beta, "true")
    thread = threading.Thread(target=first.run, kwargs={"timeout": 60})
    thread.start()
    try:
        assert eventually((beta.spool.root / "watch" / "state.json").exists)  # written under the lock
        with pytest.raises(ConfigError, match="another watcher"):
            Watcher(AgentMail(beta.registry, beta.me, home), "true").run(once=True)
    finally:
        first.stop()
        thread.join()


def test_a_new_letter_starts_the_command(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    """That the wake comes from inotify, not the slice, is tests/transport/test_wake.py's; this is the run."""
    out = tmp_path / "runs.txt"
    watcher = Watcher(beta, RECORD.format(out=out))
    thread = threading.Thread(target=watcher.run, kwargs={"timeout": 60})
    thread.start()
    try:
        assert eventually((beta.spool.root / "watch" / "state.json").exists)
        alpha.send("beta", "Quota 500s", OPENER)
        assert eventually(out.exists)
    finally:
        watcher.stop()
        thread.join()
    assert len(lines(out)) == 1


def test_a_stop_while_the_state_is_first_saved_is_clean(beta: AgentMail, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM (a KeyboardInterrupt, cli.py) that lands while the watcher first saves its state
    stops it like any other: seen under load, when the signal came right after state.json appeared."""
    from agentmail.cli import watch

    def interrupted(self: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(watch.State, "save", interrupted)
    said: list[str] = []
    assert Watcher(beta, "true", log=said.append).run() == 0
    assert "agentmail watch: stopping; waiting for running commands" in said


def test_sigterm_stops_the_watcher_cleanly(registry: object, home: Path, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "agentmail", "--as", "beta", "watch", "--exec", "true"],
        env={**os.environ, "AGENTMAIL_HOME": str(home)},
        stderr=subprocess.PIPE,
        text=True,
    )
    # state.json is written after the handler is installed: from then on SIGTERM is a clean stop.
    assert eventually((home / "spool" / "beta" / "watch" / "state.json").exists), "the watcher never started"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0  # a margin for a loaded machine: the stop is prompt, the bound is not the claim
    assert "agentmail watch: 0 run(s)" in proc.stderr.read()  # type: ignore[union-attr]


def _watcher(home: Path, out: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "AGENTMAIL_HOME": str(home)}
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "agentmail", "--as", "beta", "watch", "--exec", RECORD.format(out=out)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
        )  # fmt: skip


def test_a_second_watcher_stands_by_and_takes_over_when_the_first_stops(
    alpha: AgentMail, beta: AgentMail, home: Path, tmp_path: Path
) -> None:
    """Two processes, one consumer at a time: the second waits on the lock while the first
    handles letters, takes over when it stops, and no letter is handled twice."""
    out, first_log, second_log = tmp_path / "runs.txt", tmp_path / "first.log", tmp_path / "second.log"
    first = _watcher(home, out, first_log)
    second = None
    try:
        assert eventually((beta.spool.root / "watch" / "state.json").exists)  # the first holds the lock
        second = _watcher(home, out, second_log)
        assert eventually(lambda: "standing by to take over" in second_log.read_text())
        one = alpha.send("beta", "Quota 500s", OPENER)
        assert eventually(lambda: len(lines(out)) == 1)
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0
        assert eventually(lambda: "taking over beta" in second_log.read_text())
        two = alpha.send("beta", "Another one", OPENER)
        assert eventually(lambda: len(lines(out)) == 2)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
    assert [row[2] for row in lines(out)] == [one.thread, two.thread]  # each once, in turn
    assert "taking over" not in first_log.read_text() and "standing by" not in first_log.read_text()


def test_a_standby_stopped_before_it_takes_over_handles_nothing(beta: AgentMail, home: Path) -> None:
    first = Watcher(beta, "true")
    thread = threading.Thread(target=first.run, kwargs={"timeout": 60})
    thread.start()
    try:
        assert eventually((beta.spool.root / "watch" / "state.json").exists)
        said: list[str] = []
        standby = Watcher(AgentMail(beta.registry, beta.me, home), "true", log=said.append)
        assert standby.run(timeout=0) == 0  # its time ran out while the first still held the mailbox
        assert said == ["agentmail watch: another watcher is running for beta; standing by to take over when it stops"]
    finally:
        first.stop()
        thread.join()
