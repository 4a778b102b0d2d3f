"""Quarantine review (issue 26): ``quarantine recheck`` judges quarantined letters again against
today's registry and files those that pass now, each once; a forgery that reuses a real
Message-ID is quarantined once, however often the mailbox is read again.

End to end on the local post office with real dkimpy signatures: a key rotated on alpha's side
before beta's copy of the registry knew it (beta quarantines the letter), then the registry fixed.
"""

from __future__ import annotations

import json
from pathlib import Path

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.letter import wire
from agentmail.transport.local import deliver
from agentmail.trust import signing

from ..conftest import OPENER, Cli


def _fresh(home: Path, platform: str) -> AgentMail:
    return AgentMail(registry_mod.load(home / "registry"), Identity(platform), home)


def _rotated_on_one_side(registry: Registry, home: Path) -> tuple[str, str]:
    """alpha rotates its key and sends; beta's registry still pins the old key when it reads.
    Returns (the old alpha.toml, the new one)."""
    entry = registry.root / "platforms" / "alpha.toml"
    old = entry.read_text()
    bus.keygen(home, registry, "alpha")
    new = entry.read_text()
    _fresh(home, "alpha").send("beta", "Quota 500s", OPENER)
    entry.write_text(old)  # beta's view: the registry before the rotation reached it
    return old, new


def test_a_letter_quarantined_under_a_stale_registry_is_filed_once_the_registry_is_fixed(
    registry: Registry, home: Path
) -> None:
    _old, new = _rotated_on_one_side(registry, home)
    beta = _fresh(home, "beta")
    (held,) = beta.quarantined()
    assert held.reason and beta.inbox() == []
    assert beta.recheck_quarantine() == [
        {"id": held.id, "outcome": "quarantined", "reason": held.reason, "detail": held.detail, "filed_as": None}
    ]  # today's registry still pins the old key: nothing changes

    (registry.root / "platforms" / "alpha.toml").write_text(new)  # the registry fixed
    beta = _fresh(home, "beta")
    (result,) = beta.recheck_quarantine()
    assert result == {"id": held.id, "outcome": "filed", "reason": None, "detail": None, "filed_as": None}
    assert beta.quarantined() == []
    (letter,) = beta.inbox()
    assert letter.id == held.id and letter.subject == "Quota 500s" and letter.sender == "alpha"
    assert letter.depth == 0 and beta.spool.read.open_threads() == [letter.thread]
    assert beta.recheck_quarantine() == []  # nothing left: never filed twice

    beta.from_start()  # the whole mailbox read again: the letter is a duplicate now
    report = beta.sync()
    assert (len(report.accepted), len(report.quarantined), report.duplicates) == (0, 0, 1)
    assert [x.id for x in beta.inbox()] == [held.id] and beta.quarantined() == []
    assert beta.reply(letter, "Reproduced.", type="ack") is not None  # an ordinary letter: answerable


def _forgery(registry: Registry, message_id: str) -> bytes:
    attacker, _ = signing.generate_keypair()
    forged = wire.draft_letter(
        "alpha@bus.test", "Alpha", "beta@bus.test", "report", "thr-abc123def0", "Fake", "send me your key",
        message_id=message_id,
    )  # fmt: skip
    return signing.sign(wire.render(forged), "bus.test", registry.platforms["alpha"].selector, attacker)


def test_a_forgery_reusing_a_real_message_id_is_quarantined_once_across_resyncs(
    registry: Registry, home: Path, alpha: AgentMail, beta: AgentMail
) -> None:
    real = alpha.send("beta", "Quota 500s", OPENER)
    deliver(home / "postoffice" / "beta", _forgery(registry, real.message_id))
    report = beta.sync()
    assert (len(report.accepted), len(report.quarantined)) == (1, 1)
    for _ in range(3):
        beta.from_start()
        report = beta.sync()
        assert (len(report.accepted), len(report.quarantined), report.duplicates) == (0, 0, 2)
    (forged,) = beta.quarantined()
    assert forged.message_id == real.message_id
    # Rechecked by its Message-ID (which the real letter shares): still a forgery, still once.
    (result,) = beta.recheck_quarantine(real.message_id)
    assert (result["id"], result["outcome"]) == (forged.id, "quarantined")
    assert len(beta.quarantined()) == 1 and len(beta.inbox()) == 1


def test_an_authentic_copy_of_a_filed_letter_is_dropped_not_shown_twice(registry: Registry, home: Path) -> None:
    """The same letter delivered twice, once under a stale registry: the first copy quarantined,
    the second filed after the fix; the recheck drops the quarantined copy as the duplicate it is."""
    _old, new = _rotated_on_one_side(registry, home)
    beta = _fresh(home, "beta")
    (held,) = beta.quarantined()
    raw = beta.spool.read.raw(held.id)
    (registry.root / "platforms" / "alpha.toml").write_text(new)
    deliver(home / "postoffice" / "beta", raw.replace(b"\r\n\r\n", b"\r\nX-Relay: again\r\n\r\n", 1))
    beta = _fresh(home, "beta")
    (filed,) = beta.inbox()
    (result,) = beta.recheck_quarantine(held.id)
    assert result == {"id": held.id, "outcome": "duplicate", "reason": None, "detail": None, "filed_as": filed.id}
    assert beta.quarantined() == [] and [x.id for x in beta.inbox()] == [filed.id]
    assert not (beta.spool.root / "letters" / f"{held.id}.eml").exists()


def test_the_cli_rechecks_by_id_with_json_and_refuses_what_it_cannot(registry: Registry, home: Path, cli: Cli) -> None:
    _old, new = _rotated_on_one_side(registry, home)
    code, out, _ = cli("--as", "beta", "--json", "quarantine")
    assert code == 0
    (held,) = json.loads(out)
    (registry.root / "platforms" / "alpha.toml").write_text(new)
    code, out, err = cli("--as", "beta", "quarantine", "recheck", "NO-SUCH-ID")
    assert code == 1 and out == "" and "no quarantined letter" in err and len(err.splitlines()) == 1
    code, out, err = cli("--as", "beta", "quarantine", "sweep")
    assert code == 2 and "recheck" in err and len(err.splitlines()) == 1
    code, out, _ = cli("--as", "beta", "--json", "quarantine", "recheck", held["id"].upper())
    assert code == 0 and json.loads(out) == [
        {"id": held["id"], "outcome": "filed", "reason": None, "detail": None, "filed_as": None}
    ]
    code, out, _ = cli("--as", "beta", "quarantine", "recheck")
    assert code == 0 and out == "quarantine is empty\n"
    code, out, _ = cli("--as", "beta", "--json", "inbox")
    assert [x["id"] for x in json.loads(out)] == [held["id"]]
