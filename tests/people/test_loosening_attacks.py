"""Attacks on "a bus setting that loosens a guard is asked of the approvers" (issue 37), as an
agent steered by a letter would make them with approvers listed: an approval reused for what it
was not shown (a CA file swapped after the answer, a hold rule that lifts more than the approver
read), spellings the settings table might not recognise, a change then its reversal, and two
changes each harmless alone. ``admin.bus.change_setting`` and ``client/consent.Consent.ask``
decide; these drive them through the API and the CLI."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.config import registry as registry_mod
from agentmail.config.registry import Registry
from agentmail.errors import Refused
from agentmail.transport.local import deliver

from ..conftest import Cli
from ..mailservers.certs import create_pki
from .test_approval_by_mail import CAROL, answer, approved, mailbox
from .test_loosening_asked import Base, _files, _set_up
from .test_writing import client_letter, vouched


def _asks(home: Path) -> list[EmailMessage]:
    """The approvers' asks (a Subject the mail library folded read as one line)."""
    return [m for m in mailbox(home, CAROL) if str(m["Subject"]).strip().startswith("Approve? a change: ")]


def _dir(home: Path, name: str) -> Path:
    made = home.parent / name
    made.mkdir()
    return made


def test_a_ca_file_changed_after_its_approval_is_asked_anew(registry: Registry, home: Path, cli: Cli) -> None:
    """The approver approves a CA certificate by its path; the agent then writes another CA into
    that path before running the approved command again: the certificate trusted must be the one
    the approver was asked about, or it is asked anew."""
    root = _set_up(registry, (), approver=True)
    shown = create_pki(_dir(home, "shown"), name="partner").ca_file
    swapped = create_pki(_dir(home, "swapped"), name="evil").ca_file
    path = home.parent / "ca-to-trust.pem"
    path.write_bytes(shown.read_bytes())
    with pytest.raises(Refused, match="waits for an approver"):
        bus.set_setting(root, "ca_file", [str(path)])
    (ask,) = _asks(home)
    answer(home, ask, "approve")
    path.write_bytes(swapped.read_bytes())  # after the answer, before the command runs again
    before = _files(root)
    code, out, err = cli("--as", "alpha", "bus", "set", "ca_file", str(path))
    assert (code, out) == (4, ""), err
    assert _files(root) == before and not (root / "ca.pem").exists()
    assert len(_asks(home)) == 2  # the new certificate is asked about, as itself
    path.write_bytes(shown.read_bytes())  # the one approved still goes through
    assert bus.change_setting(root, "ca_file", [str(path)]).approved_by == CAROL
    assert (root / "ca.pem").read_bytes() == shown.read_bytes()


def test_a_ca_files_announcement_names_the_certificate_it_trusts(registry: Registry, home: Path) -> None:
    """What the approver reads names the certificate by its SHA-256, not only by a path the agent
    can write to."""
    import hashlib

    root = _set_up(registry, (), approver=True)
    ca = create_pki(_dir(home, "pki"), name="partner").ca_file
    with pytest.raises(Refused):
        bus.set_setting(root, "ca_file", [str(ca)])
    (ask,) = _asks(home)
    assert hashlib.sha256(ca.read_bytes()).hexdigest() in str(ask["Subject"]) + ask.get_content()


def test_an_approval_of_a_hold_change_does_not_lift_a_rule_added_after_it_was_asked(
    registry: Registry, home: Path, cli: Cli
) -> None:
    """The approver is shown which rules a new hold list takes off; a rule the operator added while
    the ask waited is not among them: the same command then asks again, naming it."""
    root = _set_up(registry, (("hold", ("beta@bus.test", "gamma@bus.test")),), approver=True)
    with pytest.raises(Refused, match="waits for an approver"):
        bus.set_setting(root, "hold", ["beta@bus.test"])  # lifts gamma: asked
    (ask,) = _asks(home)
    assert "gamma@bus.test" in ask.get_content()
    bus.set_setting(root, "hold", ["beta@bus.test", "gamma@bus.test", "delta.test"])  # holding more: told only
    answer(home, ask, "approve")  # the approver agreed to stop holding gamma alone
    code, out, err = cli("--as", "alpha", "bus", "set", "hold", "beta@bus.test")
    assert (code, out) == (4, ""), err
    assert registry_mod.load(root).bus.hold == ("beta@bus.test", "gamma@bus.test", "delta.test")
    (again,) = _asks(home)[1:]
    assert "delta.test" in again.get_content()


