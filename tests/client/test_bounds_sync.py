"""Bounded work and mail per letter, end to end: a sync of hostile, genuinely signed letters
quarantines each one over a bound (``too-large``, naming it) and files the rest; the same bounds
refuse a letter on send (exit 2) through the API, the CLI and MCP; the spool look-ups one letter
buys are counted, never timed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentmail import bounds
from agentmail.client.facade import AgentMail
from agentmail.config.credentials import read_private_key
from agentmail.config.registry import Registry
from agentmail.errors import BadInput
from agentmail.letter import wire
from agentmail.model import new_thread_id
from agentmail.spool.views import SpoolReader
from agentmail.transport.local import deliver
from agentmail.trust import signing

from ..cli.test_mcp import call, session
from ..conftest import OPENER, Cli


def _signed(registry: Registry, home: Path, *, subject: str = "Hostile", body: str = "hello",
            references: tuple[str, ...] = (), in_reply_to: str | None = None, extra: list[bytes] = (),
            thread: str = "") -> bytes:  # fmt: skip
    """alpha's letter to beta with what a hostile sender chose, signed with alpha's real key."""
    letter = wire.draft_letter("alpha@bus.test", "Alpha", "beta@bus.test", "question", thread or new_thread_id(), "S", body,
                               message_id=wire.new_message_id("alpha", "bus.test"), references=references,
                               in_reply_to=in_reply_to)  # fmt: skip
    head, _, rest = wire.render(letter).partition(b"\r\n\r\n")
    head = head.replace(b"Subject: S", b"Subject: " + subject.encode())
    raw = b"\r\n".join([head, *extra]) + b"\r\n\r\n" + rest
    return signing.sign(raw, "bus.test", registry.platforms["alpha"].selector, read_private_key(home, "alpha"))


HOSTILE: dict[str, tuple[str, dict[str, Any]]] = {
    "a long subject": ("SUBJECT", {"subject": "word " * 100}),
    "many References": ("REFERENCES", {"references": tuple(f"<r{i}.x@bus.test>" for i in range(1000))}),
    "many header fields": ("HEADER_FIELDS", {"extra": [b"X-Filler-%d: v" % i for i in range(300)]}),
    "many quoted lines": ("QUOTED_LINES", {"body": "\n".join(["> quoted"] * 20_000)}),
    "many DKIM signatures": (
        "SIGNATURES",
        {"extra": [b"DKIM-Signature: v=1; a=ed25519-sha256; d=bus.test; s=x; bh=AAAA; b=AAAA; h=from"] * 20},
    ),
}


def test_a_sync_of_hostile_letters_quarantines_each_naming_its_bound(
    registry: Registry, home: Path, alpha: AgentMail, beta: AgentMail
) -> None:
    for _name, (_bound, choice) in HOSTILE.items():
        deliver(home / "postoffice" / "beta", _signed(registry, home, **choice))
    deliver(home / "postoffice" / "beta", _signed(registry, home, subject="Fine", body="A fine letter."))
    report = beta.sync()
    assert [x.subject for x in report.accepted] == ["Fine"] and report.internal_errors == 0
    assert [x.reason for x in report.quarantined] == ["too-large"] * len(HOSTILE)
    named = [str(x.detail).rpartition("(bounds.")[2].rstrip(")") for x in report.quarantined]
    assert named == [bound for bound, _ in HOSTILE.values()]


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The spool's look-ups by (sender, Message-ID): ``known``, and ``filed`` (the depth's)."""
    calls: list[str] = []
    known, filed = SpoolReader.known, SpoolReader.filed

    def counting(self: SpoolReader, sender: str, message_id: str) -> str | None:
        calls.append(message_id)
        return known(self, sender, message_id)

    def counting_filed(self: SpoolReader, sender: str, message_id: str) -> tuple[str, str, str | None] | None:
        calls.append(message_id)
        return filed(self, sender, message_id)

    monkeypatch.setattr(SpoolReader, "known", counting)
    monkeypatch.setattr(SpoolReader, "filed", counting_filed)
    return calls


