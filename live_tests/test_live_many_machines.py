"""One platform on two machines over the live Dovecot (issue 25): the reply claim on the server.

Two homes of the receiver (empty spools, the same registry and secrets) race replies to the same
letters on one IMAP mailbox; Dovecot's CONDSTORE applies each claim for exactly one. A person's
mail client sees the letters and nothing more: no message added to INBOX, no folder added.
"""

from __future__ import annotations

import threading
import time

from conftest import LiveBus, eventually, opener

from agentmail.client.facade import AgentMail
from agentmail.errors import Refused
from agentmail.transport import Claimed

LETTERS = 50


def _sender(bus: LiveBus, name: str) -> AgentMail:
    """The sender on a home of its own, without the hourly new-thread cap (it opens many)."""
    registry, home = bus.variant(name)
    registry = registry.replace(bus=registry.bus.replace(new_threads_per_hour=0))
    return bus.client(bus.cfg.sender, home=home, registry=registry)


def _inbox_view(am: AgentMail) -> tuple[int, list[str]]:
    """(messages in INBOX, folder names): what a person's mail client lists."""
    client = am.transport._connect()  # type: ignore[attr-defined]
    folders = sorted(str(name) for _flags, _delim, name in client.list_folders())
    exists = int(client.select_folder("INBOX", readonly=True)[b"EXISTS"])
    return exists, folders


def test_two_machines_race_replies_on_dovecot_one_reply_each_and_the_inbox_shows_nothing_more(
    bus: LiveBus, token: str
) -> None:
    sender = _sender(bus, "race-sender")
    machines = []
    for name in ("laptop", "ci"):
        registry, home = bus.variant(f"machine-{name}")
        machines.append(bus.client(bus.cfg.receiver, home=home, registry=registry))
    exists_before, folders_before = _inbox_view(machines[0])
    sent = [
        sender.send(bus.cfg.receiver, f"{token} claim race {i}", opener(bus.cfg.sender, bus.cfg.receiver, token))
        for i in range(LETTERS)
    ]
    ids = [x.message_id for x in sent]

    def all_arrived(am: AgentMail) -> dict[str, str] | None:
        mine = {x.message_id: x.id for x in am.inbox() if x.message_id in ids}
        return mine if len(mine) == LETTERS else None

    local_ids = [eventually(lambda am=am: all_arrived(am), f"{LETTERS} letters on a machine") for am in machines]
    outcomes: list[dict[str, str]] = [{}, {}]
    start = threading.Barrier(2)
    timings: list[float] = [0.0, 0.0]

    def answer(i: int) -> None:
        start.wait()
        began = time.perf_counter()
        for message_id in ids:
            try:
                machines[i].reply(local_ids[i][message_id], "Reproduced; fixing.", type="ack", raise_refused=True)
                outcomes[i][message_id] = "sent"
            except Refused as exc:
                outcomes[i][message_id] = str(exc)
        timings[i] = time.perf_counter() - began

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    duplicates = lost = 0
    for message_id in ids:
        got = [outcomes[i][message_id] for i in range(2)]
        won = got.count("sent")
        duplicates += won > 1
        lost += won == 0
        loser = next((g for g in got if g != "sent"), "")
        assert "already answered (by " in loser, got
    acks = eventually(
        lambda: (lambda got: got if len(got) >= LETTERS else None)(
            [x for x in sender.inbox() if x.type == "ack" and x.in_reply_to in ids]
        ),
        f"{LETTERS} acks back at the sender",
        timeout=120,
    )
    per_letter = [sum(1 for x in acks if x.in_reply_to == m) for m in ids]
    print(
        f"live race: {LETTERS} letters, 2 machines, wins {[list(o.values()).count('sent') for o in outcomes]}, "
        f"duplicates {duplicates}, lost {lost}, acks received {len(acks)}; "
        f"{min(timings) * 1000 / LETTERS:.1f}-{max(timings) * 1000 / LETTERS:.1f} ms per reply per machine"
    )
    assert duplicates == lost == 0 and per_letter == [1] * LETTERS
    exists_after, folders_after = _inbox_view(machines[0])
    assert exists_after == exists_before + LETTERS  # the letters, and no claim record among them
    assert folders_after == folders_before


def test_a_claim_on_dovecot_costs_a_few_round_trips(bus: LiveBus, token: str) -> None:
    sender = _sender(bus, "cost-sender")
    registry, home = bus.variant("machine-cost")
    am = bus.client(bus.cfg.receiver, home=home, registry=registry)
    n = 10
    for i in range(n):
        sender.send(bus.cfg.receiver, f"{token} claim cost {i}", opener(bus.cfg.sender, bus.cfg.receiver, token))
    letters = eventually(
        lambda: (lambda got: got if len(got) == n else None)([x for x in am.inbox() if token in (x.subject or "")]),
        f"{n} letters",
    )
    transport = am.transport
    claim_ms: list[float] = []
    real = transport.claim_reply
    sent_real = transport.reply_sent

    def timed(*args: str) -> Claimed:
        began = time.perf_counter()
        try:
            return real(*args)
        finally:
            claim_ms.append((time.perf_counter() - began) * 1000)

    def timed_sent(*args: str) -> bool:
        began = time.perf_counter()
        try:
            return sent_real(*args)
        finally:
            claim_ms.append((time.perf_counter() - began) * 1000)

    transport.claim_reply = timed  # type: ignore[method-assign]  # timing only: the real call decides
    transport.reply_sent = timed_sent  # type: ignore[method-assign]
    before = transport.claim_commands  # type: ignore[attr-defined]
    for letter in letters:
        assert am.reply(letter, "On it.", type="ack") is not None
    commands = (transport.claim_commands - before) / n  # type: ignore[attr-defined]
    per_reply = sorted(claim_ms[i] + claim_ms[i + 1] for i in range(0, len(claim_ms), 2))
    print(f"live claim cost per reply: {commands:g} IMAP round trips, median {per_reply[len(per_reply) // 2]:.1f} ms")
    assert commands == 7
