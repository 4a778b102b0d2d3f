"""Attack on "needs a person" once: the platform's two machines (two homes on one post office,
or on one IMAP mailbox) each announce a thread a partner let stall (docs/threat/attacks-session6.md).
The stall is claimed on the server before its letter leaves (people/escalation.py,
docs/threat/escalation-once.md): two machines racing, a machine killed between its claim and
its letter, and records planted on the server, with the follower's mailbox as the judge."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail import bounds
from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.client.to_people import ToPeople
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import TransportError
from agentmail.people import escalation
from agentmail.people.escalation import CLAIM_KEY
from agentmail.transport import smtpimap
from agentmail.transport.claim_marks import STALE_AFTER, Claims
from agentmail.transport.local import LocalTransport

from ..conftest import OPENER
from ..depth import examples, suppressed
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import make_bus, servers  # noqa: F401  (the fixture)
from .test_digest import DAY, FOLLOWER, Clock, clock, mailbox_of  # noqa: F401  (the fixture)
from .test_escalation import followed, records  # noqa: F401  (the fixture)

MINUTE = 60


class Killed(BaseException):
    """The machine dies here (raised from a hook, never caught by agentmail)."""


def second_home(home: Path) -> Path:
    """Another machine of the platform on the same post office: its keys, an empty spool."""
    (home / "postoffice").mkdir(exist_ok=True)
    other = home.parent / "home-b"
    other.mkdir()
    shutil.copytree(home / "secrets", other / "secrets")
    (other / "postoffice").symlink_to(home / "postoffice", target_is_directory=True)
    return other


def stalled(
    reg: Registry, home: Path, other: Path, clock: Clock, subjects: tuple[str, ...] = ("Quota 500s",)
) -> list[str]:  # noqa: F811
    """Beta opens threads with alpha, read on both machines, then left four days: their last Message-IDs."""
    on_a, on_b = AgentMail(reg, Identity("alpha"), home), AgentMail(reg, Identity("alpha"), other)
    sent = [AgentMail(reg, Identity("beta"), home).send("alpha", s, OPENER).message_id for s in subjects]
    on_a.sync(), on_b.sync()
    clock.advance(4 * DAY)
    return sent


def on_the_clock(reg: Registry, where: Path, clock: Clock) -> AgentMail:
    """alpha on the machine whose home is ``where``, its post-office claims timed by ``clock``."""
    client = AgentMail(reg, Identity("alpha"), where)
    local_claims(client).now = clock
    return client


def local_claims(client: AgentMail) -> Claims:
    transport = client.transport
    assert isinstance(transport, LocalTransport)
    return transport.claims


def test_two_machines_of_a_platform_announce_a_stalled_thread_once_between_them(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
) -> None:
    other = second_home(home)
    on_a, on_b = AgentMail(followed, Identity("alpha"), home), AgentMail(followed, Identity("alpha"), other)
    beta = AgentMail(followed, Identity("beta"), home)
    on_a.sync(), on_b.sync()
    beta.send("alpha", "Quota 500s", OPENER)
    on_a.sync(), on_b.sync()
    clock.advance(4 * DAY)
    on_a.sync(), on_b.sync()
    assert len(mailbox_of(home, FOLLOWER)) == 1
    (mine,), (theirs,) = records(home), records(other)
    assert mine["state"] == "sent" and theirs["state"] == "elsewhere" and theirs["by"] == mine["holder"]
    assert (len(on_a.escalated), len(on_b.escalated)) == (1, 0)  # what each machine itself announced


def test_two_machines_racing_for_one_stall_announce_it_once(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = second_home(home)
    stalled(followed, home, other, clock)
    both_read = threading.Barrier(2, timeout=60)
    create = Claims._create
    waited: set[int] = set()

    def racing(self: Claims, name: str, data: bytes) -> bool:
        if threading.get_ident() not in waited:  # each machine has read the claims: none yet
            waited.add(threading.get_ident())
            both_read.wait()
        return create(self, name, data)

    monkeypatch.setattr(Claims, "_create", racing)

    def machine(where: Path) -> int:
        with AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), where) as client:
            assert client.sync().escalation_problem is None
            return len(client.escalated)

    with ThreadPoolExecutor(2) as pool:
        announced = sorted(pool.map(machine, [home, other]))
    assert announced == [0, 1] and len(mailbox_of(home, FOLLOWER)) == 1
    assert sorted(r["state"] for r in [*records(home), *records(other)]) == ["elsewhere", "sent"]


def killed_after_the_claim(client: AgentMail, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine dies once its claim on the server is made, before its letter leaves."""
    transport = client.transport
    claim = transport.claim_reply

    def dies(*args: str) -> object:
        claim(*args)
        raise Killed

    monkeypatch.setattr(transport, "claim_reply", dies)


