"""The routing stage's own words and values, exactly: every filing's verdict (its route, reason
and the sentence a person reads), the addresses compared without their plus tags, and whom a
person's letter is filed under. What a mutant of ``stages/route.py`` changes is noticed here."""

from __future__ import annotations

import pytest

from agentmail.model import HUMAN
from agentmail.stages.route import Facts, route
from agentmail.trust.authenticity import Verdict

from .test_route import BOUNCE, LETTER

ME = "alpha@bus.test"
ADDRESSED = Verdict("accept", letter=LETTER, addressed=(ME,))


def test_a_report_not_vouched_for_is_quarantined_with_its_reason() -> None:
    filing = route(BOUNCE.replace(unvouched="nobody vouches"), Facts(bounced_id="01s"))
    assert filing.action == "quarantine" and filing.verdict is not None
    assert (filing.verdict.route, filing.verdict.reason) == ("quarantine", "automated")
    assert filing.verdict.detail == "a delivery report not believed: nobody vouches"
    filing = route(BOUNCE, Facts(bounced_id="01s", bounced_to=("gamma@bus.test",)))
    assert filing.verdict is not None and filing.verdict.route == "quarantine"
    assert filing.verdict.detail == (
        "a delivery report not believed: the letter it names was not sent to beta+thr-aaaaaaaaaa@bus.test"
    )
    two = BOUNCE.replace(failed_recipients=("x@bus.test", "y@bus.test"))
    filing = route(two, Facts(bounced_id="01s", bounced_to=("gamma@bus.test",)))
    assert filing.verdict is not None and filing.verdict.detail is not None
    assert filing.verdict.detail.endswith("was not sent to x@bus.test, y@bus.test")
    assert route(BOUNCE, Facts()).verdict == Verdict(
        "quarantine", reason="automated", detail="a delivery report about a letter this mailbox did not send"
    )


def test_a_believed_report_carries_its_verdict() -> None:
    filing = route(BOUNCE, Facts(bounced_id="01s", bounced_to=("beta@bus.test",)))
    assert (filing.action, filing.verdict, filing.letter_id) == ("bounce", BOUNCE, "01s")


@pytest.mark.parametrize(
    ("sent_to", "failed", "believed"),
    [
        ("Beta+thr-a@BUS.test", "beta@bus.test", True),  # case and the plus tag aside
        ("beta+a+b@bus.test", "beta@bus.test", True),  # the first plus ends the mailbox
        ("beta@bus.test", "beta+x@bus.test", True),
        ("beta@bus.test", "beta@bus.test.evil", False),
        ("beta@bus.test", "bet@bus.test", False),
        ('"a@b"@bus.test', "a@bus.test", False),  # the last @ splits the domain
        ("beta+x@bus.test", "beta+y@other.test", False),
    ],
)
def test_addresses_are_compared_without_their_plus_tags(sent_to: str, failed: str, believed: bool) -> None:
    filing = route(BOUNCE.replace(failed_recipients=(failed,)), Facts(bounced_id="01s", bounced_to=(sent_to,)))
    assert (filing.action == "bounce") is believed


def test_a_misaddressed_letter_is_quarantined_saying_whom_its_signature_names() -> None:
    filing = route(ADDRESSED.replace(addressed=("beta@bus.test", "gamma@bus.test")), Facts(me_address=ME))
    assert filing.action == "quarantine" and filing.verdict is not None
    assert (filing.verdict.route, filing.verdict.reason, filing.verdict.letter) == (
        "quarantine",
        "misaddressed",
        LETTER,
    )
    assert filing.verdict.detail == (
        "its signature names beta@bus.test, gamma@bus.test as recipients, not alpha@bus.test: "
        "someone else delivered it here"
    )
    nobody = route(ADDRESSED.replace(addressed=()), Facts(me_address=ME)).verdict
    assert nobody is not None and nobody.detail == (
        "its signature names no recipient as recipients, not alpha@bus.test: someone else delivered it here"
    )
    long = route(ADDRESSED.replace(addressed=tuple(f"p{i}@bus.test" for i in range(60))), Facts(me_address=ME))
    assert long.verdict is not None and len(long.verdict.detail or "") == 400


