"""The one door for letters to people (``client/to_people.py``), exactly: what ``deliver`` says
for each answer of a transport, the queued records read back as hostile files (``records_in``,
``read_record``, ``_retry``, ``retry_announcements``), and what each record and note says."""

from __future__ import annotations

import email
import email.policy
import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from agentmail import ages, bounds
from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.client.to_people import INTERRUPTED, read_record, records_in, write_record
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import ConfigError, TransportError
from agentmail.model import Letter, ThreadStatus
from agentmail.people import approval, escalation
from agentmail.transport import OnResult, Outgoing, SubmitResult

from ..conftest import OPENER
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


# --- a held letter's announcement: recorded first, sent again while queued (the one retry) -----


def _held(
    approving: Registry, home: Path, monkeypatch: pytest.MonkeyPatch, *answers: SubmitResult
) -> tuple[AgentMail, str, Answers]:  # noqa: F811
    """alpha's letter to beta held for CAROL, its announcement answered by ``answers``."""
    alpha = AgentMail(approving, Identity("alpha"), home)
    spy = _people(alpha, monkeypatch, *answers)
    letter = alpha.send("beta", "Quota 500s", OPENER)
    assert letter.state == "held"
    return alpha, letter.id, spy


def _where(alpha: AgentMail) -> Path:
    return alpha.spool.root / "announcements"


def _on_disk(alpha: AgentMail, key: str) -> dict[str, object]:
    return json.loads((_where(alpha) / f"{key}.json").read_bytes())


def test_a_queued_announcement_keeps_its_bytes_and_its_record_says_so(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, _result("queued", "421 later"))
    (given,) = spy.given
    assert (_where(alpha) / f"{held}.eml").read_bytes() == given.raw
    record = _on_disk(alpha, held)
    assert record == {"key": held, "letter": held, "message_id": given.key, "to": [CAROL],
                      "at": record["at"], "state": "queued", "detail": "421 later"}  # fmt: skip
    assert isinstance(record["at"], int) and record["at"] > 0
    assert alpha.show(held).extra["announce_failed"] == "queued, sent again by the next sync: 421 later"
    assert sorted(p.name for p in _where(alpha).iterdir()) == [f"{held}.eml", f"{held}.json"]
    assert _where(alpha).stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    ("answer", "noted"),
    [
        (_result("sent", "250 ok"), ("announced", None)),
        (_result("failed", "550 no such person"), ("announce_failed", "550 no such person")),
        (_result("failed"), ("announce_failed", "failed")),
    ],
)
def test_an_announcement_that_left_or_failed_for_good_keeps_nothing(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    answer: SubmitResult,
    noted: tuple[str, str | None],
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, answer)
    extra = alpha.show(held).extra
    field, value = noted
    assert extra[field] == (spy.given[0].key if value is None else value)
    assert not _where(alpha).exists()  # its folder goes with its last record
    assert (alpha.spool.root / "announcements.lock").exists()


def test_the_retry_sends_a_queued_record_only_to_the_people_named_now(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, _result("queued", "421 later"))
    record = _on_disk(alpha, held)
    (_where(alpha) / f"{held}.json").write_text(json.dumps({**record, "to": ["mallory@evil.test", CAROL]}))
    done = alpha.people._retry(_where(alpha), (CAROL, "dave@people.test"))
    assert [r["state"] for r in done] == ["sent"] and done[0]["to"] == [CAROL]
    assert spy.given[-1].envelope.rcpt_to == (CAROL,) and spy.given[-1].raw == spy.given[0].raw
    assert _on_disk(alpha, held)["state"] == "sent" and not (_where(alpha) / f"{held}.eml").exists()


@pytest.mark.parametrize(
    "change",
    [
        {"state": "sent"},
        {"state": "sending"},
        {"state": None},
        {"to": []},
        {"to": None},
        {"to": CAROL},  # a string names no one: its letters are no addresses
        {"to": ["mallory@evil.test"]},
    ],
)
def test_the_retry_leaves_a_record_that_is_not_queued_to_someone_it_may_mail(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    change: dict[str, object],
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, _result("queued", "421 later"))
    record = {**_on_disk(alpha, held), **change}
    (_where(alpha) / f"{held}.json").write_text(json.dumps(record))
    assert alpha.people._retry(_where(alpha), (CAROL,)) == []
    assert len(spy.given) == 1 and _on_disk(alpha, held) == record