def test_a_machine_killed_between_its_claim_and_its_letter_announces_when_it_comes_back(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = second_home(home)
    stalled(followed, home, other, clock)
    on_a = AgentMail(followed, Identity("alpha"), home)
    killed_after_the_claim(on_a, monkeypatch)
    with pytest.raises(Killed):
        on_a.sync()
    assert [r["state"] for r in records(home)] == ["claiming"] and mailbox_of(home, FOLLOWER) == []
    AgentMail(followed, Identity("alpha"), other).sync()  # the claim is held (in flight): not here
    assert [r["state"] for r in records(other)] == ["elsewhere"] and mailbox_of(home, FOLLOWER) == []
    clock.advance(2 * MINUTE)
    AgentMail(followed, Identity("alpha"), home).sync()  # back: the same holder claims again, and sends
    assert len(mailbox_of(home, FOLLOWER)) == 1 and [r["state"] for r in records(home)] == ["sent"]
    clock.advance(STALE_AFTER + MINUTE)
    AgentMail(followed, Identity("alpha"), other).sync()  # asked again: answered, never twice
    assert len(mailbox_of(home, FOLLOWER)) == 1


def test_a_machine_killed_for_good_after_its_claim_is_taken_over_after_the_stated_time(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = second_home(home)
    stalled(followed, home, other, clock)
    on_a = on_the_clock(followed, home, clock)
    killed_after_the_claim(on_a, monkeypatch)
    with pytest.raises(Killed):
        on_a.sync()
    on_b = on_the_clock(followed, other, clock)
    on_b.sync()
    clock.advance(STALE_AFTER - MINUTE)
    on_b.sync()  # the holder may still send: not taken over yet
    assert mailbox_of(home, FOLLOWER) == [] and [r["state"] for r in records(other)] == ["elsewhere"]
    clock.advance(2 * MINUTE)
    on_b.sync()  # the claim went stale: taken over, announced once
    assert len(mailbox_of(home, FOLLOWER)) == 1 and [r["state"] for r in records(other)] == ["sent"]
    ghost = on_the_clock(followed, home, clock)  # the dead machine's disk comes back
    ghost.sync()
    assert len(mailbox_of(home, FOLLOWER)) == 1 and [r["state"] for r in records(home)] == ["elsewhere"]


def test_a_machine_killed_inside_its_submission_is_never_announced_again_by_another(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = second_home(home)
    stalled(followed, home, other, clock)
    on_a = on_the_clock(followed, home, clock)

    def dies(*args: object) -> tuple[str, str]:
        raise Killed  # did the server take it? nobody can say: at most once

    with monkeypatch.context() as patched, pytest.raises(Killed):
        patched.setattr(ToPeople, "deliver", dies)
        on_a.sync()
    clock.advance(2 * MINUTE)
    back = on_the_clock(followed, home, clock)
    back.sync()  # its own "sending" record: the claim is marked answered
    assert records(home)[0]["state"] == "sending" and records(home)[0]["settled"] is True
    clock.advance(STALE_AFTER + MINUTE)
    on_b = on_the_clock(followed, other, clock)
    on_b.sync()
    assert mailbox_of(home, FOLLOWER) == [] and [r["state"] for r in records(other)] == ["elsewhere"]


@pytest.mark.parametrize("bytes_gone", [False, True])
def test_a_queued_announcement_taken_over_by_another_machine_is_never_sent_from_here(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
    bytes_gone: bool,
) -> None:
    other = second_home(home)
    stalled(followed, home, other, clock)
    blocker = home / "postoffice" / FOLLOWER
    blocker.write_text("not a Maildir")  # delivery fails for now: queued, its claim kept
    on_a, on_b = AgentMail(followed, Identity("alpha"), home), AgentMail(followed, Identity("alpha"), other)
    local_claims(on_a).now = local_claims(on_b).now = clock
    on_a.sync()
    assert [r["state"] for r in records(home)] == ["queued"]
    on_b.sync()
    blocker.unlink()
    clock.advance(STALE_AFTER + MINUTE)
    on_b.sync()  # the claim is stale: taken over, sent from here
    clock.advance(2 * MINUTE)
    if bytes_gone:  # the queued letter's file removed meanwhile: the record still says who holds it
        for queued in (home / "spool" / "alpha" / "escalations").glob("*.eml"):
            queued.unlink()
    report = on_a.sync()  # confirms before it sends again: another holds it now
    assert report.escalation_problem is None  # a file already gone is no problem
    assert len(mailbox_of(home, FOLLOWER)) == 1
    assert [r["state"] for r in records(home)] == ["elsewhere"]
    ((mine,), (theirs,)) = records(home), records(other)  # who holds it, and when it was asked
    assert theirs["state"] == "sent" and mine["by"] == theirs["holder"] != mine["holder"]
    assert mine["asked"] == int(clock() * 1000)
    assert "every" not in mine  # asked once in this run (before the retry), not again by its due loop
    assert not list((home / "spool" / "alpha" / "escalations").glob("*.eml"))


def test_a_server_that_cannot_be_asked_is_said_and_the_stall_announced_by_a_later_run(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = second_home(home)
    stalled(followed, home, other, clock, ("Quota 500s", "Disk full"))
    on_a = AgentMail(followed, Identity("alpha"), home)
    asked: list[str] = []

    def unreachable(*args: str) -> object:
        asked.append(args[1])
        raise TransportError("IMAP mail.bus.test: connection refused")

    with monkeypatch.context() as patched:
        patched.setattr(on_a.transport, "claim_reply", unreachable)
        problem = on_a.sync().escalation_problem
    assert problem == "could not announce to the followers: IMAP mail.bus.test: connection refused"
    assert len(asked) == 1  # the server is not asked again for the next stall in the same run
    assert [r["state"] for r in records(home)] == ["claiming"] and mailbox_of(home, FOLLOWER) == []
    clock.advance(2 * MINUTE)
    assert on_a.sync().escalation_problem is None
    assert len(mailbox_of(home, FOLLOWER)) == 2 and [r["state"] for r in records(home)] == ["sent", "sent"]


def test_a_claim_the_post_office_cannot_write_keeps_back_its_stall_alone(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = second_home(home)
    stalled(followed, home, other, clock, ("Quota 500s", "Disk full"))
    on_a = AgentMail(followed, Identity("alpha"), home)
    claim = on_a.transport.claim_reply
    refused: list[str] = []

    def first_refused(*args: str) -> object:
        if not refused:
            refused.append(args[1])
            raise PermissionError(13, "Permission denied", "postoffice/alpha/.claims")
        return claim(*args)

    monkeypatch.setattr(on_a.transport, "claim_reply", first_refused)
    problem = on_a.sync().escalation_problem
    assert problem is not None and "Permission denied" in problem
    assert sorted(r["state"] for r in records(home)) == ["claiming", "sent"]  # the other stall went
    clock.advance(2 * MINUTE)
    assert on_a.sync().escalation_problem is None and len(mailbox_of(home, FOLLOWER)) == 2


def test_the_bound_per_sender_holds_across_the_machines_of_a_platform(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
) -> None:
    other = second_home(home)
    stalled(followed, home, other, clock, tuple(f"Stall {n}" for n in range(2 * bounds.ANNOUNCE_PER_SENDER)))
    on_a, on_b = AgentMail(followed, Identity("alpha"), home), AgentMail(followed, Identity("alpha"), other)
    for _ in range(3):  # runs on both machines, one asking again once the takeover time passed
        on_b.sync(), on_a.sync()
        clock.advance(STALE_AFTER + MINUTE)
    assert len(mailbox_of(home, FOLLOWER)) == bounds.ANNOUNCE_PER_SENDER
    assert len(records(other)) == bounds.ANNOUNCE_PER_SENDER  # the others wait for the next day


def test_a_queued_announcement_waits_while_its_claim_cannot_be_confirmed_and_leaves_once_it_can(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = second_home(home)
    stalled(followed, home, other, clock)
    blocker = home / "postoffice" / FOLLOWER
    blocker.write_text("not a Maildir")
    on_a = AgentMail(followed, Identity("alpha"), home)
    on_a.sync()
    blocker.unlink()

    def unreachable(*args: str) -> object:
        raise TransportError("IMAP mail.bus.test: connection refused")

    with monkeypatch.context() as patched:
        patched.setattr(on_a.transport, "claim_reply", unreachable)
        clock.advance(2 * MINUTE)
        on_a.sync()  # is it still ours? nobody can say now: it stays queued
    assert [r["state"] for r in records(home)] == ["queued"] and mailbox_of(home, FOLLOWER) == []

    def unmarked(*args: str) -> bool:
        raise OSError("the post office is read-only")

    with monkeypatch.context() as patched:
        patched.setattr(on_a.transport, "reply_sent", unmarked)  # the mark is best effort
        clock.advance(2 * MINUTE)
        assert on_a.sync().escalation_problem is None
    assert len(mailbox_of(home, FOLLOWER)) == 1 and [r["state"] for r in records(home)] == ["sent"]


def test_a_queued_announcement_recorded_before_the_claim_existed_is_sent_once(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
) -> None:
    """A record an older agentmail wrote names no claim: the per-home record alone holds it."""
    alpha = AgentMail(followed, Identity("alpha"), home)
    alpha.send("beta", "Quota 500s", OPENER)
    clock.advance(4 * DAY)
    blocker = home / "postoffice" / FOLLOWER
    blocker.write_text("not a Maildir")
    alpha.sync()
    (path,) = (home / "spool" / "alpha" / "escalations").glob("*.json")
    old = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("holder", "claim_on")}
    path.write_text(json.dumps(old))
    blocker.unlink()
    for _ in range(2):
        clock.advance(2 * MINUTE)
        alpha.sync()
    assert len(mailbox_of(home, FOLLOWER)) == 1 and [r["state"] for r in records(home)] == ["sent"]


def test_a_record_held_elsewhere_that_names_no_holder_is_made_anew_and_asked_again(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
) -> None:
    """A per-home record ``elsewhere`` without a holder (an older agentmail's, or edited): asked
    again when due, written first with this run's holder; the stall announced already stays once."""
    alpha = AgentMail(followed, Identity("alpha"), home)
    alpha.send("beta", "Quota 500s", OPENER)
    clock.advance(4 * DAY)
    alpha.sync()
    assert len(mailbox_of(home, FOLLOWER)) == 1
    (path,) = (home / "spool" / "alpha" / "escalations").glob("*.json")
    kept = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in kept.items() if k != "holder"} | {"state": "elsewhere", "asked": 0}))
    clock.advance(2 * MINUTE)
    assert alpha.sync().escalation_problem is None
    (record,) = records(home)
    assert record["state"] == "elsewhere" and record["by"] == kept["holder"] != record["holder"]
    assert len(mailbox_of(home, FOLLOWER)) == 1


@pytest.mark.parametrize("seen", [False, True])
def test_a_record_asked_again_keeps_its_first_time_and_waits_longer_for_the_same_holder(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
    seen: bool,
) -> None:
    """A record ``elsewhere`` asked again finds the claim answered (by its own holder): it keeps
    the time the stall was first announced, and waits ``ASK_FIRST_MS`` before asking again, twice
    that when the same holder was found the last time too."""
    alpha = AgentMail(followed, Identity("alpha"), home)
    alpha.send("beta", "Quota 500s", OPENER)
    clock.advance(4 * DAY)
    alpha.sync()
    (path,) = (home / "spool" / "alpha" / "escalations").glob("*.json")
    kept = json.loads(path.read_text())
    first = escalation.ASK_FIRST_MS
    before = {"by": kept["holder"], "every": first} if seen else {}
    path.write_text(json.dumps(kept | {"state": "elsewhere", "asked": 0} | before))
    clock.advance(2 * MINUTE)
    assert alpha.sync().escalation_problem is None
    (record,) = records(home)
    assert record["state"] == "elsewhere" and record["by"] == record["holder"] == kept["holder"]
    assert record["at"] == kept["at"] and record["every"] == (2 * first if seen else first)
    assert record["asked"] == int(clock() * 1000)
    assert len(mailbox_of(home, FOLLOWER)) == 1


# --- records planted on the server ---------------------------------------------------------------

NAMES = st.text(st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)), min_size=1, max_size=30)


