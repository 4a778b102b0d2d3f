"""One letter, one shape: the typed values the spool, the guards and the views pass around
keep the documented ``--json`` shapes (field names are a public contract)."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import pytest

from agentmail.client.facade import AgentMail, SyncReport
from agentmail.config.registry import Bus, Person, Platform, Registry
from agentmail.model import Letter, ThreadStatus
from agentmail.spool.filed import Filed
from agentmail.transport.base import Checkpoint

STATUS_FIELDS = {
    "delivery",
    "outcome",  # issue 26: a verify-result's, "" otherwise
    "delivery_detail",
    "delivery_id",
    "thread",
    "subject",
    "state",
    "last_type",
    "whose_move",
    "letters",
    "with",
    "last_id",
    "undeliverable",
    "opened_at",  # issue 26: ISO 8601 UTC
    "last_move_at",
}


def test_depth_is_a_field_the_spool_sets_and_json_carries(alpha: AgentMail, beta: AgentMail) -> None:
    sent = alpha.send("beta", "Quota", "Why 500s on /quota? Please say.", type="question")
    (got,) = beta.inbox()
    answer = beta.reply(got, "Because of the plan field.", type="question")
    assert answer is not None and (sent.depth, got.depth, answer.depth) == (0, 0, 1)
    assert "depth" not in answer.extra and answer.to_json()["depth"] == 1
    assert Letter.from_json(answer.to_json()) == answer  # the record reads back as the same letter
    assert alpha.show(sent.id).depth == 0 and alpha.inbox()[0].depth == 1


def test_a_quarantined_letter_has_a_reason_and_no_depth_in_json() -> None:
    letter = Letter.from_json({"id": "01q", "state": "quarantine", "reason": "malformed", "detail": "bad", "from": ""})
    data = letter.to_json()
    assert "depth" not in data and (data["reason"], data["detail"]) == ("malformed", "bad")
    assert "reason" not in Letter.from_json({"id": "01r", "state": "read"}).to_json()


def test_status_rows_are_typed_and_keep_the_json_row(alpha: AgentMail, beta: AgentMail) -> None:
    sent = alpha.send("beta", "Quota", "Why 500s on /quota? Please say.", type="question")
    (row,) = alpha.status()
    assert isinstance(row, ThreadStatus) and set(row.to_json()) == STATUS_FIELDS
    assert (row.thread, row.whose_move, row.with_, row.delivery, row.last_id) == (
        sent.thread,
        "beta",
        "beta",
        "sent",
        sent.id,
    )
    assert row["with"] == "beta" and row["thread"] == sent.thread  # the dict a caller indexed before


def _letter(**changes: Any) -> Letter:
    fields: dict[str, Any] = {
        "message_id": "<01a.alpha@bus.test>",
        "sender": "alpha",
        "sender_address": "alpha@bus.test",
        "to": "beta",
        "to_address": "beta@bus.test",
        "type": "report",
        "thread": "thr-abc123def0",
        "subject": "Quota",
        "body": "It broke.",
        "date": "Tue, 01 Dec 2026 04:00:00 +0000",
    }
    return Letter(**{**fields, **changes})


def test_a_letter_is_a_value_equal_by_its_fields_but_not_its_annotations() -> None:
    """Hand-written (issue 11), a letter behaves as the frozen dataclass it was: equal and hashed
    by every field but ``extra`` (facts learnt later), immutable, readable in a repr."""
    letter = _letter(extra={"queued_reason": "451"}, references=("<0.beta@bus.test>",))
    same = _letter(extra={}, references=("<0.beta@bus.test>",))
    assert letter == same and hash(letter) == hash(same) and len({letter, same}) == 1
    assert letter != _letter(subject="Other") and letter != "a string"
    assert repr(_letter()).startswith("Letter(message_id='<01a.alpha@bus.test>', sender='alpha', ")
    with pytest.raises(AttributeError):
        letter.subject = "changed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del letter.subject
    assert letter.subject == "Quota" and _letter().extra == {} and _letter().extra is not _letter().extra


def test_replace_copies_with_changes_and_refuses_an_unknown_field() -> None:
    letter = _letter(extra={"attachments": [{"name": "run.log"}]})
    moved = letter.replace(id="01KEPT", state="read")
    assert (moved.id, moved.state, moved.subject, moved.extra) == ("01KEPT", "read", "Quota", letter.extra)
    assert (letter.id, letter.state) == ("", "")
    with pytest.raises(TypeError):
        letter.replace(colour="red")


def test_values_survive_pickle_and_copy() -> None:
    letter = _letter(extra={"attachments": [{"name": "run.log"}]}, cc=("carol@people.test",))
    for twin in (pickle.loads(pickle.dumps(letter)), copy.copy(letter), copy.deepcopy(letter)):
        assert twin == letter and twin.extra == letter.extra and twin.cc == letter.cc
    assert copy.deepcopy(letter).extra["attachments"] is not letter.extra["attachments"]
    point = Checkpoint("7", 12)
    assert pickle.loads(pickle.dumps(point)) == point and str(copy.copy(point)) == "7:12"


def test_registry_values_keep_their_defaults_and_a_registry_stays_mutable() -> None:
    bus = Bus("bus", "bus.test")
    assert (bus.transport, bus.attach_max_bytes, bus.attach_max_total, bus.attach_max_count) == (
        "local",
        512 * 1024,
        700 * 1024,
        10,
    )
    assert bus.replace(policy="aligned") == Bus("bus", "bus.test", policy="aligned") != bus
    platform = Platform("alpha", "alpha@bus.test", people=(Person("carol@people.test", follows=True),))
    assert platform.followers == ("carol@people.test",) and hash(platform) == hash(platform.replace())
    registry = Registry(Path("/nowhere"), bus)
    registry.problems.append("a bad entry; skipped")
    registry.platforms["alpha"] = platform
    assert registry.replace(problems=[]).platforms == {"alpha": platform}
    assert registry != Registry(Path("/nowhere"), bus) and Registry(Path("/r"), bus).problems == []
    with pytest.raises(TypeError):
        hash(registry)  # mutable: unhashable, as before
    report = SyncReport(accepted=[_letter()], duplicates=1)  # type: ignore[arg-type]  # a list, as before
    report.fetched += 2
    assert isinstance(report.accepted, Filed) and list(report.accepted) == [_letter()] and report.fetched == 2


def test_a_field_annotated_without_its_slot_fails_at_import() -> None:
    """A field added to a value's annotations alone (a merge of a dataclass edit, say) would read
    as a class attribute and be refused by ``__init__``: the class is refused when defined."""
    from agentmail._value import Frozen

    with pytest.raises(TypeError, match="copy annotated but not in __slots__"):

        class Outgoing(Frozen):
            __slots__ = ("key",)
            key: str
            copy: tuple[str, int, int] | None = None
