"""Addressed here (issue 37): a letter is accepted only by a platform its signed recipients name.

Anyone who ever held a letter's bytes (its addressee, a co-recipient, a follower, a relay) can
hand them to any mailbox, as an MTA does for any RCPT TO. The signature still verifies, so
``route`` compares the mailbox with the recipients the signature vouches for: another
platform's letter is quarantined ``misaddressed``, on every path (sync by the API and the CLI,
both transports, ``rebuild``, ``quarantine recheck``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import Login, read_private_key, write_login
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.letter import wire
from agentmail.model import new_thread_id
from agentmail.stages.route import Facts, route
from agentmail.transport.local import deliver
from agentmail.trust import signing
from agentmail.trust.authenticity import judge

from ..conftest import OPENER, Cli
from ..depth import examples
from ..mailservers import MailServers
from ..people.test_writing import CAROL, MTA_HEADERS, client_letter, trusting, vouched

NAMES = ("alpha", "beta", "gamma")
WITH_CC = [*MTA_HEADERS, b"cc"]  # a person's domain that signs the Cc too


@pytest.fixture
def three(home: Path) -> Registry:
    bus.init(home, home / "registry", list(NAMES), domain="bus.test", endpoints={"new_threads_per_hour": 0})
    return registry_mod.load(home / "registry")


def box(reg: Registry, home: Path, name: str, agent: str | None = None) -> AgentMail:
    return AgentMail(reg, Identity(name, agent), home)


def beta_to_alpha(reg: Registry, home: Path) -> tuple[str, bytes]:
    """beta opens a thread with alpha: (the letter's Message-ID, its signed bytes)."""
    beta = box(reg, home, "beta")
    sent = beta.send("alpha", "Quota 500s", OPENER)
    return sent.message_id, beta.raw(sent.id)


def signed_to(
    reg: Registry, home: Path, sender: str, to: str, cc: str = "", thread: str = "", message_id: str = ""
) -> bytes:
    """A letter ``sender`` signs with its pinned key, To and Cc as given (the signature covers them)."""
    me = reg.get(sender)
    thread = thread or new_thread_id()
    letter = wire.draft_letter(me.address, "", "x@bus.test", "report", thread, "Quota", "Body.\n",
                               message_id=message_id or wire.new_message_id(sender, "bus.test"))  # fmt: skip
    raw = wire.render(letter).replace(f"To: x+{thread}@bus.test".encode(), f"To: {to}".encode())
    if cc:
        raw = raw.replace(b"\r\nSubject:", f"\r\nCc: {cc}\r\nSubject:".encode(), 1)
    return signing.sign(raw, me.dkim_domain, me.selector, read_private_key(home, sender))


# --- the rule, pure ----------------------------------------------------------------------------


@settings(max_examples=examples(60), deadline=None)
@given(
    to=st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True),
    cc=st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
    here=st.sampled_from(NAMES),
    tagged=st.booleans(),
)
def test_a_letter_files_only_where_its_signed_to_or_cc_names_the_mailbox(
    signed_three: tuple[Registry, Path], to: list[str], cc: list[str], here: str, tagged: bool
) -> None:
    reg, home = signed_three
    thread = new_thread_id()
    tag = f"+{thread}" if tagged else ""
    raw = signed_to(reg, home, "beta", ", ".join(f"{n}{tag}@bus.test" for n in to),
                    ", ".join(f"{n}@bus.test" for n in cc), thread)  # fmt: skip
    verdict = judge(raw, reg)
    assert verdict.route == "accept", verdict.detail
    filing = route(verdict, Facts(me_address=f"{here}@bus.test"))
    if here in to or here in cc:
        assert filing.action == "file"
    else:
        assert filing.action == "quarantine" and filing.verdict is not None
        assert filing.verdict.reason == "misaddressed" and filing.verdict.letter == verdict.letter
        assert f"not {here}@bus.test" in (filing.verdict.detail or "")


@pytest.fixture(scope="module")
def signed_three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Registry, Path]]:
    """A bus made once for the property (its keys are what is slow to make)."""
    home = tmp_path_factory.mktemp("addressed") / "home"
    home.mkdir()
    reg = bus.init(home, home / "registry", list(NAMES), domain="bus.test")
    yield reg, home


def test_a_letter_judged_for_no_mailbox_is_not_held_to_one() -> None:
    from ..stages.test_route import ACCEPT

    assert route(ACCEPT, Facts()).action == "file"  # a table of rules: no mailbox judges
    assert route(ACCEPT, Facts(me_address="alpha@bus.test")).verdict.reason == "misaddressed"  # type: ignore[union-attr]
    named = ACCEPT.replace(addressed=("alpha@bus.test",))
    assert route(named, Facts(me_address="alpha@bus.test")).action == "file"