def stall_key(message_id: str, thread: str) -> str:
    """The name a stall's claim has in ``.claims/`` (its key, as ``people.escalation.due`` makes it)."""
    tag = hashlib.sha256(message_id.encode()).hexdigest()[:16]
    return Claims.key(f"{CLAIM_KEY}{thread}.stale.{tag}")


@pytest.fixture
def two_stalls(followed: Registry, home: Path, clock: Clock) -> Iterator[tuple[Path, list[tuple[str, str]]]]:  # noqa: F811
    """Two stalled threads of beta's: (thread, the name of its stall's claim on the server)."""
    (home / "postoffice").mkdir(exist_ok=True)
    beta = AgentMail(followed, Identity("beta"), home)
    letters = [beta.send("alpha", s, OPENER) for s in ("Quota 500s", "Disk full")]
    AgentMail(followed, Identity("alpha"), home).sync()
    clock.advance(4 * DAY)
    yield home, [(x.thread, stall_key(x.message_id, x.thread)) for x in letters]


def plant(where: Path, name: str, kind: str, data: bytes) -> None:
    path = where / name
    if name in (".", "..") or os.path.lexists(path):
        return
    try:
        if kind == "file":
            path.write_bytes(data)
        elif kind == "dir":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")
    except OSError:
        pass  # a name the file system refuses (too long): nothing planted


