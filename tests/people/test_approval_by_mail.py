"""Issue 26, approval by a person: a held letter is announced by mail to the platform's approvers
(people listed with ``approves``); an approver's authenticated reply ("approve" / "reject
REASON" as the first word) releases it exactly once or drops it, on the agent's next sync.
Nobody else's reply decides anything; the agent's own ``approve`` needs the operator's key, MCP
has no way to release, and a change of the ``hold`` rule is itself announced. End to end on the
local post office, where a person's mailbox is the Maildir ``postoffice/<address>/``."""

from __future__ import annotations

import email
import email.policy
import itertools
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.cli import mcp_server
from agentmail.cli.app import main
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import Refused
from agentmail.people import approval
from agentmail.transport.local import deliver

from ..conftest import OPENER
from ..helpers.approval_key import operator_key
from .test_writing import client_letter, trusting, vouched

CAROL = "carol@people.test"  # approves alpha's held letters
DAVE = "dave@people.test"  # writes for alpha, does not approve
T = TypeVar("T")


@pytest.fixture
def approving(registry: Registry, home: Path) -> Registry:
    bus.set_setting(registry.root, "hold", ["beta@bus.test"])  # before an approver: then it is asked, or told
    bus.set_setting(registry.root, "trusted_authserv_ids", ["mail.bus.test"])  # the CLI reads it from disk
    bus.set_person(registry_mod.load(registry.root), "alpha", DAVE, follows=False, writes=True)  # before an approver
    bus.set_person(registry_mod.load(registry.root), "alpha", CAROL, follows=False, writes=False, approves=True)
    return trusting(registry_mod.load(registry.root))


def mailbox(home: Path, address: str) -> list[EmailMessage]:
    """What a person's mail client shows in their local Maildir, oldest first (a file system
    tick holds several letters: the name, which starts with the delivery's time in ns, breaks ties)."""
    folder = home / "postoffice" / address / "new"
    if not folder.is_dir():
        return []
    return [
        email.message_from_bytes(p.read_bytes(), policy=email.policy.default)  # type: ignore[misc]
        for p in sorted(folder.iterdir(), key=lambda p: (p.stat().st_mtime_ns, p.name))
    ]


def answer(home: Path, announcement: EmailMessage, body: str, *, sender: str = CAROL, n: int = 1,
           verdict: bytes | None = None) -> None:  # fmt: skip
    """The approver answers the announcement from their own mail client; the bus's MTA delivers it."""
    mid = str(announcement["Message-ID"])
    msg = client_letter(
        "alpha@bus.test", body, sender=sender, subject=f"Re: {announcement['Subject']}", in_reply_to=mid,
        references=mid, message_id=f"<answer.{n}.{sender}>",
    )  # fmt: skip
    raw = vouched(msg) if verdict is None else vouched(msg, verdict=verdict)
    deliver(home / "postoffice" / "alpha", raw)


_ANSWERS = itertools.count(1000)  # two approvals in one test must not share a Message-ID (the second is a duplicate)


def approved(home: Path, change: Callable[[], T], *approvers: str) -> T:
    """A change made once approvers are listed, as they let it happen: asked (Refused, the ask
    mailed), each of ``approvers`` (default carol) answers "approve", the change made again. The
    approvers then delete the ask, so a test's count of their mail starts afresh."""
    with pytest.raises(Refused, match="waits for an approver"):
        change()
    for who in approvers or (CAROL,):
        asks = [p for p in _letters(home, who) if _subject(p).startswith("Approve? a change: ")]
        answer(home, _parsed(asks[-1]), "approve", sender=who, n=next(_ANSWERS))  # each its own Message-ID
    done = change()
    for who in approvers or (CAROL,):
        for path in _letters(home, who):
            if _subject(path).startswith("Approve? a change: "):
                path.unlink()
    return done


def _letters(home: Path, address: str) -> list[Path]:
    folder = home / "postoffice" / address / "new"
    return sorted(folder.iterdir(), key=lambda p: (p.stat().st_mtime_ns, p.name)) if folder.is_dir() else []


def _parsed(path: Path) -> EmailMessage:
    parsed = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


def _subject(path: Path) -> str:
    return str(_parsed(path)["Subject"]).strip()


def held_and_announced(alpha: AgentMail, home: Path, subject: str = "Quota 500s") -> tuple[str, EmailMessage]:
    letter = alpha.send("beta", subject, OPENER)
    assert letter.state == "held"
    news = [m for m in mailbox(home, CAROL) if letter.id in str(m["Subject"])]
    assert len(news) == 1
    return letter.id, news[0]