# --- the attack, on every path -----------------------------------------------------------------


def test_a_letter_to_alpha_delivered_to_gamma_is_quarantined_misaddressed(three: Registry, home: Path) -> None:
    message_id, raw = beta_to_alpha(three, home)
    alpha, gamma = box(three, home, "alpha"), box(three, home, "gamma")
    deliver(home / "postoffice" / "gamma", raw)  # what any MTA does for an RCPT TO
    assert gamma.inbox() == []
    (q,) = gamma.quarantined(sync=False)
    assert (q.reason, q.message_id, q.sender) == ("misaddressed", message_id, "beta")
    assert "not gamma@bus.test" in (q.detail or "") and "alpha@bus.test" in (q.detail or "")
    assert gamma.status(sync=False) == []
    (got,) = alpha.inbox()  # the addressee still has it
    assert got.message_id == message_id

    # quarantine recheck judges it again: still not gamma's
    (result,) = gamma.recheck_quarantine()
    assert (result["outcome"], result["reason"]) == ("quarantined", "misaddressed")
    assert gamma.inbox() == []

    # rebuild judges every file again: it stays in quarantine
    gamma.close()
    gamma.spool.db.close()
    for name in ("spool.db", "spool.db-wal", "spool.db-shm"):  # lost
        (gamma.spool.root / name).unlink(missing_ok=True)
    gamma = box(three, home, "gamma")
    counts = gamma.rebuild()
    assert counts["quarantine"] == 1 and counts["unread"] == 0
    assert [q.reason for q in gamma.quarantined(sync=False)] == ["misaddressed"]
    assert gamma.inbox() == []


def test_the_cli_sync_quarantines_a_reaimed_letter_and_lists_the_reason(three: Registry, home: Path, cli: Cli) -> None:
    _, raw = beta_to_alpha(three, home)
    deliver(home / "postoffice" / "gamma", raw)
    code, out, err = cli("--as", "gamma", "--json", "sync")
    assert code == 0, err
    assert json.loads(out)["quarantined"] == 1 and json.loads(out)["accepted"] == 0
    code, out, _ = cli("--as", "gamma", "--json", "quarantine")
    assert code == 0 and [q["reason"] for q in json.loads(out)] == ["misaddressed"]
    code, out, _ = cli("--as", "gamma", "--json", "inbox", "--no-sync")
    assert code == 0 and json.loads(out) == []


def test_a_fan_out_is_accepted_by_each_platform_it_names_and_by_no_other(three: Registry, home: Path) -> None:
    bus.init(home, home / "registry", [*NAMES, "delta"], domain="bus.test", endpoints={"new_threads_per_hour": 0},
             force=True)  # fmt: skip
    reg = registry_mod.load(home / "registry")
    alpha = box(reg, home, "alpha")
    sent = alpha.send("beta,gamma", "Quota 500s", OPENER)
    for name in ("beta", "gamma"):
        (got,) = box(reg, home, name).inbox()
        assert got.message_id == sent.message_id
    deliver(home / "postoffice" / "delta", alpha.raw(sent.id))
    delta = box(reg, home, "delta")
    assert delta.inbox() == [] and [q.reason for q in delta.quarantined(sync=False)] == ["misaddressed"]


def test_a_note_reaches_the_sibling_it_is_for_and_a_copy_elsewhere_is_misaddressed(three: Registry, home: Path) -> None:
    alpha = box(three, home, "alpha", "fixer")
    tester = box(three, home, "alpha", "tester")
    tester.inbox()  # the tester's mailbox reads from here on
    note = alpha.note("Handover", "The quota fix is yours.", to_agent="tester")
    (got,) = tester.inbox()
    assert got.message_id == note.message_id and got.type == "note"
    deliver(home / "postoffice" / "beta", tester.raw(got.id))
    beta = box(three, home, "beta")
    assert beta.inbox() == [] and [q.reason for q in beta.quarantined(sync=False)] == ["misaddressed"]