PLANTED = st.tuples(
    st.one_of(  # any name, or one naming the first stall's claim (a generation, its marks, junk)
        NAMES.map(lambda n: ("any", n)),
        st.sampled_from([".0", ".1", ".0.sent", ".0.free", ".01", ".9999", ".0.x", ""]).map(lambda n: ("first", n)),
    ),
    st.sampled_from(["file", "dir", "fifo", "link"]),
    st.binary(max_size=64) | st.sampled_from([b"alpha 01J\n1\n", b"\n\n", b"x\n99999999999999999999\n"]),
)


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(planted=st.lists(PLANTED, max_size=6))
def test_records_planted_on_the_server_at_most_suppress_the_stall_they_name(
    two_stalls: tuple[Path, list[tuple[str, str]]],
    followed: Registry,  # noqa: F811
    planted: list[tuple[tuple[str, str], str, bytes]],
) -> None:
    home, [(first, first_claim), (second, _)] = two_stalls
    claims = home / "postoffice" / "alpha" / ".claims"
    for fresh in (claims, home / "spool" / "alpha" / "escalations", home / "postoffice" / FOLLOWER):
        shutil.rmtree(fresh, ignore_errors=True)
    claims.mkdir(parents=True)
    for (whose, name), kind, data in planted:
        plant(claims, first_claim + name if whose == "first" else name, kind, data)
    report = AgentMail(followed, Identity("alpha"), home).sync()
    assert report.escalation_problem is None  # never a crash, never a sync that fails
    got = records(home)
    assert all(r["to"] == [FOLLOWER] for r in got)  # nobody but the followers is ever mailed
    sent = sorted(str(r["thread"]) for r in got if r["state"] == "sent")
    assert len(mailbox_of(home, FOLLOWER)) == len(sent)
    assert sent in ([second], sorted([first, second]))  # the stall nobody named is announced, each once
    if not any(whose == "first" for (whose, _), _, _ in planted):
        assert sent == sorted([first, second])


