"""IDLE wakes a waiting agent on Dovecot with no fixed poll anywhere on the path (issue 28 target 3).

The receiver waits in ``AgentMail.wait``; the letter is sent only once the receiver's IMAP
connection has entered IDLE (a hook on its ``idle`` call says so: no timer, no sleep). While it
waits, ``time.sleep`` on the transport's path raises, and every IMAP command the receiver sends
is counted: a poll would show as NOOPs, IDLE as one IDLE after the looks of one sync.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from conftest import LiveBus, opener

from agentmail.client.facade import AgentMail
from agentmail.transport import smtpimap


def test_a_waiting_agent_is_woken_by_idle_with_no_sleep_and_no_poll_on_the_path(
    bus: LiveBus, sender: AgentMail, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if bus.registry.bus.poll_interval:
        pytest.skip("this bus sets [imap] poll_interval: it polls by choice")
    registry, home = bus.variant("wake")
    receiver = bus.client(bus.cfg.receiver, home=home, registry=registry)
    transport: Any = receiver.transport
    client = transport._connect()
    idling = threading.Event()
    commands: list[str] = []
    real_idle, real_command = client.idle, client._imap._command

    def idle() -> Any:
        result = real_idle()
        idling.set()  # the server has answered "+ idling": a letter now can only be announced
        return result

    def command(name: str, *args: Any) -> Any:
        commands.append(name)
        return real_command(name, *args)

    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"a fixed sleep of {seconds} s on the wait path")

    monkeypatch.setattr(client, "idle", idle)
    monkeypatch.setattr(client._imap, "_command", command)
    monkeypatch.setattr(smtpimap.time, "sleep", no_sleep)
    subject = f"Wake by IDLE {token}"
    body = opener(sender.me.platform, receiver.me.platform, token)
    got: dict[str, Any] = {}

    def wait() -> None:
        try:
            while True:
                got["letter"], got["mechanism"] = receiver.wait(60, type="question")
                if got["letter"].subject == subject:
                    return
                receiver.done(got["letter"].id)  # another check's question on the shared mailbox
        except BaseException as exc:  # reported below, in the test's own thread
            got["error"] = exc
            idling.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert idling.wait(60), "the receiver never entered IDLE"
    assert "error" not in got, got.get("error")
    before_send = list(commands)
    sent = sender.send(receiver.me.platform, subject, body, type="question")
    waiter.join(90)
    assert not waiter.is_alive() and "error" not in got, got.get("error")
    assert got["letter"].message_id == sent.message_id
    assert got["mechanism"] == "idle"
    # Until the letter was sent: the looks of one sync, then one IDLE; never a NOOP (a poll).
    assert before_send.count("IDLE") == 1 and before_send[-1] == "IDLE", before_send
    assert "NOOP" not in commands, commands