# Values the table reads as the same loosening change however they are written.
SPELLINGS = [
    ("new_threads_per_hour", ["+21"]),
    ("new_threads_per_hour", ["0021"]),
    ("new_threads_per_hour", ["2_1"]),
    ("new_threads_per_hour", [" 0 "]),
    ("max_size", ["1_048_577"]),
    ("attach_max_count", ["+11"]),
    ("hold", [" BETA@BUS.TEST "]),  # beta kept, gamma taken off
    ("hold", ["beta@bus.test", ""]),
    ("attach_types", ["TEXT/HTML", "text/plain"]),
    ("trusted_authserv_ids", ["MAIL.BUS.TEST"]),
    ("sent_folder", ["Sent "]),
    ("stale_after", ["73h"]),
    ("stale_after", [" 4d "]),
]


@pytest.mark.parametrize(("key", "values"), SPELLINGS, ids=[f"{k}={'+'.join(v)}" for k, v in SPELLINGS])
def test_no_spelling_of_a_loosening_value_passes_unasked(
    registry: Registry, home: Path, key: str, values: list[str]
) -> None:
    base = (
        ("new_threads_per_hour", ("20",)),
        ("hold", ("beta@bus.test", "gamma@bus.test")),
        ("sent_folder", ("Sent",)),
        ("stale_after", ("3d",)),
    )
    root = _set_up(registry, base, approver=True)
    before = _files(root)
    try:
        bus.set_setting(root, key, values)
    except Refused as refused:
        assert "waits for an approver" in str(refused), refused
    else:
        pytest.fail(f"bus set {key} {values} loosened a guard unasked")
    assert _files(root) == before and len(_asks(home)) == 1


def test_a_change_then_its_reversal_then_the_change_again_is_asked_again(registry: Registry, home: Path) -> None:
    """An approval is spent once: lowering the cap again (unasked) and raising it a second time
    asks the approvers a second time."""
    root = _set_up(registry, (("new_threads_per_hour", ("20",)),), approver=True)
    with pytest.raises(Refused):
        bus.set_setting(root, "new_threads_per_hour", ["30"])
    (ask,) = _asks(home)
    answer(home, ask, "approve")
    assert bus.change_setting(root, "new_threads_per_hour", ["30"]).approved_by == CAROL
    assert bus.change_setting(root, "new_threads_per_hour", ["20"]).loosens == ""  # tightening: unasked
    with pytest.raises(Refused, match="waits for an approver"):
        bus.set_setting(root, "new_threads_per_hour", ["30"])
    assert registry_mod.load(root).bus.new_threads_per_hour == 20 and len(_asks(home)) == 2


def test_two_hold_changes_that_each_keep_every_address_held_never_lift_one_unasked(
    registry: Registry, home: Path
) -> None:
    """Adding a domain rule, then dropping the address rule it covers, keeps the address held
    (unasked); dropping the domain rule after that is a lift, and asked."""
    root = _set_up(registry, (), approver=True)  # hold: beta@bus.test
    bus.set_setting(root, "hold", ["beta@bus.test", "bus.test"])
    assert bus.change_setting(root, "hold", ["bus.test"]).loosens == ""
    with pytest.raises(Refused, match="waits for an approver"):
        bus.set_setting(root, "hold", ["gamma@bus.test"])
    assert registry_mod.load(root).bus.hold == ("bus.test",)


