"""Attacks on "parties own their thread" (issue 37), by someone who did not write it: those that
succeeded (fixed since) and some that held (kept so they go on holding).
The table of every attack tried is docs/threat/attacks-addressed-and-parties.md."""

from __future__ import annotations

from pathlib import Path

from agentmail.admin import bus
from agentmail.config import registry as registry_mod
from agentmail.config.registry import Registry
from agentmail.transport.local import deliver

from ..people.test_writing import CAROL, client_letter, trusting, vouched
from .test_parties import box, carol_listed_twice, three, written_into  # noqa: F401  (the fixture)


def test_a_platform_listing_another_platforms_person_does_not_become_a_party_through_her(
    three: Registry, home: Path
) -> None:
    """beta and gamma share a thread; carol writes for beta. alpha (hostile) lists carol too, so
    her answer to gamma speaks for alpha as well: it is filed for the party she speaks for
    (beta), and alpha stays an outsider whose close is quarantined."""
    reg, gamma, sent, report, answer = carol_listed_twice(three, home)
    deliver(home / "postoffice" / "gamma", vouched(answer))
    (hers,) = [x for x in gamma.inbox() if x.extra.get("person")]
    assert hers.sender == "beta"  # the party she speaks for, not the platform that also lists her
    relayed = b"Received: from relay.example by mx.bus.test; Tue, 01 Dec 2026 00:00:00 +0000\r\n" + vouched(answer)
    deliver(home / "postoffice" / "gamma", relayed)  # the same letter again, by another path: no second copy
    assert [x.id for x in gamma.inbox() if x.extra.get("person")] == [hers.id]
    deliver(home / "postoffice" / "gamma", written_into(reg, home, "alpha", "gamma", report, "close"))
    assert [q.reason for q in gamma.quarantined()] == ["not-a-party"]
    assert [x.sender for x in gamma.thread(sent.thread, sync=False)] == ["beta", "beta"]
    # rebuild judges every file again, in filing order: the same
    gamma.close()
    gamma.spool.db.close()
    for name in ("spool.db", "spool.db-wal", "spool.db-shm"):
        (gamma.spool.root / name).unlink(missing_ok=True)
    gamma = box(reg, home, "gamma")
    gamma.rebuild()
    assert [x.sender for x in gamma.thread(sent.thread, sync=False)] == ["beta", "beta"]
    assert [q.reason for q in gamma.quarantined(sync=False)] == ["not-a-party"]


def test_a_persons_letter_is_filed_for_a_party_they_speak_for_never_an_outsider() -> None:
    from agentmail.letter import wire
    from agentmail.stages.route import Facts, route
    from agentmail.trust.authenticity import Verdict

    from .test_parties import LETTER

    person = LETTER.replace(type="human", sender="alpha", to="gamma", extra={"person": CAROL},
                            thread=wire.derived_thread(LETTER.message_id))  # fmt: skip
    parties = {person.thread: frozenset({"beta", "gamma"})}
    for speaks_for, writer in (({"alpha", "beta"}, "beta"), ({"alpha", "gamma"}, "gamma"), ({"beta", "gamma"}, "beta")):
        filing = route(Verdict("accept", letter=person), Facts(parties=parties, speaks_for=frozenset(speaks_for)))
        assert filing.action == "file" and filing.verdict is not None and filing.verdict.letter is not None
        assert filing.verdict.letter.sender == writer, speaks_for
    # a thread new here: as the judge attributed it
    filing = route(Verdict("accept", letter=person), Facts(speaks_for=frozenset({"alpha", "beta"})))
    assert filing.verdict is not None and filing.verdict.letter == person


def test_an_outsider_cannot_reach_a_known_thread_by_its_block_alone_or_through_a_reply_elsewhere(
    three: Registry, home: Path
) -> None:
    """gamma names alpha's thread in its front matter under an untagged To, or answers alpha's
    report from a thread of its own, or opens "a new thread" tagged with the known one: none of
    them changes the thread (the last is a letter of gamma's own thread)."""
    from ..stages.test_addressed import signed_to
    from .test_parties import opened, reusing

    _alpha, beta, report = opened(three, home)
    postbox = home / "postoffice" / "beta"
    deliver(postbox, signed_to(three, home, "gamma", "beta@bus.test", thread=report.thread))  # the block says it
    elsewhere = report.replace(thread="thr-gggggggggg")  # gamma's own thread, answering alpha's report
    deliver(postbox, written_into(three, home, "gamma", "beta", elsewhere, "close"))
    deliver(postbox, reusing(three, home, "gamma", "beta", "<unknown.1@bus.test>", report.thread))
    reasons = sorted(q.reason or "" for q in beta.quarantined())
    assert reasons == ["not-a-party", "not-a-party"]
    # the answer from its own thread is a letter of that thread: the report is still beta's to answer
    assert {(x.sender, x.thread) for x in beta.inbox(sync=False)} == {
        ("alpha", report.thread),
        ("gamma", "thr-gggggggggg"),
    }
    assert beta.why_refused(report) is None
    assert [x.sender for x in beta.thread(report.thread, sync=False)] == ["alpha"]


def test_a_follower_who_answers_before_the_opener_lands_does_not_take_the_thread(three: Registry, home: Path) -> None:
    from ..stages.test_addressed import signed_to

    bus.set_person(three, "alpha", CAROL, follows=True, writes=False)  # she follows alpha's letters
    bus.set_person(registry_mod.load(three.root), "gamma", CAROL, follows=False, writes=True)  # and writes for gamma
    reg = trusting(registry_mod.load(three.root))
    thread = "thr-hhhhhhhhhh"
    opener = signed_to(reg, home, "alpha", f"beta+{thread}@bus.test", thread=thread)  # Cc'd to carol too
    opener_id = opener.split(b"Message-ID: ", 1)[1].split(b"\r\n", 1)[0].decode()
    answer = client_letter(f"beta+{thread}@bus.test", "Closing this, it is fixed.", in_reply_to=opener_id)
    deliver(home / "postoffice" / "beta", vouched(answer))  # her MTA was quicker than alpha's
    deliver(home / "postoffice" / "beta", opener)
    beta = box(reg, home, "beta")
    assert [x.sender for x in beta.inbox()] == ["alpha"]
    assert [q.reason for q in beta.quarantined(sync=False)] == ["not-a-party"]