def test_the_approver_receives_a_plain_automatic_letter_with_the_held_letter_and_how_to_answer(
    approving: Registry, home: Path
) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)
    letter_id, news = held_and_announced(alpha, home)
    assert news["Auto-Submitted"] == "auto-generated" and news["To"] == CAROL
    assert news.get_content_type() == "text/plain" and not news.is_multipart()
    text = news.get_content()
    assert OPENER.strip().splitlines()[0] in text  # the held letter's own words
    assert "hold = 'beta@bus.test'" in text and "To: beta" in text
    assert text.rstrip().splitlines()[-1] == approval.HOW_TO_ANSWER
    assert "---" not in text.split("\n\n")[0]  # no agent front matter on top
    assert alpha.show(letter_id).extra["announced"] == news["Message-ID"]
    assert mailbox(home, DAVE) == []  # only approvers are told


def test_approve_by_reply_releases_exactly_once(approving: Registry, home: Path) -> None:
    alpha, beta = AgentMail(approving, Identity("alpha"), home), AgentMail(approving, Identity("beta"), home)
    letter_id, news = held_and_announced(alpha, home)
    answer(home, news, "Approve.\n\nOn Tue, agentmail wrote:\n> quoted text\n")
    alpha.sync()
    assert alpha.spool.read.locate(letter_id) == "sent" and alpha.held() == []
    assert alpha.show(letter_id).extra["approved_by"] == CAROL
    assert [x.message_id for x in beta.inbox()] == [alpha.show(letter_id).message_id]
    answer(home, news, "approve", n=2)  # answered twice (or the answer delivered twice)
    alpha.sync()
    alpha.flush()
    assert len(beta.inbox()) == 1
    assert alpha.spool.read.locate(letter_id) == "sent"
    (row,) = [r for r in alpha.status() if r.thread == alpha.show(letter_id).thread]
    assert row.delivery != "held"


def test_reject_by_reply_drops_it_with_the_reason_for_the_agent(
    approving: Registry, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alpha, beta = AgentMail(approving, Identity("alpha"), home), AgentMail(approving, Identity("beta"), home)
    letter_id, news = held_and_announced(alpha, home)
    answer(home, news, "reject: no refunds promised to partners\n")
    alpha.sync()
    dropped = alpha.show(letter_id)
    assert dropped.state == "failed" and dropped.extra["rejected"] == "no refunds promised to partners"
    assert f"rejected by {CAROL}" in dropped.extra["failed_reason"]
    assert beta.inbox() == []
    assert main(["--as", "alpha", "sent"]) == 0
    assert "FAILED (rejected): no refunds promised to partners" in capsys.readouterr().out


@pytest.mark.parametrize(
    "sender,verdict,outcome",
    [
        (DAVE, None, "accepted"),  # a person of alpha, but no approver: recorded, decides nothing
        (CAROL, b"", "quarantined"),  # no Authentication-Results at all
        (CAROL, b"Authentication-Results: evil.test; dkim=pass header.d=people.test\r\n", "quarantined"),
        (CAROL, b"Authentication-Results: mail.bus.test; dkim=fail header.d=people.test\r\n", "quarantined"),
        ("mallory@evil.test", None, "quarantined"),  # nobody listed
    ],
)
def test_replies_from_anyone_else_or_unauthenticated_do_nothing(
    approving: Registry, home: Path, sender: str, verdict: bytes | None, outcome: str
) -> None:
    alpha, beta = AgentMail(approving, Identity("alpha"), home), AgentMail(approving, Identity("beta"), home)
    letter_id, news = held_and_announced(alpha, home)
    answer(home, news, "approve", sender=sender, verdict=verdict)
    report = alpha.sync()
    alpha.flush()
    assert alpha.spool.read.locate(letter_id) == "held" and beta.inbox() == []
    if outcome == "quarantined":
        assert len(report.quarantined) == 1 and len(report.accepted) == 0
    else:
        (got,) = report.accepted
        assert "does not approve alpha" in alpha.spool.read.annotations(got.id)["approval_ignored"]


def test_a_reply_that_decides_nothing_is_recorded_and_the_letter_stays_held(approving: Registry, home: Path) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)
    letter_id, news = held_and_announced(alpha, home)
    answer(home, news, "> approve\nWhat is this letter about?\n")  # a quoted "approve" is not hers
    (got,) = alpha.sync().accepted
    assert alpha.spool.read.locate(letter_id) == "held"
    assert "neither" in alpha.spool.read.annotations(got.id)["approval_ignored"]


def test_the_agents_approve_without_the_key_is_refused_in_one_line(
    approving: Registry, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)
    letter_id, _ = held_and_announced(alpha, home)
    assert main(["--as", "alpha", "approve", letter_id]) == 4
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "approval key" in err
    key = operator_key(home)
    wrong = home.parent / "guess.key"
    wrong.write_text("not-the-key\n")
    assert main(["--as", "alpha", "approve", letter_id, "--key-file", str(wrong)]) == 4
    assert "is not the approval key" in capsys.readouterr().err
    with pytest.raises(Refused, match="approval key"):
        alpha.approve(letter_id)  # the library API alike
    assert alpha.spool.read.locate(letter_id) == "held"
    # a key inside AGENTMAIL_HOME would be the agent's: refused; a pinned key is replaced only with the old one
    assert main(["approve", "--new-key", str(home / "mine.key")]) == 2
    assert main(["approve", "--new-key", str(home.parent / "new.key")]) == 4
    capsys.readouterr()
    assert main(["--as", "alpha", "approve", letter_id, "--key-file", key]) == 0
    assert capsys.readouterr().out.split()[1:] == [letter_id, "sent"]


