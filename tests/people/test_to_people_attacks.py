"""Attacks on the one door for letters to people: the queued announcements' folder as hostile
input (docs/threat/attacks-session6.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentmail import bounds
from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import Refused

from ..conftest import OPENER, Cli
from .test_approval_by_mail import answer, approving, mailbox  # noqa: F401  (approving: the fixture)
from .test_to_people import submitted, unreachable  # noqa: F401  (submitted: the fixture)


def _record(alpha: AgentMail, name: str, record: dict[str, object], raw: bytes = b"") -> None:
    where = alpha.spool.root / "announcements"
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    (where / f"{name}.json").write_text(json.dumps(record))
    if raw:
        (where / f"{name}.eml").write_bytes(raw)


def test_a_record_whose_key_walks_out_of_the_folder_removes_nothing_outside_it(
    approving: Registry,  # noqa: F811
    home: Path,
) -> None:
    """A junk record names a key outside announcements/ (a letter's file): forgetting it
    removes only the record's own files."""
    alpha, beta = AgentMail(approving, Identity("alpha"), home), AgentMail(approving, Identity("beta"), home)
    beta.send("alpha", "Quota 500s", OPENER)
    (letter,) = alpha.inbox()
    _record(alpha, "junk", {"key": f"../letters/{letter.id}", "letter": "nothing-held", "state": "queued", "at": 0})
    alpha.sync()
    assert (alpha.spool.root / "letters" / f"{letter.id}.eml").exists()
    assert alpha.show(letter.id).subject == "Quota 500s"
    assert not (alpha.spool.root / "announcements").exists()


def test_a_queued_record_mails_only_the_approvers_whatever_it_says(
    approving: Registry,  # noqa: F811
    home: Path,
    submitted: list[tuple[str, ...]],  # noqa: F811
) -> None:
    """A record planted beside a held letter's (same letter, queued) names a stranger: the retry
    mails no one the approvers are not."""
    alpha = AgentMail(approving, Identity("alpha"), home)
    held = alpha.send("beta", "Quota 500s", OPENER)
    assert held.state == "held" and submitted == [("carol@people.test",)]
    raw = b"From: alpha@bus.test\r\nTo: mallory@evil.test\r\nSubject: hi\r\n\r\nyour data\r\n"
    _record(alpha, "planted", {"key": "planted", "letter": held.id, "message_id": "<x@evil.test>",
                               "to": ["mallory@evil.test"], "state": "queued", "at": 0}, raw)  # fmt: skip
    alpha.sync()
    assert all(set(envelope) <= {"carol@people.test"} for envelope in submitted)
    assert not (home / "postoffice" / "mallory@evil.test").exists()


def test_a_queued_announcement_whose_bytes_became_a_link_sends_nothing_through_it(
    approving: Registry,  # noqa: F811
    home: Path,
) -> None:
    """The queued bytes are swapped for a link to a secret: the retry never reads through it."""
    alpha = AgentMail(approving, Identity("alpha"), home)
    blocked = unreachable(home)
    held = alpha.send("beta", "Quota 500s", OPENER)
    queued = alpha.spool.root / "announcements" / f"{held.id}.eml"
    assert queued.exists()
    secret = home / "secret.txt"
    secret.write_text("From: alpha@bus.test\r\nSubject: key\r\n\r\nPRIVATE KEY MATERIAL\r\n")
    queued.unlink()
    queued.symlink_to(secret)
    blocked.unlink()
    alpha.sync()
    assert all("PRIVATE KEY" not in m.as_string() for m in mailbox(home, "carol@people.test"))


def test_a_record_planted_again_after_its_announcement_left_is_not_sent_twice(
    approving: Registry,  # noqa: F811
    home: Path,
) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)
    held = alpha.send("beta", "Quota 500s", OPENER)
    (news,) = mailbox(home, "carol@people.test")
    raw = news.as_bytes()
    _record(alpha, held.id, {"letter": held.id, "message_id": str(news["Message-ID"]),
                             "to": ["carol@people.test"], "state": "queued", "at": 0}, raw)  # fmt: skip
    alpha.sync()
    assert len(mailbox(home, "carol@people.test")) == 1


def test_junk_in_the_announcements_folder_never_stops_a_sync(
    approving: Registry,  # noqa: F811
    home: Path,
) -> None:
    alpha, beta = AgentMail(approving, Identity("alpha"), home), AgentMail(approving, Identity("beta"), home)
    _record(alpha, "a", {"at": "soon", "to": "carol@people.test", "state": "queued"})
    _record(alpha, "b", {"at": True, "letter": None})
    (alpha.spool.root / "announcements" / "c.json").write_text("[1, 2]")
    (alpha.spool.root / "announcements" / "d.json").mkdir()
    (alpha.spool.root / "announcements" / "e.json").write_bytes(b" " * (1 << 20) + b'{"state": "queued"}')
    beta.send("alpha", "Quota 500s", OPENER)
    assert [x.subject for x in alpha.inbox()] == ["Quota 500s"]
    assert mailbox(home, "carol@people.test") == []