# --- smtp+imap: two homes on one IMAP mailbox ------------------------------------------------------


def test_over_imap_two_machines_of_a_platform_announce_a_stalled_thread_once_between_them(
    home: Path,
    servers: MailServers,  # noqa: F811
    clock: Clock,  # noqa: F811
) -> None:
    servers.store.add_user(FOLLOWER, "carol-pw")
    reg = make_bus(home, servers)
    bus.set_person(reg, "alpha", FOLLOWER, follows=True, writes=False)
    bus.set_setting(home / "registry", "stale_after", ["3d"])
    other = home.parent / "home-b"  # a machine joining the platform: registry, keys, logins; no spool
    shutil.copytree(home, other, ignore=shutil.ignore_patterns("spool"))
    reg = registry_mod.load(home / "registry")
    with (
        AgentMail(reg, Identity("alpha"), home) as on_a,
        AgentMail(registry_mod.load(other / "registry"), Identity("alpha"), other) as on_b,
        AgentMail(reg, Identity("beta"), home) as beta,
    ):
        beta.send("alpha", "Quota 500s", OPENER)
        on_a.sync(), on_b.sync()
        clock.advance(4 * DAY)
        assert on_b.sync().escalation_problem is None and on_a.sync().escalation_problem is None
        clock.advance(STALE_AFTER + MINUTE)  # asked again: the claim was answered, never twice
        on_a.sync(), on_b.sync()
    # the follower is copied on the platform's letters too (Cc): the announcements are these
    assert len([m for m in servers.store.messages(FOLLOWER) if b"[needs a person]" in m.data]) == 1
    (mine,), (theirs,) = records(other), records(home)
    assert mine["state"] == "sent" and theirs["state"] == "elsewhere" and theirs["by"].startswith("alpha ")
    (opener,) = [m for m in servers.store.messages("alpha@bus.test") if b"Quota 500s" in m.data]
    assert any(flag.startswith("$ams-") for flag in opener.flags)  # the claim, answered, on the thread's letter