def test_the_retry_never_reads_queued_bytes_through_a_link_or_when_they_are_gone(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, _result("queued", "421 later"))
    queued = _where(alpha) / f"{held}.eml"
    queued.rename(home / "aside.eml")
    assert alpha.people._retry(_where(alpha), (CAROL,)) == []
    queued.symlink_to(home / "aside.eml")
    assert alpha.people._retry(_where(alpha), (CAROL,)) == []
    queued.unlink()
    queued.write_bytes(b"")  # empty bytes are bytes: sent as queued
    (done,) = alpha.people._retry(_where(alpha), (CAROL,))
    assert done["state"] == "sent" and spy.given[-1].raw == b"" and len(spy.given) == 2


def test_the_retry_goes_on_past_a_record_it_cannot_send_and_queues_again(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, _result("queued", "421 later"))
    record = _on_disk(alpha, held)
    (_where(alpha) / "0early.json").write_text(json.dumps({**record, "at": 1, "state": "failed"}))
    spy.answers = [_result("queued", "still later")]
    (done,) = alpha.people._retry(_where(alpha), (CAROL,))
    assert done == {**record, "state": "queued", "detail": "still later"}
    assert (_where(alpha) / f"{held}.eml").read_bytes() == spy.given[0].raw


def test_after_a_sync_a_queued_announcement_leaves_and_is_noted(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, _result("queued", "421 later"))
    alpha.people.retry_announcements()
    assert alpha.show(held).extra["announced"] == spy.given[0].key
    assert spy.given[1].envelope.rcpt_to == (CAROL,) and not _where(alpha).exists()


@pytest.mark.parametrize(
    ("change", "sent"),
    [
        ({"letter": "01NOTHELD"}, False),  # released or rejected meanwhile
        ({"letter": None}, False),
        ({"key": "other"}, True),  # the key is the file's name, whatever the record says
    ],
)
def test_a_record_for_no_held_letter_of_its_own_name_is_forgotten_unsent(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    change: dict[str, object],
    sent: bool,
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, _result("queued", "421 later"))
    (_where(alpha) / f"{held}.json").write_text(json.dumps({**_on_disk(alpha, held), **change}))
    alpha.people.retry_announcements()
    assert len(spy.given) == 1 + sent and not _where(alpha).exists()


def test_a_record_under_another_name_than_its_letter_is_forgotten_unsent(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, _result("queued", "421 later"))
    (_where(alpha) / f"{held}.json").rename(_where(alpha) / "planted.json")
    (_where(alpha) / f"{held}.eml").rename(_where(alpha) / "planted.eml")
    alpha.people.retry_announcements()
    assert len(spy.given) == 1 and not _where(alpha).exists()
    assert alpha.show(held).extra["announce_failed"].startswith("queued, sent again")


def test_a_record_of_a_letter_announced_already_is_forgotten_unsent(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, _result("queued", "421 later"))
    alpha.spool.write.annotate(held, announced="<before@bus.test>")
    alpha.people.retry_announcements()
    assert len(spy.given) == 1 and not _where(alpha).exists()
    assert alpha.show(held).extra["announced"] == "<before@bus.test>"


def test_a_record_left_sending_says_interrupted_and_is_never_sent(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, _result("queued", "421 later"))
    (_where(alpha) / f"{held}.json").write_text(json.dumps({**_on_disk(alpha, held), "state": "sending"}))
    alpha.people.retry_announcements()
    assert len(spy.given) == 1 and not _where(alpha).exists()
    assert alpha.show(held).extra["announce_failed"] == INTERRUPTED


def test_nothing_queued_is_one_look_and_takes_no_lock(alpha: AgentMail) -> None:
    alpha.spool.ensure()
    alpha.people.retry_announcements()
    assert not (alpha.spool.root / "announcements.lock").exists()


def test_the_announcements_folder_stays_while_something_else_lies_in_it(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)
    spy = _people(alpha, monkeypatch)
    alpha.spool.ensure()
    _where(alpha).mkdir(mode=0o700)
    (_where(alpha) / "x").mkdir()
    letter = alpha.send("beta", "Quota 500s", OPENER)
    assert len(spy.given) == 1 and alpha.show(letter.id).extra["announced"] == spy.given[0].key
    assert sorted(p.name for p in _where(alpha).iterdir()) == ["x"]  # a folder not empty stays


