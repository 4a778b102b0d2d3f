"""One letter, one shape: the typed values the spool, the guards and the views pass around
keep the documented ``--json`` shapes (field names are a public contract)."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.client.facade import AgentMail, SyncReport
from agentmail.config.registry import Bus, Person, Platform, Registry
from agentmail.model import Letter, ThreadStatus
from agentmail.spool.filed import Filed
from agentmail.transport.base import Checkpoint

from ..depth import examples

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
    assert row.with_ == "beta" and row.thread == sent.thread  # typed fields


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


_FIELD_VALUES = st.one_of(st.none(), st.text(max_size=8), st.integers(), st.tuples(st.text(max_size=4)))


def _constructed(value: Any, changes: dict[str, Any]) -> Any:
    """``replace`` as the constructor does it: every field by keyword, the changes over them."""
    return value.__class__(**{**{name: getattr(value, name) for name in value._fields}, **changes})


@settings(max_examples=examples(200), deadline=None)
@given(
    changes=st.dictionaries(st.sampled_from([*Letter._fields, "colour", "_fields"]), _FIELD_VALUES, max_size=6),
    extra=st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
)
def test_replace_gives_what_the_constructor_gives(changes: dict[str, Any], extra: dict[str, Any]) -> None:
    """The copy ``replace`` makes slot by slot is the value the constructor makes of every field
    with the changes over them: the same fields (each the same object), the same refusal of a name
    that is no field."""
    from agentmail.client.facade import SyncReport

    for value in (_letter(extra=extra, cc=("carol@people.test",)), SyncReport(fetched=2)):
        known = {name: change for name, change in changes.items() if name in value._fields}
        if known != changes:
            with pytest.raises(TypeError, match="unknown arguments"):
                value.replace(**changes)
            with pytest.raises(TypeError, match="unknown arguments"):
                _constructed(value, changes)
            continue
        copied, made = value.replace(**known), _constructed(value, known)
        assert copied.__class__ is made.__class__
        assert all(getattr(copied, name) is getattr(made, name) for name in value._fields if name not in known)
        assert [getattr(copied, name) for name in value._fields] == [getattr(made, name) for name in value._fields]


def test_replace_sets_the_slots_without_the_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy costs its slots, not the constructor's keyword table (three a send); a change to
    a field with a ``__post_init__`` still goes through it."""
    from agentmail._value import Frozen, _Base, set_field

    made: list[str] = []
    constructor = _Base.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(self.__class__.__name__)
        constructor(self, *args, **kwargs)

    class Argv(Frozen):
        words: tuple[str, ...] = ()

        def __post_init__(self) -> None:
            set_field(self, "words", tuple(self.words))

    letter, argv = _letter(), Argv(("a",))
    monkeypatch.setattr(_Base, "__init__", counted)
    moved = letter.replace(id="01KEPT")
    again = argv.replace(words=["b"])  # type: ignore[arg-type]
    assert made == [] and moved.id == "01KEPT" and moved.subject == letter.subject and again.words == ("b",)


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


def test_a_field_is_declared_once_as_an_annotation() -> None:
    """Issue 27: a value's annotations are its fields (slots, constructor parameters in order,
    defaults, a factory per value, fields left out of equality); a subclass adds its own after its
    parent's; ``ClassVar`` is no field; the constructor is the one shared method, nothing compiled."""
    from typing import ClassVar

    from agentmail._value import Frozen, FrozenError, Value, field

    class Point(Frozen):
        x: int
        y: int = 0
        tags: dict[str, str] = field(default_factory=dict, compare=False)
        ORIGIN: ClassVar[str] = "0,0"

    class Labelled(Point):
        label: str = "p"

    point = Point(1)
    assert Point.__slots__ == ("x", "y", "tags") and Labelled.__slots__ == ("label",)
    assert (point.x, point.y, point.tags, Point.ORIGIN) == (1, 0, {}, "0,0")
    assert Point(1).tags is not point.tags and Point(1, tags={"a": "b"}) == point  # tags: not compared
    assert hash(Point(1, tags={"a": "b"})) == hash(point) and Point(1, 2) != point
    assert repr(Labelled(3, label="q")).endswith(".Labelled(x=3, y=0, tags={}, label='q')")
    assert Labelled(3, 4, {}, "q").replace(y=5) == Labelled(3, 5, label="q")
    assert "__init__" not in Point.__dict__ and Point.__init__ is Value.__init__
    with pytest.raises(FrozenError):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        point.z = 2  # type: ignore[attr-defined]  # slots: no other attribute
    with pytest.raises(TypeError, match="missing argument 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'colour'"):
        Point(1, colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'x'"):
        Point(1, x=2)  # type: ignore[misc]
    with pytest.raises(TypeError, match="takes 3 arguments but 4"):
        Point(1, 2, {}, 4)  # type: ignore[call-arg]


def test_post_init_runs_on_construction_replace_and_unpickling() -> None:
    from agentmail._value import Frozen, set_field

    class Argv(Frozen):
        words: tuple[str, ...] = ()

        def __post_init__(self) -> None:
            set_field(self, "words", tuple(self.words))

    argv = Argv(["a", "b"])  # type: ignore[arg-type]  # a list, made a tuple
    assert argv.words == ("a", "b") and argv.replace(words=["c"]).words == ("c",)  # type: ignore[arg-type]


def test_a_value_declared_the_old_way_or_out_of_order_fails_at_import() -> None:
    """Fields in ``__slots__`` as well as annotations (a merge of the old form) or a field without
    a default after one with: the class is refused when defined, not at the first letter."""
    from agentmail._value import Frozen

    with pytest.raises(TypeError, match="no __slots__"):

        class Outgoing(Frozen):
            __slots__ = ("key",)
            key: str

    with pytest.raises(TypeError, match="'copy' has no default but follows one"):

        class Late(Frozen):  # type: ignore[misc]
            key: str = ""
            copy: str