def test_the_api_lifts_a_hold_only_once_an_approver_approved_it_as_the_cli_does(
    approving: Registry,  # noqa: F811
    home: Path,
) -> None:
    """``admin.bus.change_hold`` (what a steered agent's Python reaches) asks, as ``bus set hold``
    does: telling the approvers is not enough to stop holding letters."""
    alpha = AgentMail(approving, Identity("alpha"), home)  # its registry trusts the people's mail server
    with pytest.raises(Refused, match="waits for an approver"):
        bus.change_hold(approving.root, [], teller=lambda _reg: alpha, home=home)
    assert registry_mod.load(approving.root).bus.hold == ("beta@bus.test",)
    (ask,) = mailbox(home, "carol@people.test")
    answer(home, ask, "approve")
    bus.change_hold(approving.root, [], teller=lambda _reg: alpha, home=home)
    assert registry_mod.load(approving.root).bus.hold == ()
    assert [str(m["Subject"]) for m in mailbox(home, "carol@people.test")][-1] == "The hold rule changed"


@pytest.mark.parametrize(
    ("value", "asked"),
    [
        ("0", True),
        ("500", True),
        (" 21 ", True),
        ("+500", True),
        ("5_00", True),
        ("\u0665\u0660\u0660", True),
        ("20", False),
        ("5", False),
    ],
)
def test_raising_the_new_thread_quota_waits_for_an_approver(
    approving: Registry,  # noqa: F811
    home: Path,
    cli: Cli,
    value: str,
    asked: bool,
) -> None:
    """A steered agent's ``bus set new_threads_per_hour 0`` would open threads without a cap:
    with approvers listed, a higher cap (or none) is theirs to allow; a lower one is not asked."""
    bus.set_setting(approving.root, "new_threads_per_hour", ["20"])
    bus.set_setting(approving.root, "trusted_authserv_ids", ["mail.bus.test"])  # the CLI reads it from disk
    code, _, err = cli("--as", "alpha", "bus", "set", "new_threads_per_hour", value)
    cap = registry_mod.load(approving.root).bus.new_threads_per_hour
    if not asked:
        assert code == 0 and cap == int(value) and mailbox(home, "carol@people.test") == [], err
        return
    assert code == 4 and "waits for an approver" in err and cap == 20
    (ask,) = mailbox(home, "carol@people.test")
    answer(home, ask, "approve")
    code, _, err = cli("--as", "alpha", "bus", "set", "new_threads_per_hour", value)
    assert code == 0 and registry_mod.load(approving.root).bus.new_threads_per_hour == int(value), err


def test_a_quota_that_is_no_number_is_refused_before_anyone_is_asked(
    approving: Registry,  # noqa: F811
    home: Path,
    cli: Cli,
) -> None:
    bus.set_setting(approving.root, "new_threads_per_hour", ["20"])
    code, out, err = cli("--as", "alpha", "bus", "set", "new_threads_per_hour", "lots")
    assert (code, out) == (2, "") and "new_threads_per_hour is a whole number" in err
    assert mailbox(home, "carol@people.test") == []


def test_one_change_after_another_never_floods_the_approvers_with_asks(
    approving: Registry,  # noqa: F811
    home: Path,
) -> None:
    """A steered agent tries change after change (each one a new ask): the approvers get at most
    ``bounds.ASKS_WAITING`` unanswered asks; the rest are refused unmailed, and once one is
    answered the next may be asked."""
    alpha = AgentMail(approving, Identity("alpha"), home)
    for n in range(bounds.ASKS_WAITING + 3):
        with pytest.raises(Refused) as refused:
            alpha.ask_approvers(f"agentmail bus set hold x{n}.test", "The hold rule stops holding letters for beta.")
    assert "already wait for the approvers' answer" in str(refused.value)
    asks = mailbox(home, "carol@people.test")
    assert len(asks) == bounds.ASKS_WAITING
    answer(home, asks[0], "reject not now")
    alpha.sync()
    with pytest.raises(Refused, match="rejected"):
        alpha.ask_approvers("agentmail bus set hold x0.test", "The hold rule stops holding letters for beta.")
    with pytest.raises(Refused, match="waits for an approver"):
        alpha.ask_approvers("agentmail bus set hold y.test", "The hold rule stops holding letters for beta.")
    assert len(mailbox(home, "carol@people.test")) == bounds.ASKS_WAITING + 1
