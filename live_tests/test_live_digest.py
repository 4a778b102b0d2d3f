"""The digest and "needs a person", live (issue 26): a follower's own mailbox on the stack
receives the digest and the escalation through the real MTA, and mutt — the person's client —
shows each as a plain letter: the summary lines, no agent front matter, nothing over 78
characters."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import imapclient
import pytest
from conftest import LiveBus, eventually, opener
from mutt_screen import run_on_pty

from agentmail import ages, model
from agentmail.admin import bus as bus_mod
from agentmail.config import registry as registry_mod
from agentmail.transport.smtpimap import tls_context

PERSON = "carol@bus.test"  # a person's mailbox on the stack (live_tests/mailstack/up BASE_USERS)


def _mutt_rc(bus: LiveBus) -> tuple[str, Path]:
    mutt = shutil.which(os.environ.get("LIVE_BUS_MUTT", "mutt"))
    if mutt is None:
        pytest.fail("mutt is not installed (live_tests/mailstack/up installs it)", pytrace=False)
    rc = Path((bus.cfg.stack or {})["MAILSTACK_DIR"]) / "mutt" / f"{PERSON}.muttrc"
    if not rc.is_file():
        pytest.fail(f"no mutt configuration {rc}: restart the stack with live_tests/mailstack/up", pytrace=False)
    return mutt, rc


def _arrived(bus: LiveBus, message_id: str) -> bool | None:
    """True once ``message_id`` is in the person's INBOX (their own login, read-only)."""
    users = {u["address"]: u["password"] for u in (bus.cfg.stack or {}).get("users", [])}
    imap = bus.registry.bus.imap
    assert imap is not None and PERSON in users, f"{PERSON} has no mailbox on the stack: restart it"
    with imapclient.IMAPClient(
        imap.host, port=imap.port, ssl=True, ssl_context=tls_context(bus.registry.bus.ca_file)
    ) as person:
        person.login(PERSON, users[PERSON])
        person.select_folder("INBOX", readonly=True)
        return bool(person.search(["HEADER", "Message-ID", message_id])) or None


def _as_mutt_shows_it(mutt: str, rc: Path, message_id: str, tmp: Path) -> str | None:
    """The letter with ``message_id`` in the person's INBOX as mutt decodes it for a person
    (``pipe_decode``: the headers mutt shows, then the text), or None while it is not there."""
    out = tmp / f"shown-{message_id.strip('<>').split('.')[0]}.txt"
    out.unlink(missing_ok=True)
    wanted = message_id.strip("<>").split("@")[0]
    keys = (
        f"set pipe_decode = yes; set wait_key = no; push '<limit>~i {wanted}<enter>"
        f"<pipe-message>cat > {out}.part && mv {out}.part {out}<enter><exit><quit>'"
    )
    run_on_pty(mutt, rc, keys, tmp, term="vt100", cols=120, enough=lambda _: out.is_file() and out.stat().st_size > 0)
    return out.read_text() if out.is_file() and out.stat().st_size else None


def test_a_follower_reads_the_digest_and_the_needs_a_person_letter_in_mutt(
    bus: LiveBus, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not bus.cfg.is_stack:
        pytest.skip("needs the loopback stack's person mailbox and mutt configuration")
    mutt, rc = _mutt_rc(bus)
    registry, home = bus.variant("digest", own_registry=True)
    bus_mod.set_person(registry, bus.cfg.sender, PERSON, follows=True, writes=True)
    bus_mod.set_setting(registry.root, "stale_after", ["1d"])
    registry = registry_mod.load(registry.root)
    agent = bus.client(bus.cfg.sender, home=home, registry=registry)
    sent = agent.send(bus.cfg.receiver, f"Digest {token}", opener(bus.cfg.sender, bus.cfg.receiver, token))
    assert sent.state == "sent", sent.extra

    made = agent.send_digest(agent.digest())
    assert made["status"] == "sent", made
    eventually(lambda: _arrived(bus, made["message_id"]), f"{PERSON}: the digest")
    shown = _as_mutt_shows_it(mutt, rc, made["message_id"], tmp_path)
    assert shown, "mutt did not show the digest"
    assert f"Digest of {bus.cfg.sender}" in shown and sent.thread in shown and f'"Digest {token}"' in shown
    assert "--- agentmail" not in shown and "type: " not in shown
    body = shown.split("\n\n", 1)[1]
    assert all(len(line) <= 78 for line in body.splitlines()), body

    now = ages.now_ms() / 1000
    monkeypatch.setattr(model, "_last_ulid", (0, 0))  # undone after: later ids are not held days ahead
    # The platform's picture holds every thread the other live checks opened, all stale two days
    # on, and escalations are bounded per run and per counterpart a day (bounds.py): a day more
    # each sync until this thread's turn comes (each run announces at most ANNOUNCE_PER_RUN).
    mine: list[dict[str, object]] = []
    for day in range(2, 200):
        monkeypatch.setattr(ages, "clock", lambda day=day: now + day * 86400)  # past stale_after
        agent.sync()
        mine = [r for r in agent.escalated if r["thread"] == sent.thread]
        if mine:
            break
    (record,) = mine
    assert record["state"] == "sent", record
    eventually(lambda: _arrived(bus, record["message_id"]), f"{PERSON}: the escalation")
    shown = _as_mutt_shows_it(mutt, rc, record["message_id"], tmp_path)
    assert shown, "mutt did not show the escalation"
    assert f"Thread {sent.thread} between {bus.cfg.sender} and {bus.cfg.receiver} needs a person." in shown
    assert "[needs a person]" in shown and "> " in shown and "--- agentmail" not in shown
    again = bus.client(bus.cfg.sender, home=home, registry=registry)  # a restart: said once, not again
    report = again.sync()
    assert again.escalated == [] and report.escalation_problem is None