def test_the_spool_look_ups_a_letter_buys_grow_with_its_references_and_stop_at_the_bound(
    registry: Registry, home: Path, alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = alpha.send("beta", "Opened", OPENER, type="question")
    beta.sync()
    calls = _counted(monkeypatch)

    def look_ups(count: int) -> int:
        refs = tuple(f"<r{i}.{count}.x@bus.test>" for i in range(count))
        deliver(
            home / "postoffice" / "beta",
            _signed(registry, home, references=refs, in_reply_to=opened.message_id, thread=opened.thread),
        )
        calls.clear()
        beta.sync()
        return len(calls)

    half, full = look_ups(bounds.REFERENCES // 2), look_ups(bounds.REFERENCES)
    assert half >= bounds.REFERENCES // 2  # each made-up Reference is looked up (and counts nothing)
    assert full <= 2 * half + 8  # linear in the References (a constant few for the letter itself)
    assert full <= 3 * bounds.REFERENCES + 8  # and bounded: at most three look-ups for each
    assert look_ups(10 * bounds.REFERENCES) <= 2  # over the bound: quarantined, none for its References
    assert [x.depth for x in beta.inbox() if x.in_reply_to == opened.message_id] == [1, 1]  # made up: no depth


# --- the same bounds on send: refused, exit 2, the bound named ---------------------------------

QUOTED = "\n".join(["> quoted"] * (bounds.QUOTED_LINES + 1) + ["My answer."])
SENDS: dict[str, Callable[[AgentMail], object]] = {
    "subject": lambda a: a.send("beta", "x" * (bounds.SUBJECT + 1), OPENER),
    "quoted lines": lambda a: a.send("beta", "Quoted", QUOTED),
    "a note's quoted lines": lambda a: a.note("Quoted", QUOTED),
    "lines a reader takes for multipart declarations": lambda a: a.send(
        "beta", "MIME", OPENER + "\nContent-Type: multipart/mixed; boundary=x" * (bounds.MULTIPARTS + 1)
    ),
}


@pytest.mark.parametrize("what", SENDS)
def test_a_letter_over_a_bound_is_refused_on_send_through_the_api(what: str, alpha: AgentMail) -> None:
    with pytest.raises(BadInput, match=r"refused: .* \(bounds\.[A-Z_]+\)"):
        SENDS[what](alpha)
    assert alpha.sent() == []


def test_a_reply_over_a_bound_is_refused(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Opened", OPENER, type="question")
    (letter,) = beta.inbox()
    with pytest.raises(BadInput, match="bounds.QUOTED_LINES"):
        beta.reply(letter, QUOTED)


def test_the_cli_refuses_it_with_exit_2_naming_the_bound(cli: Cli, alpha: AgentMail, tmp_path: Path) -> None:
    body = tmp_path / "quoted.txt"
    body.write_text(QUOTED)
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Quoted", "-b", f"@{body}")
    assert code == 2 and "bounds.QUOTED_LINES" in err and err.count("\n") == 1


def test_mcp_send_refuses_it_naming_the_bound(home: Path, alpha: AgentMail, tmp_path: Path) -> None:
    async def scenario(client: Any) -> None:
        failed, why = await call(client, "send", to="alpha", subject="Quoted", body=QUOTED)
        assert failed and "bounds.QUOTED_LINES" in why

    session(home, tmp_path, "--as", "beta")(scenario)


def test_a_reply_to_a_subject_at_the_bound_still_goes(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "S" * bounds.SUBJECT, OPENER, type="question")
    (letter,) = beta.inbox()
    sent = beta.reply(letter, "Seen; looking.", type="ack")
    assert sent is not None and sent.subject == "Re: " + "S" * bounds.SUBJECT
    (answer,) = alpha.inbox()
    assert answer.subject == sent.subject  # the reader's bound is the sender's


def test_a_letter_copying_more_than_an_address_header_holds_is_refused(registry: Registry, home: Path) -> None:
    from agentmail.config.identity import Identity
    from agentmail.config.registry import Person

    many = tuple(Person(f"follower{i}@people.test", follows=True) for i in range(400))
    platforms = {**registry.platforms, "alpha": registry.platforms["alpha"].replace(people=many)}
    alpha = AgentMail(Registry(registry.root, registry.bus, platforms), Identity("alpha"), home)
    with pytest.raises(BadInput, match=r"the Cc header's length is \d+; .*\(bounds\.ADDRESS_CHARS\)"):
        alpha.send("beta", "Copied", OPENER)


def test_a_relays_long_dkim_signature_is_quarantined_before_it_is_verified(
    registry: Registry, home: Path, alpha: AgentMail, beta: AgentMail
) -> None:
    # a relay adds a DKIM-Signature of its own whose h= holds 60 KB of folded white space: dkimpy
    # splits it in quadratic time (5 s a verification), so every letter it touched held the sync
    pad = b"".join(b"\r\n " + b" " * 70 for _ in range(60_000 // 73))
    added = b"DKIM-Signature: v=1; a=ed25519-sha256; d=relay.test; s=x; bh=AAAA; b=AAAA; h=from" + pad + b"to\r\n"
    deliver(home / "postoffice" / "beta", added + _signed(registry, home, subject="Relayed"))
    deliver(home / "postoffice" / "beta", _signed(registry, home, subject="Fine", body="A fine letter."))
    report = beta.sync()
    assert [x.subject for x in report.accepted] == ["Fine"]
    (held,) = report.quarantined
    assert held.reason == "too-large" and str(held.detail).endswith("(bounds.SIGNATURE_CHARS)")
    beta.recheck_quarantine(held.id)  # judged again: the bound holds there too
    (again,) = beta.quarantined(sync=False)
    assert again.reason == "too-large" and str(again.detail).endswith("(bounds.SIGNATURE_CHARS)")