def test_mcp_offers_no_way_to_release_a_held_letter() -> None:
    names = set(mcp_server.TOOLS) | set(mcp_server.OPS)  # the tools, and every action of a group
    assert "held" in names  # the agent may see what waits
    assert not names & {"approve", "release", "reject", "bus_set", "set", "person"}
    assert all("approve" not in name for name in names)
    schemas = " ".join(str(schema) for _, schema in [*mcp_server.TOOLS.values(), *mcp_server.OPS.values()])
    assert "key_file" not in schemas and "approve" not in schemas


def test_a_change_of_the_hold_rule_is_announced_to_the_approvers(
    approving: Registry, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bus.set_setting(approving.root, "trusted_authserv_ids", ["mail.bus.test"])  # the CLI reads it from disk
    assert main(["--as", "alpha", "bus", "set", "hold", ""]) == 4  # lifting it waits for an approver (issue 37)
    (asked,) = mailbox(home, CAROL)
    assert asked["Subject"] == 'Approve? a change: agentmail bus set hold ""'
    answer(home, asked, "approve")
    assert main(["--as", "alpha", "bus", "set", "hold", ""]) == 0
    news = mailbox(home, CAROL)[-1]
    assert news["Auto-Submitted"] == "auto-generated" and news["Subject"] == "The hold rule changed"
    text = news.get_content()
    assert "Before: beta@bus.test" in text and "Now:    (none" in text
    assert registry_mod.load(home / "registry").bus.hold == ()
    assert main(["bus", "set", "hold", "bus.test"]) == 0  # the operator, outside any checkout: holding more
    assert len(mailbox(home, CAROL)) == 3
    assert main(["bus", "set", "hold", "bus.test"]) == 0  # no change: nothing to tell
    assert len(mailbox(home, CAROL)) == 3


@pytest.mark.parametrize("rule", [["beta@bus.test", "gamma@bus.test"], [""]])
def test_a_hold_change_that_cannot_be_announced_is_not_made(
    approving: Registry, home: Path, capsys: pytest.CaptureFixture[str], rule: list[str]
) -> None:
    (home / "postoffice").mkdir(exist_ok=True)
    (home / "postoffice" / CAROL).write_text("not a Maildir")  # her mailbox cannot take it
    assert main(["--as", "alpha", "bus", "set", "hold", *rule]) == 6
    err = capsys.readouterr().err
    assert "hold rule is unchanged" in err or "nothing was changed" in err
    assert registry_mod.load(home / "registry").bus.hold == ("beta@bus.test",)


@pytest.mark.parametrize(
    ("stage", "dies_in", "left_in"),
    [
        ("outbox", "send_now", "outbox"),  # after the release's rename, before submitting
        ("holds", "decide_by_mail", "held"),  # after the answer is filed and committed, before acting on it
    ],
)
def test_a_crash_anywhere_after_the_answer_sends_the_letter_once(
    approving: Registry, home: Path, monkeypatch: pytest.MonkeyPatch, stage: str, dies_in: str, left_in: str
) -> None:
    alpha, beta = AgentMail(approving, Identity("alpha"), home), AgentMail(approving, Identity("beta"), home)
    letter_id, news = held_and_announced(alpha, home)
    answer(home, news, "approve")

    def crash(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # the process dies here

    monkeypatch.setattr(getattr(alpha, stage), dies_in, crash)
    with pytest.raises(KeyboardInterrupt):
        alpha.sync()
    monkeypatch.undo()
    assert alpha.spool.read.locate(letter_id) == left_in
    restarted = AgentMail(approving, Identity("alpha"), home)
    if dies_in == "send_now":
        answer(home, news, "approve", n=2)  # and she approves again meanwhile
    restarted.sync()  # for the unread answer: nothing new arrives, it is taken up
    restarted.flush()
    assert restarted.spool.read.locate(letter_id) == "sent"
    assert restarted.show(letter_id).extra["approved_by"] == CAROL
    assert [x.message_id for x in beta.inbox()] == [alpha.show(letter_id).message_id]


@given(st.text(max_size=300))
def test_the_decision_parser_never_fails_and_decides_only_on_the_first_written_word(body: str) -> None:
    decided = approval.decision(body)
    written = [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith(">")]
    if decided is None:
        assert not written or written[0].partition(" ")[0].strip(".,:;!").lower() not in (
            "approve", "approved", "reject", "rejected",
        )  # fmt: skip
    else:
        assert written and decided[0] in ("approve", "reject")
        assert "\n" not in decided[1] and "\r" not in decided[1]
        assert (decided[1] == "") == (decided[0] == "approve")