def test_a_platforms_own_auth_is_the_only_per_platform_setting(registry: Registry, home: Path, cli: Cli) -> None:
    """``--platform`` takes ``auth`` alone: no guard can be loosened per platform, unasked."""
    root = _set_up(registry, (("new_threads_per_hour", ("20",)),), approver=True)
    before = _files(root)
    for key, value in (("new_threads_per_hour", "0"), ("hold", ""), ("trusted_authserv_ids", "evil.test")):
        code, out, err = cli("--as", "alpha", "bus", "set", key, value, "--platform", "alpha")
        assert (code, out) == (2, "") and "only auth" in err, err
    assert _files(root) == before and _asks(home) == []


MALLORY = "mallory@evil.test"


@pytest.mark.parametrize("flag", ["--follows", "--writes"])
def test_an_address_given_copies_or_a_say_in_the_threads_waits_for_an_approver(
    registry: Registry, home: Path, cli: Cli, flag: str
) -> None:
    """A steered agent lists an outside address as a follower (a copy of every letter of its
    platform's threads leaves to it) or a writer (its letters speak for the platform): asked of
    the approvers like an approver added; taking the flag off again is not."""
    root = _set_up(registry, (), approver=True)
    before = _files(root)
    command = ("--as", "alpha", "person", "alpha", MALLORY, flag)
    code, out, err = cli(*command)
    assert (code, out) == (4, "") and "waits for an approver" in err, err
    assert _files(root) == before
    (ask,) = _asks(home)
    assert str(ask["Subject"]).strip() == f"Approve? a change: agentmail person alpha {MALLORY} {flag}"
    assert MALLORY in ask.get_content()
    answer(home, ask, "approve")
    assert cli(*command)[0] == 0
    assert [p.address for p in registry_mod.load(root).named("alpha").people] == [CAROL, MALLORY]
    assert cli(*command)[0] == 0  # the same flags again loosen nothing
    assert cli("--as", "alpha", "person", "alpha", MALLORY)[0] == 0  # the flag taken off: not asked
    assert cli("--as", "alpha", "person", "alpha", MALLORY, "--remove")[0] == 0
    assert len(_asks(home)) == 1


def test_through_the_python_api_adding_an_approver_or_a_follower_waits_for_an_approver(
    registry: Registry, home: Path
) -> None:
    root = _set_up(registry, (), approver=True)
    with pytest.raises(Refused):
        bus.set_person(registry_mod.load(root), "alpha", MALLORY, follows=True, writes=False, approves=True)


def test_a_ca_file_that_is_no_certificate_or_too_big_is_refused_before_anyone_is_asked(
    registry: Registry, home: Path, cli: Cli
) -> None:
    root = _set_up(registry, (), approver=True)
    before = _files(root)
    text, big = home.parent / "notes.pem", home.parent / "big.pem"
    text.write_text("-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n")
    big.write_bytes(b"-" * (bus.CA_BYTES + 1))
    for path, code in ((text, 6), (big, 2), (home.parent, 2)):
        got, out, err = cli("--as", "alpha", "bus", "set", "ca_file", str(path))
        assert (got, out) == (code, "") and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert _files(root) == before and _asks(home) == []


EVE = "eve@people.test"  # approves beta's held letters, nobody else's


def _two_approvers(registry: Registry, home: Path, base: Base) -> Path:
    """``_set_up``'s bus (carol approving alpha's letters) with eve approving beta's: listing a
    second approver is itself asked, and carol approved it; her mail starts afresh."""
    root = _set_up(registry, base, approver=True)
    approved(home, lambda: bus.set_person(registry_mod.load(root), "beta", EVE, follows=False, writes=False,
                                          approves=True))  # fmt: skip
    return root


def _answer_beta(home: Path, announcement: EmailMessage, body: str, sender: str) -> None:
    """An approver answers an announcement beta sent; the bus's MTA delivers it to beta."""
    mid = str(announcement["Message-ID"])
    msg = client_letter("beta@bus.test", body, sender=sender, subject=f"Re: {announcement['Subject']}",
                        in_reply_to=mid, references=mid, message_id=f"<answer.{sender}>")  # fmt: skip
    deliver(home / "postoffice" / "beta", vouched(msg))