def test_another_platforms_note_is_misaddressed() -> None:
    note = LETTER.replace(type="note", to_agent="bob", sender_address="gamma@partner.test")
    filing = route(Verdict("accept", letter=note, addressed=(ME,)), Facts(me_address=ME, me_agent="bob"))
    assert filing.action == "quarantine" and filing.verdict is not None
    assert (filing.verdict.route, filing.verdict.reason) == ("quarantine", "misaddressed")
    assert filing.verdict.detail == (
        "a note goes between the agents of one platform, and this one is gamma@partner.test's, not alpha@bus.test's"
    )
    own = note.replace(sender_address="Alpha@bus.test")
    assert route(Verdict("accept", letter=own, addressed=(ME,)), Facts(me_address=ME, me_agent="bob")).action == "file"


def test_an_outsider_is_quarantined_naming_the_threads_parties() -> None:
    facts = Facts(me_address=ME, parties={LETTER.thread: frozenset({"alpha", "gamma"})})
    filing = route(ADDRESSED, facts)
    assert filing.verdict is not None
    assert (filing.verdict.route, filing.verdict.reason, filing.verdict.letter) == ("quarantine", "not-a-party", LETTER)
    assert (
        filing.verdict.detail == "beta writes into thr-aaaaaaaaaa, whose parties are alpha, gamma: beta is none of them"
    )


def test_a_person_is_named_and_filed_under_a_party_they_speak_for() -> None:
    person = LETTER.replace(type=HUMAN, extra={"person": "carol@people.test"}, sender="delta", to="alpha")
    verdict = Verdict("accept", letter=person, addressed=(ME,))
    outsider = Facts(
        me_address=ME, parties={LETTER.thread: frozenset({"alpha", "gamma"})}, speaks_for=frozenset({"delta", "zeta"})
    )
    refused = route(verdict, outsider).verdict
    assert refused is not None and refused.reason == "not-a-party"
    assert refused.detail == (
        "carol@people.test writes into thr-aaaaaaaaaa, whose parties are alpha, gamma: delta/zeta is none of them"
    )
    party = Facts(
        me_address=ME,
        parties={LETTER.thread: frozenset({"alpha", "gamma", "beta"})},
        speaks_for=frozenset({"delta", "gamma", "beta"}),
    )
    filing = route(verdict, party)
    assert filing.action == "file" and filing.verdict is not None and filing.verdict.letter is not None
    assert filing.verdict.letter.sender == "beta"  # a party she speaks for, the first by name
    addressee = Facts(me_address=ME, parties={LETTER.thread: frozenset({"alpha"})}, speaks_for=frozenset({"alpha"}))
    filed = route(verdict, addressee).verdict
    assert filed is not None and filed.letter is not None and filed.letter.sender == "alpha"  # only the addressee


def test_a_persons_untagged_answer_joins_the_thread_it_answers() -> None:
    from agentmail.letter import wire

    person = LETTER.replace(type=HUMAN, thread=wire.derived_thread(LETTER.message_id), extra={"person": "c@p.test"})
    filing = route(
        Verdict("accept", letter=person, addressed=(ME,)), Facts(me_address=ME, parent_thread="thr-bbbbbbbbbb")
    )
    assert filing.action == "file" and filing.verdict is not None and filing.verdict.letter is not None
    assert filing.verdict.letter.thread == "thr-bbbbbbbbbb" and filing.verdict.letter.body == person.body
    mismatch = route(ADDRESSED, Facts(me_address=ME, parent_thread="thr-bbbbbbbbbb")).verdict
    assert mismatch is not None and (mismatch.route, mismatch.reason) == ("quarantine", "thread-mismatch")


def test_no_verdict_for_bytes_not_filed_is_a_bug_said_plainly() -> None:
    with pytest.raises(ValueError, match="^a letter whose bytes are not filed needs a verdict$"):
        route(None, Facts())


def test_a_not_a_party_sentence_is_cut_at_400_characters() -> None:
    many = frozenset(f"platform-{i:03d}" for i in range(60))
    filing = route(ADDRESSED, Facts(me_address=ME, parties={LETTER.thread: many}))
    assert filing.verdict is not None and len(filing.verdict.detail or "") == 400
