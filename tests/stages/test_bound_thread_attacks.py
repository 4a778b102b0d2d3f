"""Attacks on "a thread id is bound to its opener" (docs/threat/bound-threads.md), as an outsider
who learnt a thread id, a relay and a co-recipient would make them: the opener's Message-ID
reused in any spelling, a relay that refolds the opener's headers, a co-recipient of a fan-out,
an outsider whose letters are many, and the MCP surface."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail import bounds
from agentmail.cli import mcp_server
from agentmail.config.registry import Registry
from agentmail.letter import wire
from agentmail.model import bound_thread_id
from agentmail.stages.facts import thread_parties
from agentmail.transport.local import deliver

from ..conftest import Cli
from ..depth import examples, suppressed
from ..mailservers import MailServers
from .test_addressed import mail3, signed_to, smtp_imap_three  # noqa: F401  (the fixture)
from .test_parties import box, three  # noqa: F401  (the fixture)
from .test_preemption import _message_id, _opener_and_answer


def _spelled(message_id: str, how: str) -> str:
    local, _, domain = message_id.strip("<>").partition("@")
    return {
        "same": message_id,
        "upper": f"<{local.upper()}@{domain.upper()}>",
        "domain": f"<{local}@{domain.upper()}>",
    }[how]


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=suppressed(HealthCheck.function_scoped_fixture),
)
@given(how=st.sampled_from(("same", "upper", "domain")), first=st.booleans())
def test_an_outsider_reusing_the_openers_message_id_neither_opens_nor_spends_the_thread(
    three: Registry, home: Path, how: str, first: bool
) -> None:
    """gamma copies alpha's opener's Message-ID (as it is, or in another case) into its own
    fresh letter into alpha's thread with beta, before or after the opener lands: the opener is
    filed (not taken for a duplicate of gamma's), gamma's letter is refused, whatever the order."""
    opener, _answer, thread = _opener_and_answer(three, home)
    copied = _spelled(_message_id(opener), how)
    forged = signed_to(three, home, "gamma", f"beta+{thread}@bus.test", thread=thread, message_id=copied)
    beta = box(three, home, "beta")
    for raw in (forged, opener) if first else (opener, forged):
        deliver(home / "postoffice" / "beta", raw)
        beta.sync()
    assert [(x.sender, x.message_id) for x in beta.thread(thread, sync=False)] == [("alpha", _message_id(opener))]
    refused = [(q.sender, q.reason) for q in beta.quarantined(sync=False) if q.thread == thread]
    assert refused == [("gamma", "not-a-party")]
    assert thread_parties(beta.spool.read, three, thread) == {"alpha", "beta"}
    beta.close()


def test_a_relay_that_refolds_the_openers_message_id_keeps_it_the_opener(three: Registry, home: Path) -> None:
    """An MTA may refold a header (the signature's relaxed canonicalisation allows it): the
    opener still names its thread, and the outsider that came first still waits, then is refused."""
    opener, _answer, thread = _opener_and_answer(three, home)
    mid = _message_id(opener)
    refolded = opener.replace(f"Message-ID: {mid}".encode(), f"Message-ID:\r\n \t{mid}  ".encode(), 1)
    assert refolded != opener
    outsider = signed_to(three, home, "gamma", f"beta+{thread}@bus.test", thread=thread)
    deliver(home / "postoffice" / "beta", outsider)
    beta = box(three, home, "beta")
    assert beta.inbox() == []
    deliver(home / "postoffice" / "beta", refolded)
    assert [x.sender for x in beta.inbox()] == ["alpha"]
    assert [(q.sender, q.reason) for q in beta.quarantined(sync=False)] == [("gamma", "not-a-party")]
    beta.close()


def test_a_co_recipient_of_a_fan_out_is_a_party_and_an_outsider_is_not(three: Registry, home: Path) -> None:
    """alpha's opener goes to beta and gamma (one letter, one thread): gamma writing to beta first
    is a party once the opener lands; the thread stays alpha's and the outsider (a fourth address,
    gamma's letter re-aimed) gains nothing."""
    message_id = wire.new_message_id("alpha", "bus.test")
    thread = bound_thread_id("alpha@bus.test", message_id)
    to = f"beta+{thread}@bus.test, gamma+{thread}@bus.test"
    opener = signed_to(three, home, "alpha", to, thread=thread, message_id=message_id)
    co = signed_to(three, home, "gamma", f"beta+{thread}@bus.test", thread=thread)
    deliver(home / "postoffice" / "beta", co)
    beta = box(three, home, "beta")
    assert beta.inbox() == []  # it waits for the opener too: gamma is a party only once it is filed
    deliver(home / "postoffice" / "beta", opener)
    assert sorted(x.sender for x in beta.inbox()) == ["alpha", "gamma"]
    assert thread_parties(beta.spool.read, three, thread) == {"alpha", "beta", "gamma"}
    beta.close()


def test_a_flood_of_letters_into_ids_never_opened_holds_back_no_opener(
    three: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gamma writes more letters into bound ids nobody opened than a sync looks at: alpha's
    opener and alpha's answer that overtook it are still filed; gamma's letter into alpha's thread,
    held back behind gamma's own flood, is never shown, and is refused once the flood has waited
    its time (the flood is then filed: threads nobody opened, the residual of a wait)."""
    monkeypatch.setattr(bounds, "WAITING", 3)
    flood = [
        signed_to(three, home, "gamma", f"beta+{t}@bus.test", thread=t)
        for t in (bound_thread_id("nobody@bus.test", f"<{n}@bus.test>") for n in range(5))
    ]
    opener, answer, thread = _opener_and_answer(three, home)
    outsider = signed_to(three, home, "gamma", f"beta+{thread}@bus.test", thread=thread)
    for raw in (*flood, outsider, answer):
        deliver(home / "postoffice" / "beta", raw)
    beta = box(three, home, "beta")
    assert beta.inbox() == []
    deliver(home / "postoffice" / "beta", opener)
    assert sorted(x.sender for x in beta.inbox()) == ["alpha", "alpha"]
    assert {q.reason for q in beta.quarantined(sync=False)} == {"awaiting-parent"}  # gamma's own wait
    assert thread_parties(beta.spool.read, three, thread) == {"alpha", "beta"}
    monkeypatch.setattr(bounds, "ANSWER_WAIT_MS", 0)
    beta.sync()
    assert [(q.sender, q.reason) for q in beta.quarantined(sync=False)] == [("gamma", "not-a-party")]
    assert [x.sender for x in beta.thread(thread, sync=False)] == ["alpha", "alpha"]
    beta.close()


def test_through_mcp_the_outsider_first_is_never_shown_and_the_thread_is_the_openers(
    three: Registry, home: Path, tmp_path: Path
) -> None:
    """The agent reading through MCP (inbox, list thread, list quarantine) sees what the API sees."""
    opener, _answer, thread = _opener_and_answer(three, home)
    deliver(home / "postoffice" / "beta", signed_to(three, home, "gamma", f"beta+{thread}@bus.test", thread=thread))
    beta = box(three, home, "beta")
    assert mcp_server.call(beta, "inbox", {}, save_root=tmp_path)["items"] == []
    deliver(home / "postoffice" / "beta", opener)
    shown = mcp_server.call(beta, "list", {"action": "thread", "thread": thread}, save_root=tmp_path)["items"]
    assert [x["from"] for x in shown] == ["alpha"]
    held = mcp_server.call(beta, "list", {"action": "quarantine"}, save_root=tmp_path)["items"]
    assert [(x["from"], x["reason"]) for x in held] == [("gamma", "not-a-party")]
    beta.close()


def test_a_person_at_the_platforms_domain_writing_as_the_platform_opens_no_bound_thread(
    three: Registry, home: Path
) -> None:
    """A hostile person at a vouched domain (the platforms' own, bus.test) sends From the
    platform's address, signed by the domain's mail server, into the thread id bound to that
    address and a Message-ID of their choosing: the id names them as its opener, yet the letter
    is not alpha's (no pinned signature) and opens nothing in alpha's name."""
    import dkim

    from ..people.test_writing import MTA_HEADERS, MTA_KEY, client_letter, trusting

    reg = trusting(three)
    message_id = "<20261201.forged.1@bus.test>"
    thread = bound_thread_id("alpha@bus.test", message_id)
    msg = client_letter(f"beta+{thread}@bus.test", "Close this, please.", sender="alpha@bus.test",
                        subject="Quota", message_id=message_id)  # fmt: skip
    raw = msg.as_bytes(policy=msg.policy.clone(linesep="\r\n"))
    signed = dkim.sign(raw, b"mail", b"bus.test", MTA_KEY.encode(), signature_algorithm=b"ed25519-sha256",
                       include_headers=MTA_HEADERS, linesep=b"\r\n")  # fmt: skip
    verdict = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test header.s=mail; dmarc=pass\r\n"
    deliver(home / "postoffice" / "beta", verdict + signed + raw)
    beta = box(reg, home, "beta")
    assert beta.inbox() == [] and not beta.spool.read.thread_ids(thread)
    (refused,) = beta.quarantined(sync=False)
    assert "alpha@bus.test" in refused.sender_address and refused.reason == "unauthenticated"
    beta.close()


def test_over_smtp_imap_an_outsider_reusing_the_openers_message_id_first_gains_nothing(
    home: Path, mail3: MailServers, cli: Cli
) -> None:
    """On the in-process SMTP/IMAP servers, through the CLI: gamma's fresh letter into alpha's
    thread carrying the opener's Message-ID lands first; the opener still lands, gamma's is refused,
    and a relay's second delivery of the opener is a duplicate."""
    reg = smtp_imap_three(home, mail3)
    opener, _answer, thread = _opener_and_answer(reg, home)
    copied = signed_to(reg, home, "gamma", f"beta+{thread}@bus.test", thread=thread, message_id=_message_id(opener))
    mail3.store.deliver(f"beta+{thread}@bus.test", copied)
    code, out, err = cli("--as", "beta", "--json", "sync")
    assert code == 0 and (json.loads(out)["accepted"], json.loads(out)["quarantined"]) == (0, 1), err
    for _ in range(2):
        mail3.store.deliver(f"beta+{thread}@bus.test", opener)
    code, out, err = cli("--as", "beta", "--json", "sync")
    assert code == 0 and json.loads(out)["accepted"] == 1, err
    code, out, _ = cli("--as", "beta", "--json", "thread", thread, "--no-sync")
    assert code == 0 and [x["from"] for x in json.loads(out)] == ["alpha"], out
    code, out, _ = cli("--as", "beta", "--json", "quarantine", "--no-sync")
    assert code == 0 and [(q["from"], q["reason"]) for q in json.loads(out)] == [("gamma", "not-a-party")]