def test_a_persons_letter_is_accepted_where_its_signed_to_or_cc_names_and_nowhere_else(
    three: Registry, home: Path
) -> None:
    bus.set_person(three, "beta", CAROL, follows=False, writes=True)
    reg = trusting(registry_mod.load(three.root))
    alpha, gamma = box(reg, home, "alpha"), box(reg, home, "gamma")
    raw = vouched(client_letter("alpha@bus.test", "Is the quota back?", cc="gamma@bus.test"), headers=WITH_CC)
    for name in ("alpha", "gamma"):
        deliver(home / "postoffice" / name, raw)
    assert [x.extra["person"] for x in alpha.inbox()] == [CAROL]
    assert [x.extra["person"] for x in gamma.inbox()] == [CAROL]  # the Cc the signature covers

    # The same letter without a signed Cc: gamma is named nowhere the signature vouches for.
    other = client_letter("alpha@bus.test", "Again?", cc="gamma@bus.test", message_id="<2.carol@people.test>")
    deliver(home / "postoffice" / "gamma", vouched(other))
    assert [q.reason for q in gamma.quarantined()] == ["misaddressed"]
    # A person's letter re-aimed from alpha to gamma (To: alpha only) is not gamma's either.
    lone = vouched(client_letter("alpha@bus.test", "Third", message_id="<3.carol@people.test>"))
    deliver(home / "postoffice" / "gamma", lone)
    assert [q.reason for q in gamma.quarantined()] == ["misaddressed", "misaddressed"]


# --- smtp+imap: the letter handed to the server for another mailbox ----------------------------

USERS = {f"{n}@bus.test": f"pw-{n}-4b1d" for n in NAMES}


@pytest.fixture
def mail3() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def smtp_imap_three(home: Path, mail3: MailServers) -> Registry:
    """alpha, beta and gamma on the in-process SMTP and IMAP servers, each with its login."""
    endpoints = bus.endpoints(f"127.0.0.1:{mail3.smtp_port}", f"127.0.0.1:{mail3.imap_port}",
                              ("starttls", "implicit"), str(mail3.ca_file), ("mail.bus.test",))  # fmt: skip
    endpoints["new_threads_per_hour"] = 0
    reg = bus.init(home, home / "registry", list(NAMES), domain="bus.test", transport="smtp+imap",
                   endpoints=endpoints, force=True)  # fmt: skip
    for name in NAMES:
        write_login(home, name, Login(f"{name}@bus.test", USERS[f"{name}@bus.test"]))
    return reg


def test_over_smtp_imap_a_letter_delivered_to_another_account_is_misaddressed(home: Path, mail3: MailServers) -> None:
    reg = smtp_imap_three(home, mail3)
    with box(reg, home, "beta") as beta, box(reg, home, "alpha") as alpha, box(reg, home, "gamma") as gamma:
        sent = beta.send("alpha", "Quota 500s", OPENER)
        (accepted,) = mail3.store.accepted
        mail3.store.deliver("gamma@bus.test", accepted.data)  # re-aimed at gamma by whoever held it
        assert gamma.inbox() == []
        (q,) = gamma.quarantined(sync=False)
        assert (q.reason, q.message_id) == ("misaddressed", sent.message_id)
        (got,) = alpha.inbox()
        assert got.message_id == sent.message_id


def test_every_reason_code_agentmail_quarantines_with_is_in_the_documented_list() -> None:
    """model.QUARANTINE_REASONS is the contract (``--json`` ``reason``): each code the code can
    write is listed, and each listed code is written somewhere (misaddressed, not-a-party included)."""
    import re

    import agentmail
    from agentmail.model import QUARANTINE_REASONS

    written: set[str] = set()
    pattern = re.compile(r'(?:_quarantine|Malformed)\(\s*"([a-z-]+)"|reason="([a-z-]+)"')
    for path in Path(agentmail.__file__).parent.rglob("*.py"):
        for found in pattern.finditer(path.read_text()):
            written.add(found.group(1) or found.group(2))
    assert written == set(QUARANTINE_REASONS)


def test_a_copy_of_the_platforms_own_letter_delivered_back_stays_out_also_after_rebuild(
    three: Registry, home: Path
) -> None:
    alpha = box(three, home, "alpha")
    sent = alpha.send("beta", "Quota 500s", OPENER)
    copy = b"Delivered-To: alpha@bus.test\r\n" + alpha.raw(sent.id)  # as a server hands it over
    deliver(home / "postoffice" / "alpha", copy)
    assert alpha.inbox() == []
    assert [(q.reason, q.message_id) for q in alpha.quarantined(sync=False)] == [("misaddressed", sent.message_id)]
    alpha.close()
    alpha.spool.db.close()
    for name in ("spool.db", "spool.db-wal", "spool.db-shm"):
        (alpha.spool.root / name).unlink(missing_ok=True)
    alpha = box(three, home, "alpha")
    counts = alpha.rebuild()
    assert (counts["sent"], counts["quarantine"]) == (1, 1)
    assert [x.id for x in alpha.sent()] == [sent.id]
    assert [q.reason for q in alpha.quarantined(sync=False)] == ["misaddressed"]
