"""The one door for letters to people (``client/to_people.py``), exactly: what ``deliver`` says
for each answer of a transport, the queued records read back as hostile files (``records_in``,
``read_record``, ``_retry``, ``retry_announcements``), and what each record and note says."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.client.to_people import ToPeople, read_record, records_in, write_record
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import ConfigError, TransportError
from agentmail.transport import OnResult, Outgoing, SubmitResult

from ..people.test_approval_by_mail import CAROL, approving  # noqa: F401  (approving: the fixture)


class Answers:
    """A transport's ``submit`` that records what it was given and answers as told."""

    def __init__(self, *answers: SubmitResult | BaseException | None) -> None:
        self.answers = list(answers)
        self.given: list[Outgoing] = []

    def __call__(self, messages: Sequence[Outgoing], on_result: OnResult | None = None) -> list[SubmitResult]:
        self.given.extend(messages)
        answer = self.answers.pop(0) if self.answers else SubmitResult(key=messages[0].key, status="sent")
        if isinstance(answer, BaseException):
            raise answer
        if answer is not None and on_result is not None:
            on_result(answer)
        return [] if answer is None else [answer]


def _people(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch, *answers: SubmitResult | BaseException | None
) -> Answers:
    spy = Answers(*answers)
    monkeypatch.setattr(alpha.people.transport, "submit", spy)
    return spy


def _result(status: str, detail: str = "", refused: tuple[tuple[str, str], ...] = ()) -> SubmitResult:
    return SubmitResult(key="k", status=status, detail=detail, refused=refused)


# --- deliver and why_not --------------------------------------------------------------------


def test_deliver_submits_once_from_the_platform_to_every_person(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _people(alpha, monkeypatch)
    assert alpha.people.deliver(("a@people.test", "b@people.test"), "<m@bus.test>", b"bytes") == ("sent", "")
    (given,) = spy.given
    assert (given.key, given.raw) == ("<m@bus.test>", b"bytes")
    assert given.envelope.mail_from == "alpha@bus.test"
    assert given.envelope.rcpt_to == ("a@people.test", "b@people.test")


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (TransportError("the server is down"), "the server is down"),
        (ConfigError(""), "ConfigError"),
        (OSError("no room"), "no room"),
        (OSError(), "OSError"),
    ],
)
def test_deliver_says_queued_with_why_when_the_transport_raises(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch, raised: BaseException, said: str
) -> None:
    _people(alpha, monkeypatch, raised)
    assert alpha.people.deliver((CAROL,), "<m@bus.test>", b"x") == ("queued", said)


def test_deliver_without_a_result_is_queued(alpha: AgentMail, monkeypatch: pytest.MonkeyPatch) -> None:
    _people(alpha, monkeypatch, None)
    assert alpha.people.deliver((CAROL,), "<m@bus.test>", b"x") == ("queued", "the transport gave no result")


@pytest.mark.parametrize(
    ("result", "said"),
    [
        (_result("sent"), ("sent", "")),
        (_result("failed", "550 no such user"), ("failed", "550 no such user")),
        (_result("sent", "", (("a@p.test", "550 gone"),)), ("sent", "a@p.test: 550 gone")),
        (
            _result("sent", "250 ok", (("a@p.test", "550 gone"), ("b@p.test", "552 full"))),
            ("sent", "250 ok; a@p.test: 550 gone; b@p.test: 552 full"),
        ),
    ],
)
def test_deliver_says_the_status_and_every_refused_recipient(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch, result: SubmitResult, said: tuple[str, str]
) -> None:
    _people(alpha, monkeypatch, result)
    assert alpha.people.deliver((CAROL,), "<m@bus.test>", b"x") == said


def test_deliver_reads_the_last_result(alpha: AgentMail, monkeypatch: pytest.MonkeyPatch) -> None:
    def two(messages: Sequence[Outgoing], on_result: OnResult | None = None) -> list[SubmitResult]:
        assert on_result is not None
        on_result(_result("queued", "first"))
        on_result(_result("failed", "last"))
        return []

    monkeypatch.setattr(alpha.people.transport, "submit", two)
    assert alpha.people.deliver((CAROL,), "<m@bus.test>", b"x") == ("failed", "last")


@pytest.mark.parametrize(
    ("answer", "said"),
    [(_result("sent", "250 ok"), ""), (_result("failed", "550 no"), "550 no"), (_result("failed"), "failed")],
)
def test_why_not_is_empty_only_when_it_left(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch, answer: SubmitResult, said: str
) -> None:
    _people(alpha, monkeypatch, answer)
    assert alpha.people.why_not((CAROL,), "<m@bus.test>", b"x") == said


# --- the records, read back as hostile files -------------------------------------------------


def test_a_record_is_its_sorted_json(tmp_path: Path) -> None:
    write_record(tmp_path / "k.json", {"state": "sent", "at": 1, "key": "k"})
    assert (tmp_path / "k.json").read_bytes() == b'{"at": 1, "key": "k", "state": "sent"}'
    assert (tmp_path / "k.json").stat().st_mode & 0o777 == 0o600
    assert read_record(tmp_path / "k.json") == {"at": 1, "key": "k", "state": "sent"}


@pytest.mark.parametrize(
    "content",
    [b"", b"[1, 2]", b'"text"', b"{", b"\xff\xfe", b"null"],
)
def test_a_record_that_is_no_object_reads_as_nothing(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "k.json").write_bytes(content)
    assert read_record(tmp_path / "k.json") == {}


def test_a_record_is_read_up_to_a_mebibyte_and_never_through_a_link(tmp_path: Path) -> None:
    whole = b'{"a": "' + b"x" * ((1 << 20) - 9) + b'"}'
    assert len(whole) == 1 << 20
    (tmp_path / "edge.json").write_bytes(whole)
    assert read_record(tmp_path / "edge.json") == {"a": "x" * ((1 << 20) - 9)}
    (tmp_path / "over.json").write_bytes(whole + b" ")
    assert read_record(tmp_path / "over.json") == {}
    (tmp_path / "link.json").symlink_to(tmp_path / "edge.json")
    assert read_record(tmp_path / "link.json") == {}
    assert read_record(tmp_path / "missing.json") == {}
    (tmp_path / "folder.json").mkdir()
    assert read_record(tmp_path / "folder.json") == {}


def test_records_are_keyed_by_their_file_and_sorted_by_time_then_key(tmp_path: Path) -> None:
    assert records_in(tmp_path / "none") == []
    (tmp_path / "file").write_text("")
    assert records_in(tmp_path / "file") == []
    for name, record in {
        "b": {"at": 5, "key": "../../elsewhere"},
        "a": {"at": 5},
        "c": {"at": 1},
        "d": {"at": True},  # a bool is no time
        "e": {"at": "3"},
        "f": {"at": -2},
    }.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(record))
    (tmp_path / "empty.json").write_text("{}")  # nothing in it: not a record
    (tmp_path / "g.eml").write_text("{}")
    (tmp_path / "h.json.tmp").write_text('{"at": 0}')
    keys = [(r["key"], r["at"]) for r in records_in(tmp_path)]
    assert keys == [("f", -2), ("d", True), ("e", "3"), ("c", 1), ("a", 5), ("b", 5)]
    assert records_in(tmp_path)[-1] == {"at": 5, "key": "b"}
