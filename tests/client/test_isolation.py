"""One letter never stops a mailbox (issue 9 §1): whatever judging or filing one letter raises
stays with that letter, which is quarantined and committed so the checkpoint passes it."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from agentmail.cli import app as cli
from agentmail.client.facade import AgentMail, SyncReport
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.transport.local import deliver
from agentmail.trust import authenticity, signing

from ..conftest import make_signed_letters

# Letters that used to abort every sync of the mailbox with "internal error". Each mutates a
# genuine signed letter; the comment names what dkimpy or the email package raised.
KILLERS: dict[str, Callable[[bytes], bytes]] = {
    # binascii.Error: dkimpy checks bh= against the b= pattern, then base64 decodes junk
    "non-ASCII byte in the DKIM bh= tag": lambda raw: re.sub(rb"bh=.", b"bh=\xe9", raw, count=1),
    # IndexError: dkimpy indexes i=[-len(d)-1] when i= equals d=
    "DKIM i= equal to d=": lambda raw: raw.replace(b"i=@bus.test", b"i=bus.test", 1),
    # ValueError from PyNaCl: a b= that decodes to fewer than 64 bytes
    "short DKIM b= signature": lambda raw: re.sub(rb" b=([A-Za-z0-9+/]{8})", rb" b=\1;", raw, count=1),
    # dkim.MessageFormatError from the constructor, outside any handler
    "control byte in a header name": lambda raw: raw.replace(b"\r\nSubject:", b"\r\nX-\x01Bad: 1\r\nSubject:", 1),
    "8-bit byte in a header name": lambda raw: raw.replace(b"\r\nSubject:", b"\r\nX-\xffBad: 1\r\nSubject:", 1),
    "a header line without a colon": lambda raw: raw.replace(b"\r\nSubject:", b"\r\nnot a header\r\nSubject:", 1),
    # IndexError in dkimpy: a continuation line with nothing to continue
    "a continuation line first": lambda raw: b" folded\r\n" + raw,
}


def conserved(report: SyncReport) -> bool:
    data = report.to_json()
    return bool(
        data["fetched"] == sum(data[k] for k in ("accepted", "quarantined", "duplicates", "bounces", "skipped"))
    )


@pytest.mark.parametrize("name", KILLERS)
def test_a_killer_letter_is_quarantined_and_the_mailbox_goes_on(
    name: str, alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    (first, killer_source, last) = make_signed_letters(alpha, "beta", 3, "killer")
    killer = KILLERS[name](killer_source[1])
    assert killer != killer_source[1]
    for raw in (first[1], killer, last[1]):
        deliver(home / "postoffice" / "beta", raw)
    report = beta.sync()
    assert [x.message_id for x in report.accepted] == [first[0], last[0]]
    (bad,) = report.quarantined
    assert bad.reason in ("malformed", "unauthenticated")
    assert report.internal_errors == 0, bad.detail  # the root cause is fixed: an ordinary verdict
    assert conserved(report) and report.fetched == 3
    again = beta.sync()
    assert again.fetched == 0 and [x.message_id for x in beta.inbox()] == [first[0], last[0]]


# Where an unknown bug may hide, and how to make one appear there: a library (or our own code
# in that stage) raising a class nobody expects. The boundary must hold for each.
STAGES = {
    "parsing": ("agentmail.letter.wire.body_text", "parsing"),
    "dkim": ("dkim.DKIM.verify_sig", "DKIM verification"),  # dkimpy: every letter not of agentmail's own shape
    "lean dkim": ("agentmail.trust.dkim_lean.body_hash", "DKIM verification"),  # agentmail's own letters
    "authentication-results": ("agentmail.trust.auth_results._header_prop", "Authentication-Results"),
    # a plain block is read by agentmail.letter.matter itself (python-frontmatter only for the rest)
    "front matter": ("agentmail.letter.matter._plain_fields", "front matter"),
}


def _resolve(target: str) -> Callable[..., object]:
    owner_name, _, attr = target.rpartition(".")
    try:
        owner: object = importlib.import_module(owner_name)
    except ModuleNotFoundError:  # a class: dkim.DKIM
        module_name, _, class_name = owner_name.rpartition(".")
        owner = getattr(importlib.import_module(module_name), class_name)
    found: Callable[..., object] = getattr(owner, attr)
    return found


@pytest.mark.parametrize("stage", STAGES)
def test_an_unexpected_exception_in_any_stage_stays_with_its_letter(
    stage: str, alpha: AgentMail, beta: AgentMail, home: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, label = STAGES[stage]
    letters = make_signed_letters(alpha, "beta", 3, "stage")
    beta = AgentMail(registry.replace(bus=registry.bus.replace(trusted_authserv_ids=("mx.bus.test",))), beta.me, home)
    for _mid, raw in letters:
        results = b"Authentication-Results: mx.bus.test; dkim=pass header.d=bus.test header.s=x\r\n"
        deliver(home / "postoffice" / "beta", results + raw)
    bad_message_id = letters[1][0]
    judging: list[bytes] = []
    real_judge = authenticity.judge_unguarded

    def judge(raw: bytes, registry: Registry) -> authenticity.Verdict:
        judging[:] = [raw]
        return real_judge(raw, registry)

    original = _resolve(target)

    def only_for_the_middle_letter(*args: object, **kwargs: object) -> object:
        if bad_message_id.encode() in judging[0]:
            raise LookupError("a class no stage expects")
        return original(*args, **kwargs)

    monkeypatch.setattr(authenticity, "judge_unguarded", judge)
    monkeypatch.setattr(target, only_for_the_middle_letter)
    if stage == "dkim":  # dkimpy judges what the lean pass leaves to it: here, every letter
        monkeypatch.setattr("agentmail.trust.dkim_lean.pinned_pass", lambda *args, **kwargs: None)
    report = beta.sync()
    assert [x.message_id for x in report.accepted] == [letters[0][0], letters[2][0]]
    (bad,) = report.quarantined
    assert bad.reason == "malformed" and bad.message_id == bad_message_id
    assert bad.detail is not None and label in bad.detail and "LookupError" in bad.detail
    assert "Traceback" not in bad.detail and "\n" not in bad.detail
    assert report.internal_errors == 1 and conserved(report)
    assert beta.sync().fetched == 0  # committed: the checkpoint passed it
    monkeypatch.undo()
    assert beta.sync().fetched == 0 and len(beta.quarantined(sync=False)) == 1


def test_an_exception_while_filing_quarantines_the_letter(
    alpha: AgentMail, beta: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    letters = make_signed_letters(alpha, "beta", 3, "filing")
    for _mid, raw in letters:
        deliver(home / "postoffice" / "beta", raw)
    real_store = beta.spool.write.store

    def store(state: str, letter: object, raw: bytes, **kwargs: object) -> object:
        if state == "unread" and letters[1][0].encode() in raw:
            raise KeyError("broken index")
        return real_store(state, letter, raw, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(beta.spool.write, "store", store)
    report = beta.sync()
    assert len(report.accepted) == 2 and report.internal_errors == 1 and conserved(report)
    (bad,) = beta.quarantined(sync=False)
    assert "filing" in (bad.detail or "") and "KeyError" in (bad.detail or "")
    assert beta.spool.read.raw(bad.id) == letters[1][1]  # kept byte for byte for whoever fixes the bug


def test_an_os_error_is_the_machine_not_the_letter_and_nothing_moves(
    alpha: AgentMail, beta: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    letters = make_signed_letters(alpha, "beta", 2, "disk")
    for _mid, raw in letters:
        deliver(home / "postoffice" / "beta", raw)
    real_store = beta.spool.write.store

    def full_disk(*args: object, **kwargs: object) -> object:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(beta.spool.write, "store", full_disk)
    with pytest.raises(OSError):
        beta.sync()
    assert beta.spool.read.checkpoint("local") is None and beta.spool.read.ids("quarantine") == []
    monkeypatch.setattr(beta.spool.write, "store", real_store)
    assert len(beta.sync().accepted) == 2  # the disk has room again: nothing was lost


def test_sync_json_accounts_for_every_fetched_letter(
    alpha: AgentMail, beta: AgentMail, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, dup_source, killer_source = make_signed_letters(alpha, "beta", 3, "json")
    box = home / "postoffice" / "beta"
    for raw in (
        good[1],
        dup_source[1],
        dup_source[1],
        KILLERS["8-bit byte in a header name"](killer_source[1]),
        b"not a letter at all\r\n",
    ):
        deliver(box, raw)
    dsn = (Path(__file__).parents[1] / "data" / "bounce-template.eml").read_bytes()
    deliver(box, dsn.replace(b"{MESSAGE_ID}", b"<01unknown.beta@bus.test>"))
    assert cli.main(["--as", "beta", "sync", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fetched"] == 6 and data["internal_errors"] == 0
    assert (data["accepted"], data["duplicates"], data["quarantined"]) == (2, 1, 3)
    assert data["fetched"] == sum(data[k] for k in ("accepted", "quarantined", "duplicates", "bounces", "skipped"))
    assert cli.main(["--as", "beta", "sync", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fetched"] == 0


def test_a_sibling_note_and_a_bounce_are_counted_too(registry: Registry, home: Path) -> None:
    reader = AgentMail(registry, Identity("alpha", "tester"), home)
    sent = reader.send("beta", "Quota", "see the log\n")
    AgentMail(registry, Identity("alpha", "builder"), home).note("for the planner", "yours\n", to_agent="planner")
    dsn = (Path(__file__).parents[1] / "data" / "bounce-template.eml").read_bytes()
    deliver(home / "postoffice" / "alpha", dsn.replace(b"{MESSAGE_ID}", sent.message_id.encode()))
    report = reader.sync()
    # on the local post office a report is anyone's: quarantined, counted there
    assert (report.skipped, report.bounces, len(report.quarantined), report.fetched) == (1, 0, 1, 2)
    assert conserved(report)


def test_the_boundary_holds_on_the_imap_transport(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ..mailservers import MailServers
    from ..transport.test_transport_smtpimap import USERS, make_bus

    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as servers:
        reg = make_bus(home, servers)
        with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
            letters = make_signed_letters(alpha, "beta", 3, "imap")
            killer = KILLERS["control byte in a header name"](letters[2][1])
            for _mid, raw in [*letters[:2], (letters[2][0], killer)]:
                servers.store.deliver("beta@bus.test", raw)
            real_judge = authenticity.judge_unguarded

            def judge(raw: bytes, registry: Registry) -> authenticity.Verdict:
                if letters[1][0].encode() in raw:
                    raise RecursionError("an unknown bug")
                return real_judge(raw, registry)

            monkeypatch.setattr(authenticity, "judge_unguarded", judge)
            report = beta.sync()
            assert [x.message_id for x in report.accepted] == [letters[0][0]]
            assert [q.reason for q in report.quarantined] == ["malformed", "malformed"]
            assert report.quarantined[0].message_id == letters[1][0]
            assert report.internal_errors == 1 and conserved(report)
            assert "(RecursionError)" in (report.quarantined[0].detail or "")
            monkeypatch.undo()
            assert beta.sync().fetched == 0


def test_judge_itself_never_raises_and_names_the_stage_and_the_letter(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``judge`` (rebuild, the API) keeps its own catch-all: what the sync's boundary would say."""
    ((message_id, raw),) = make_signed_letters(alpha, "beta", 1, "judge")

    def broken(*args: object, **kwargs: object) -> object:
        raise LookupError("a class no stage expects")

    monkeypatch.setattr(signing, "verify", broken)
    verdict = authenticity.judge(raw, alpha.registry)
    assert verdict.route == "quarantine" and verdict.reason == "malformed"
    assert verdict.detail == (
        "agentmail failed on this letter in judging (LookupError); it is kept here for a bug report"
    )
    assert verdict.summary is not None and verdict.summary["message_id"] == message_id
