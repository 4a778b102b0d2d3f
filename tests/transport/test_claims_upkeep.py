"""The upkeep of reply claims (issue 25): the post office forgets claims answered long ago, never
one in flight; ``agentmail doctor`` names whether the IMAP server can hold claims (CONDSTORE)."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail._fs import locked
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.transport.claim_marks import ASIDE_AFTER, PRUNE_AFTER, Claims

from ..conftest import OPENER
from ..depth import examples
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import USERS, make_bus

DAY = 86400.0


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _files(root: Path, key: str) -> set[str]:
    return {p.name for p in root.iterdir() if p.name.startswith(key + ".")}


def test_prune_forgets_claims_answered_or_given_up_long_ago_and_keeps_the_rest(tmp_path: Path) -> None:
    claims = Claims(tmp_path)
    for letter in ("<old-sent@t>", "<old-free@t>", "<new-sent@t>", "<old-in-flight@t>", "<two-gens@t>"):
        assert claims.claim(letter, "A r1") is None
    claims.sent("<old-sent@t>", "A r1")
    claims.release("<old-free@t>", "A r1")
    claims.sent("<new-sent@t>", "A r1")
    claims.release("<two-gens@t>", "A r1")
    assert claims.claim("<two-gens@t>", "B r2") is None  # generation 1, then answered
    claims.sent("<two-gens@t>", "B r2")
    old = PRUNE_AFTER + DAY
    for letter, mark in (("<old-sent@t>", "0.sent"), ("<old-free@t>", "0.free"), ("<two-gens@t>", "1.sent")):
        _age(tmp_path / f"{Claims.key(letter)}.{mark}", old)
    _age(tmp_path / f"{Claims.key('<old-in-flight@t>')}.0", old)  # its home died a month ago
    (tmp_path / ".aside.1.2").write_bytes(b"A r1\n0\n")  # written aside, never linked in
    _age(tmp_path / ".aside.1.2", ASIDE_AFTER + 60)
    (tmp_path / ".aside.3.4").write_bytes(b"A r1\n0\n")  # being written now

    assert claims.prune() == 3
    for gone in ("<old-sent@t>", "<old-free@t>", "<two-gens@t>"):
        assert _files(tmp_path, Claims.key(gone)) == set()
    assert _files(tmp_path, Claims.key("<new-sent@t>")) == {
        f"{Claims.key('<new-sent@t>')}.{m}" for m in ("0", "0.sent")
    }
    assert claims.holder("<old-in-flight@t>") == "A r1"  # in flight, whatever its age: taken over, never pruned
    later = Claims(tmp_path, now=lambda: time.time() + old)  # its claim's own time is a month back
    assert later.claim("<old-in-flight@t>", "C r3") is None  # ... as it always was (stale)
    assert not (tmp_path / ".aside.1.2").exists() and (tmp_path / ".aside.3.4").exists()
    assert claims.claim("<new-sent@t>", "C r3") == "A r1"  # answered lately: still answered
    assert claims.claim("<old-sent@t>", "C r3") is None  # forgotten: a new first generation
    assert claims.holder("<old-sent@t>") == "C r3" and claims.claim("<old-sent@t>", "D r4") == "C r3"
    assert claims.prune() == 0


def test_prune_waits_for_no_home_and_makes_no_claim_see_it_half_done(tmp_path: Path) -> None:
    claims = Claims(tmp_path)
    assert Claims(tmp_path / "never").prune() == 0  # no claim ever made there
    assert claims.claim("<x@t>", "A r1") is None and claims.sent("<x@t>", "A r1")
    _age(tmp_path / f"{Claims.key('<x@t>')}.0.sent", PRUNE_AFTER + DAY)
    with locked(tmp_path / ".lock", shared=True):  # a home claiming right now
        assert claims.prune() is None  # not now: nothing removed, never waited
    assert claims.claim("<x@t>", "B r2") == "A r1"
    assert claims.prune() == 1


OPS = st.lists(
    st.tuples(st.sampled_from(["claim", "sent", "release", "later"]), st.sampled_from("ABC"), st.integers(0, 3)),
    max_size=30,
)


@settings(max_examples=examples(200), deadline=None)
@given(ops=OPS)
def test_prune_never_touches_a_claim_in_flight_and_forgets_each_resolved_one_whole(
    ops: list[tuple[str, str, int]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, clock = Path(tmp), [1e9]
        claims = Claims(root, stale_after=60, now=lambda: clock[0])
        for op, home, letter in ops:
            message_id = f"<{letter}@t>"
            if op == "claim":
                claims.claim(message_id, home)
            elif op == "sent":
                claims.sent(message_id, home)
            elif op == "release":
                claims.release(message_id, home)
            else:
                clock[0] += 61
        before = {i: (_files(root, Claims.key(f"<{i}@t>")), claims.holder(f"<{i}@t>")) for i in range(4)}
        resolved = {}
        for i, (names, _holder) in before.items():
            key = Claims.key(f"<{i}@t>")
            gens = [int(n.split(".")[1]) for n in names if n.count(".") == 1]
            resolved[i] = bool(gens) and bool({f"{key}.{max(gens)}.sent", f"{key}.{max(gens)}.free"} & names)
        assert claims.prune(older_than=-1) == sum(resolved.values())  # every resolved claim counts as old
        for i, (names, holder) in before.items():
            if resolved[i]:
                assert _files(root, Claims.key(f"<{i}@t>")) == set() and claims.holder(f"<{i}@t>") is None
            else:
                assert _files(root, Claims.key(f"<{i}@t>")) == names and claims.holder(f"<{i}@t>") == holder


def test_the_post_office_prunes_once_a_process_after_a_reply_left(tmp_path: Path) -> None:
    from agentmail.transport.local import LocalTransport

    transport = LocalTransport(tmp_path, "beta", lambda address: "alpha")
    root = transport.claims.root
    assert transport.claim_reply("<old@t>", "<old@t>", "beta R1").holder is None
    assert Claims(root).sent("<old@t>", "beta R1")
    _age(root / f"{Claims.key('<old@t>')}.0.sent", PRUNE_AFTER + DAY)
    assert transport.claim_reply("<new@t>", "<new@t>", "beta R2").holder is None
    assert transport.reply_sent("<new@t>", "<new@t>", "beta R2")
    assert Claims(root).holder("<old@t>") is None and Claims(root).holder("<new@t>") == "beta R2"


# --- doctor: can this IMAP server hold the claim? ----------------------------------------------


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def test_doctor_names_whether_the_imap_server_offers_condstore(home: Path, servers: MailServers) -> None:
    from agentmail.admin.doctor import run_checks

    make_bus(home, servers)
    checks = {c.name: c for c in run_checks(home, home / "registry", "beta", None)}
    assert checks["imap claims"].ok and "CONDSTORE offered (RFC 7162)" in checks["imap claims"].detail
    assert "answer each letter once" in checks["imap claims"].detail
    servers.store.condstore = False
    checks = {c.name: c for c in run_checks(home, home / "registry", "beta", None)}
    line = checks["imap claims"].detail
    assert checks["imap claims"].ok  # one machine is fine: said, not failed
    assert line.startswith("no CONDSTORE (RFC 7162): replies are claimed per machine only") and "\n" not in line
    servers.store.condstore, servers.store.keywords = True, False
    checks = {c.name: c for c in run_checks(home, home / "registry", "beta", None)}
    assert checks["imap claims"].detail.startswith("no keywords kept (PERMANENTFLAGS without \\*)")


# --- what a long-lived process remembers of its claims stays bounded ---------------------------


def test_a_long_lived_process_remembers_a_bounded_number_of_claimed_places(
    home: Path, servers: MailServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentmail.config import registry as registry_mod
    from agentmail.transport.smtpimap import SmtpImapTransport

    make_bus(home, servers)
    monkeypatch.setattr(SmtpImapTransport, "CLAIM_PLACES", 3)
    ids = [f"<{i}@bus.test>" for i in range(5)]
    for message_id in ids:
        servers.store.inject("beta@bus.test", f"Message-ID: {message_id}\r\nSubject: x\r\n\r\nbody\r\n".encode())
    transport = SmtpImapTransport.from_registry(registry_mod.load(home / "registry"), "beta", home)
    try:
        for i, message_id in enumerate(ids):
            assert transport.claim_reply(message_id, message_id, f"beta R{i}").holder is None
        assert list(transport._claim_places) == ids[2:]  # the oldest forgotten
        assert transport.reply_sent(ids[0], ids[0], "beta R0")  # found again by its SEARCH
        assert transport.claim_reply(ids[0], ids[0], "beta R9").holder == "beta R0"
    finally:
        transport.close()


def test_the_fresh_claims_a_transport_remembers_are_only_the_fresh_ones(
    monkeypatch: pytest.MonkeyPatch, registry: Registry, home: Path
) -> None:
    import types

    from agentmail.spool import server_claims

    clock = [1000.0]
    monkeypatch.setattr(server_claims, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    with AgentMail(registry, Identity("alpha"), home) as alpha:
        for i in range(2):
            alpha.send("beta", f"Quota {i}", OPENER)
    with AgentMail(registry, Identity("beta"), home) as beta:
        held, later = beta.inbox()
        kept = beta.reply(held, "On it.", type="ack", hold=True)  # claimed, waits for a person
        assert kept is not None and kept.state == "held"
        assert list(server_claims._fresh[beta.transport]) == [("beta", kept.id)]
        clock[0] += server_claims.FRESH
        assert beta.reply(later, "On it.", type="ack") is not None  # claimed and sent at once
        assert server_claims._fresh[beta.transport] == {}  # the held one's moment is past: forgotten