def test_a_bus_wide_loosening_asked_through_another_platform_is_decided_by_every_platforms_approvers(
    registry: Registry, home: Path, cli: Cli
) -> None:
    """The hold, the cap and the trusted servers are the whole bus's guards: the agent choosing to
    ask through beta (whose approver is eve) must not let eve alone lift what guards alpha; an
    approver of each platform with approvers must agree, and a rejection of either stops it."""
    root = _two_approvers(registry, home, ())  # carol approves alpha's, eve beta's; hold: beta@bus.test
    before = _files(root)
    command = ("--as", "beta", "bus", "set", "hold", "")
    code, out, err = cli(*command)
    assert (code, out) == (4, "") and "carol@people.test" in err and EVE in err, err
    (ask,) = _asks(home)
    (eves,) = [m for m in mailbox(home, EVE) if str(m["Subject"]).strip().startswith("Approve? a change: ")]
    assert eves["Message-ID"] == ask["Message-ID"]  # one announcement to both
    _answer_beta(home, eves, "approve", EVE)
    code, out, err = cli(*command)
    assert (code, out) == (4, "") and "also waits for an approver of alpha" in err, err
    assert _files(root) == before
    _answer_beta(home, ask, "approve", CAROL)
    code, out, err = cli(*command)
    assert code == 0, err
    assert registry_mod.load(root).bus.hold == ()


def test_a_bus_wide_loosening_rejected_by_one_platforms_approver_never_happens(
    registry: Registry, home: Path, cli: Cli
) -> None:
    root = _two_approvers(registry, home, (("new_threads_per_hour", ("20",)),))
    before = _files(root)
    assert cli("--as", "beta", "bus", "set", "new_threads_per_hour", "0")[0] == 4
    (ask,) = _asks(home)
    _answer_beta(home, ask, "approve", EVE)
    _answer_beta(home, ask, "reject: no", CAROL)
    code, _, err = cli("--as", "beta", "bus", "set", "new_threads_per_hour", "0")
    assert code == 4 and "disagree" in err, err
    assert _files(root) == before


def test_init_force_over_a_bus_with_two_platforms_approvers_needs_both(
    registry: Registry, home: Path, cli: Cli
) -> None:
    """``init --force`` drops every platform's approvers and holds: beta's approver alone, asked
    through beta, does not let it through."""
    root = _two_approvers(registry, home, ())
    before = _files(root)
    command = ("--as", "beta", "init", "alpha", "beta", "--domain", "bus.test", "--force")
    code, _, err = cli(*command)
    assert code == 4 and "carol@people.test" in err and EVE in err, err
    (ask,) = [m for m in mailbox(home, EVE) if str(m["Subject"]).strip().startswith("Approve? a change: ")]
    _answer_beta(home, ask, "approve", EVE)
    code, _, err = cli(*command)
    assert code == 4 and "also waits for an approver of alpha" in err, err
    assert _files(root) == before


def test_a_bus_wide_loosening_names_every_platform_whose_approver_has_not_answered(
    registry: Registry, home: Path, cli: Cli
) -> None:
    root = _two_approvers(registry, home, ())  # carol approves alpha's, eve beta's
    bus.add(home, registry_mod.load(root), "gamma")
    approved(home, lambda: bus.set_person(registry_mod.load(root), "gamma", "gus@people.test", follows=False,
                                          writes=False, approves=True))  # fmt: skip
    command = ("--as", "beta", "bus", "set", "hold", "")
    assert cli(*command)[0] == 4
    (eves,) = [m for m in mailbox(home, EVE) if str(m["Subject"]).strip().startswith("Approve? a change: ")]
    _answer_beta(home, eves, "approve", EVE)
    code, out, err = cli(*command)
    assert (code, out) == (4, "") and "also waits for an approver of alpha, gamma (asked already" in err, err