def test_records_of_the_same_time_come_in_the_order_of_their_names_whatever_the_folders(tmp_path: Path) -> None:
    names = ["k", "c", "x", "a", "q", "f", "z", "b", "m", "e", "t", "h"]  # made in no order
    for name in names:
        (tmp_path / f"{name}.json").write_text('{"at": 7}')
    assert [r["key"] for r in records_in(tmp_path)] == sorted(names)


# --- after a sync: what is owed to people ------------------------------------------------------


def _following(registry: Registry, home: Path) -> AgentMail:
    bus.set_person(registry, "alpha", CAROL, follows=True, writes=False)
    return AgentMail(registry_mod.load(registry.root), Identity("alpha"), home)


def test_the_first_sync_announces_whatever_the_clock_says_then_once_a_minute(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = _following(registry, home)
    runs: list[int] = []
    monkeypatch.setattr(alpha.people, "escalate", lambda: [{"n": len(runs)}] if not runs.append(1) else [])
    now = [5]  # a clock just after the epoch: the first run is due all the same
    monkeypatch.setattr(ages, "now_ms", lambda: now[0])
    assert alpha.people.after_sync() is None and runs == [1]
    now[0] = 5 + 59_999
    assert alpha.people.after_sync() is None and runs == [1]
    now[0] = 5 + 60_000
    assert alpha.people.after_sync() is None and runs == [1, 1]
    assert alpha.people.escalated == [{"n": 1}, {"n": 2}]


def test_without_followers_a_sync_owes_people_nothing_but_the_retries(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    retried: list[int] = []
    monkeypatch.setattr(alpha.people, "retry_announcements", lambda: retried.append(1))
    monkeypatch.setattr(alpha.people, "escalate", lambda: pytest.fail("nobody follows alpha"))
    assert alpha.people.after_sync() is None and retried == [1] and alpha.people.escalated == []
    assert alpha.people.escalate.__name__ == "<lambda>"


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (TransportError("421 busy\r\n421 try later"), "could not announce to the followers: 421 busy 421 try later"),
        (OSError(), "could not announce to the followers: OSError"),
        (ConfigError("no key"), "could not announce to the followers: no key"),
    ],
)
def test_a_failed_announcement_to_the_followers_is_said_in_one_line_and_tried_a_minute_later(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch, raised: BaseException, said: str
) -> None:
    alpha = _following(registry, home)

    def failing() -> list[dict[str, object]]:
        raise raised

    monkeypatch.setattr(alpha.people, "escalate", failing)
    assert alpha.people.after_sync() == said
    assert alpha.people.after_sync() is None  # within the minute: not tried again


# --- escalation: how many threads per counterpart were announced within the window ------------


def test_the_recent_announcements_are_counted_per_counterpart_within_the_window(alpha: AgentMail) -> None:
    where = alpha.spool.platform_root / "escalations"
    where.mkdir(parents=True)
    now = 10 * bounds.ANNOUNCE_WINDOW_MS
    for name, at, with_ in [
        ("a", now - 1, "beta"),
        ("b", now - bounds.ANNOUNCE_WINDOW_MS + 1, "beta"),
        ("c", now - bounds.ANNOUNCE_WINDOW_MS, "beta"),  # a day ago to the ms: out of the window
        ("d", now, "gamma"),
        ("e", now, None),
        ("f", "yesterday", "beta"),
    ]:
        record = {"at": at} if with_ is None else {"at": at, "with": with_}
        (where / f"{name}.json").write_text(json.dumps(record))
    assert alpha.people._recent(now) == {"beta": 2, "gamma": 1, "": 1}
    assert [r["key"] for r in alpha.people.escalations()] == ["f", "c", "b", "a", "d", "e"]


def test_escalating_keeps_its_records_in_a_private_folder(registry: Registry, home: Path) -> None:
    alpha = _following(registry, home)
    alpha.spool.ensure()
    assert alpha.people.escalate() == []
    assert (alpha.spool.platform_root / "escalations").stat().st_mode & 0o777 == 0o700
    assert (alpha.spool.platform_root / "escalations.lock").exists()
    assert AgentMail(registry, Identity("beta"), home).people.escalate() == []  # nobody follows beta