# --- when a stall held elsewhere is asked again ------------------------------------------------------


def test_a_stall_held_elsewhere_is_asked_again_ever_less_often_by_the_same_holder_and_at_least_daily() -> None:
    first = escalation.ASK_FIRST_MS
    assert escalation.next_ask({}, "alpha 01A") == first  # first seen
    seen = {"state": "elsewhere", "by": "alpha 01A", "every": first}
    assert escalation.next_ask(seen, "alpha 01A") == 2 * first  # the same holder: answered, or slow
    assert escalation.next_ask(seen, "alpha 01B") == first  # taken over meanwhile: it may die too
    assert escalation.next_ask({**seen, "every": escalation.ASK_LAST_MS}, "alpha 01A") == escalation.ASK_LAST_MS
    asked = {**seen, "asked": 10_000_000, "every": 2 * first}
    assert not escalation.ask_again(asked, 10_000_000 + 2 * first - 1)
    assert escalation.ask_again(asked, 10_000_000 + 2 * first)
    assert escalation.ask_again({"state": "claiming", "holder": "alpha 01A"}, 0)  # its run died: asked again
    assert not escalation.ask_again({"state": "sent", "holder": "alpha 01A"}, 1 << 60)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
RECORD_FIELDS = st.sampled_from(["state", "holder", "by", "asked", "every", "claim_on", "key"])


@settings(max_examples=examples(200), deadline=None)
@given(
    record=st.dictionaries(RECORD_FIELDS, JSON | st.sampled_from(["elsewhere", "claiming", "sending"])),
    who=st.text(max_size=20),
    now=st.integers(-(1 << 62), 1 << 62),
)
def test_a_per_home_record_of_any_shape_asks_again_within_the_bounds(
    record: dict[str, object], who: str, now: int
) -> None:
    """The per-home record is a file anyone with the home's rights could have edited: whatever it
    holds, the decision is a yes or a no and the wait stays between its bounds."""
    assert escalation.ask_again(dict(record), now) in (True, False)
    assert escalation.ASK_FIRST_MS <= escalation.next_ask(dict(record), who) <= escalation.ASK_LAST_MS


def test_over_imap_two_machines_racing_for_one_stall_announce_it_once(
    home: Path,
    servers: MailServers,  # noqa: F811
    clock: Clock,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    servers.store.add_user(FOLLOWER, "carol-pw")
    reg = make_bus(home, servers)
    bus.set_person(reg, "alpha", FOLLOWER, follows=True, writes=False)
    bus.set_setting(home / "registry", "stale_after", ["3d"])
    other = home.parent / "home-b"
    shutil.copytree(home, other, ignore=shutil.ignore_patterns("spool"))
    with AgentMail(registry_mod.load(home / "registry"), Identity("beta"), home) as beta:
        beta.send("alpha", "Quota 500s", OPENER)
    for where in (home, other):
        with AgentMail(registry_mod.load(where / "registry"), Identity("alpha"), where) as client:
            client.sync()
    clock.advance(4 * DAY)
    both_read = threading.Barrier(2, timeout=60)
    store = smtpimap.store_unless_modified
    waited: set[int] = set()

    def racing(*args: Any) -> bool:
        if threading.get_ident() not in waited:  # each machine read the letter's flags and MODSEQ: no claim
            waited.add(threading.get_ident())
            both_read.wait()
        return store(*args)

    monkeypatch.setattr(smtpimap, "store_unless_modified", racing)

    def machine(where: Path) -> int:
        with AgentMail(registry_mod.load(where / "registry"), Identity("alpha"), where) as client:
            assert client.sync().escalation_problem is None
            return len(client.escalated)

    with ThreadPoolExecutor(2) as pool:
        announced = sorted(pool.map(machine, [home, other]))
    assert announced == [0, 1]
    assert len([m for m in servers.store.messages(FOLLOWER) if b"[needs a person]" in m.data]) == 1
    assert sorted(r["state"] for r in [*records(home), *records(other)]) == ["elsewhere", "sent"]