def test_the_retry_goes_on_past_a_record_whose_bytes_are_gone(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, held, spy = _held(approving, home, monkeypatch, _result("queued", "421 later"))
    record = _on_disk(alpha, held)
    (_where(alpha) / "0first.json").write_text(json.dumps({**record, "at": 1}))  # queued, its bytes gone
    (done,) = alpha.people._retry(_where(alpha), (CAROL,))
    assert done["key"] == held and done["state"] == "sent" and len(spy.given) == 2


def test_the_digest_syncs_once_when_asked_and_never_otherwise(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    monkeypatch.setattr(alpha.people, "sync", lambda: synced.append("people"))
    monkeypatch.setattr(alpha.people.threads, "sync", lambda: synced.append("threads"))
    alpha.people.digest(sync=False)
    assert synced == []
    alpha.people.digest()
    assert synced == ["people"]


NOW = 1_800_000_000_000
HOUR, DAY = 3_600_000, 86_400_000


def _row(name: str, whose: str, delivery: str, opened: int, moved: int, with_: str = "beta") -> ThreadStatus:
    return ThreadStatus(thread=name, subject=name, state="reported", last_type="report", whose_move=whose, letters=1,
                        with_=with_, last_id=name, undeliverable=False, delivery=delivery,
                        opened_ms=NOW - opened, moved_ms=NOW - moved)  # fmt: skip


def test_the_digest_lists_the_threads_owed_a_move_stale_ones_first_then_oldest_first(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        _row("done", "nobody", "sent", 9 * DAY, 9 * DAY),  # nobody's move, nothing waiting: not listed
        _row("held", "nobody", "held", 2 * DAY, HOUR),
        _row("failed", "nobody", "failed", 1 * DAY, 2 * DAY),
        _row("stale", "me", "received", 10 * DAY, 4 * DAY),
        _row("fresh", "beta", "sent", 20 * DAY, 10 * 60_000),
        _row("edge", "me", "received", 30 * DAY, 3 * DAY),  # idle exactly stale_after: not stale yet
        _row("staler", "beta", "sent", 6 * DAY, 5 * DAY),
    ]
    monkeypatch.setattr(ages, "now_ms", lambda: NOW)
    monkeypatch.setattr(alpha.people.threads, "status", lambda sync=True: rows if sync is False else [])
    digest = alpha.people.digest(sync=False)
    assert digest.stale_after == 3 * 86_400 and digest.now == NOW
    assert [r.thread for r in digest.threads] == ["staler", "stale", "edge", "fresh", "held", "failed"]


# --- the hold rule ------------------------------------------------------------------------------


def test_a_hold_change_is_mailed_with_its_before_and_after_under_its_own_message_id(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)
    spy = _people(alpha, monkeypatch)
    assert alpha.people.announce_hold_change(["beta@bus.test"], ["gamma@bus.test"]) == ""
    (given,) = spy.given
    letter = email.message_from_bytes(given.raw, policy=email.policy.default)
    assert given.key == letter["Message-ID"] and given.envelope.rcpt_to == (CAROL,)
    assert "Before: beta@bus.test\r\nNow:    gamma@bus.test\r\n" in letter.get_content()  # type: ignore[attr-defined]


def test_a_hold_change_that_cannot_be_written_says_why(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)
    spy = _people(alpha, monkeypatch)

    def unsigned(*args: object) -> tuple[str, bytes]:
        raise ConfigError("alpha has no signing key")

    monkeypatch.setattr(approval, "hold_change", unsigned)
    assert alpha.people.announce_hold_change([], ["bus.test"]) == "alpha has no signing key"
    assert spy.given == []


def _last(key: str) -> Letter:
    """The stalled thread's last letter, as much of it as the run reads: its Message-ID, the
    claim on the server that makes the stall's announcement once across machines."""
    return cast(Letter, SimpleNamespace(message_id=f"<last-{key}@bus.test>"))


def test_escalating_skips_what_was_announced_and_a_counterpart_at_its_bound_and_stops_at_the_runs(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = _following(registry, home)
    alpha.spool.ensure()
    spy = _people(alpha, monkeypatch)
    where = alpha.spool.platform_root / "escalations"
    where.mkdir(mode=0o700)
    now = 10 * DAY
    for n in range(bounds.ANNOUNCE_PER_SENDER):  # beta's threads announced within the day: at its bound
        (where / f"beta{n}.json").write_text(json.dumps({"at": now - 1, "with": "beta", "state": "sent"}))
    (where / "told.json").write_text(json.dumps({"at": 0, "with": "gamma", "state": "sent"}))
    due = [("told", "gamma"), ("b1", "beta"), ("g1", "gamma"), ("g2", "gamma"), ("d1", "delta"),
           ("d2", "delta"), ("e1", "eps"), ("e2", "eps")]  # fmt: skip
    synced: list[object] = []

    def status(sync: object = True) -> list[ThreadStatus]:
        synced.append(sync)
        return []

    def thread(name: str, sync: object = True) -> list[object]:
        synced.append(sync)
        return []

    monkeypatch.setattr(ages, "now_ms", lambda: now)
    monkeypatch.setattr(alpha.people.threads, "status", status)
    monkeypatch.setattr(alpha.people.threads, "thread", thread)
    monkeypatch.setattr(
        escalation, "due", lambda *a: [(k, "stale", _row(k, "me", "sent", DAY, DAY, w), _last(k)) for k, w in due]
    )
    monkeypatch.setattr(escalation, "letter", lambda *a: (f"<{a[5].thread}@bus.test>", b"raw"))
    done = alpha.people.escalate()
    assert (
        [r["key"] for r in done]
        == ["g1", "g2", "d1", "d2", "e1"]
        == ["g1", "g2", "d1", "d2", "e1"][: bounds.ANNOUNCE_PER_RUN]
    )
    assert [r["state"] for r in done] == ["sent"] * 5 and [g.key for g in spy.given] == [
        f"<{k}@bus.test>" for k in ("g1", "g2", "d1", "d2", "e1")
    ]
    assert synced == [False] * 6  # the run reads the spool as it is: the sync that called it is done
    assert not (where / "b1.json").exists() and not (where / "e2.json").exists()


def test_the_digest_lists_the_announcements_since_its_start_and_survives_hostile_records(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An escalation record is a file: its ``at`` may be anything. One that is no time is read as
    the epoch (``_at``, as ``records_in`` sorts it), never a crash of the digest."""
    where = alpha.spool.platform_root / "escalations"
    where.mkdir(parents=True)
    start = NOW - DAY
    for name, at in [
        ("old", start),
        ("new", start + 1),
        ("soon", "soon"),
        ("none", None),
        ("list", [1]),
        ("bool", True),
    ]:
        (where / f"{name}.json").write_text(json.dumps({"at": at, "with": "beta"}))
    (where / "missing.json").write_text(json.dumps({"with": "beta"}))
    monkeypatch.setattr(ages, "now_ms", lambda: NOW)
    digest = alpha.people.digest("1d", sync=False)
    assert digest.since == start and [r["key"] for r in digest.announced] == ["new"]
    assert [r["key"] for r in alpha.people.digest("1000d", sync=False).announced] == ["old", "new"]


def test_an_announcement_the_spool_cannot_record_is_noted_on_its_letter_with_why(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)
    spy = _people(alpha, monkeypatch)
    alpha.spool.ensure()
    _where(alpha).write_text("not a folder")
    letter = alpha.send("beta", "Quota 500s", OPENER)
    assert alpha.show(letter.id).extra["announce_failed"] == f"[Errno 17] File exists: '{_where(alpha)}'"
    assert spy.given == []


def test_the_digest_names_its_platform_its_held_and_quarantined_letters(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, held, _ = _held(approving, home, monkeypatch, _result("sent"))
    digest = alpha.people.digest("1d", sync=False)
    assert digest.platform == "alpha" and [x.id for x in digest.held] == [held]
    assert digest.quarantined == () and digest.bounced == () and digest.announced == ()


def test_the_digest_lists_a_bounce_by_the_time_its_note_says_else_its_letters(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = ages.now_ms()
    sent = {
        name: alpha.send("beta", f"Letter {name}", OPENER).id
        for name in ("old", "edge", "word", "arabic", "recent", "kept")
    }
    notes = {"old": str(now - 2 * DAY), "edge": str(now - DAY), "word": "soon", "arabic": "\u0661\u0662",
             "recent": str(now - HOUR)}  # fmt: skip
    for name, at in notes.items():
        alpha.spool.write.annotate(sent[name], undeliverable="550 gone", undeliverable_at=at)
    alpha.spool.write.annotate(sent["kept"], queued="no bounce")
    monkeypatch.setattr(ages, "now_ms", lambda: now)
    digest = alpha.people.digest("1d", sync=False)
    assert digest.since == now - DAY
    assert sorted(x.id for x in digest.bounced) == sorted(sent[n] for n in ("word", "arabic", "recent"))
