"""Issue 37/39, "a control that guards against the agent needs something the agent lacks", for
every row of the settings table: with approvers listed, a ``bus set`` that loosens a guard waits
for an approver's verified answer whoever calls (the Python API, an agent steered by a letter,
the CLI), and goes ahead once approved; one that does not loosen takes effect unasked; with
nobody approving it takes effect and the CLI says a guard there stops mistakes, not the agent.
``admin.bus.change_setting`` decides, from the row's ``loosens``; the CLI only prints."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.cli import mcp_server
from agentmail.config import registry as registry_mod
from agentmail.config.registry import Registry
from agentmail.config.settings import (
    ATTACH_MAX_BYTES,
    ATTACH_MAX_COUNT,
    ATTACH_MAX_TOTAL,
    ATTACH_TYPES,
    SETTINGS,
    never,
)
from agentmail.errors import Refused

from ..conftest import Cli
from ..mailservers.certs import create_pki
from .test_approval_by_mail import CAROL, answer, mailbox

CA = "{ca}"  # a CA certificate made for the case (ca_file's value)
Base = tuple[tuple[str, tuple[str, ...]], ...]
MAIL = (("smtp", ("mail.bus.test:587",)), ("imap", ("mail.bus.test:993",)))  # starttls, implicit
LOOP = (("smtp", ("127.0.0.1:587",)),)

# (setting, what the bus had before an approver was listed, the values set, whether it is asked)
CASES: list[tuple[str, Base, tuple[str, ...], bool]] = [
    ("name", (), ("ops",), False),
    ("domain", (), ("other.test",), True),
    ("domain", (), ("bus.test",), False),
    ("transport", MAIL, ("smtp+imap",), True),
    ("transport", MAIL, ("local",), False),
    ("policy", (), ("aligned",), True),
    ("policy", (("policy", ("aligned",)),), ("pinned",), False),
    ("trusted_authserv_ids", (), ("evil.test",), True),
    ("trusted_authserv_ids", (), ("mail.bus.test",), False),
    ("ca_file", (), (CA,), True),
    ("sent_folder", (("sent_folder", ("Sent",)),), ("",), True),
    ("sent_folder", (("sent_folder", ("Sent",)),), ("Archive",), True),
    ("sent_folder", (("sent_folder", ("",)),), ("Sent",), False),
    ("max_size", (), ("1048577",), True),
    ("max_size", (), ("1048575",), False),
    ("hold", (), ("",), True),
    ("hold", (), ("gamma@bus.test",), True),
    ("hold", (), ("bus.test",), False),  # holding more: told, not asked
    ("new_threads_per_hour", (("new_threads_per_hour", ("20",)),), ("21",), True),
    ("new_threads_per_hour", (("new_threads_per_hour", ("20",)),), ("0",), True),
    ("new_threads_per_hour", (("new_threads_per_hour", ("20",)),), ("20",), False),
    ("new_threads_per_hour", (("new_threads_per_hour", ("20",)),), ("19",), False),
    ("new_threads_per_hour", (), ("20",), False),  # a cap where there was none
    ("attach_max_bytes", (), (str(ATTACH_MAX_BYTES + 1),), True),
    ("attach_max_bytes", (), (str(ATTACH_MAX_BYTES - 1),), False),
    ("attach_max_total", (), (str(ATTACH_MAX_TOTAL + 1),), True),
    ("attach_max_total", (), (str(ATTACH_MAX_TOTAL - 1),), False),
    ("attach_max_count", (), (str(ATTACH_MAX_COUNT + 1),), True),
    ("attach_max_count", (), (str(ATTACH_MAX_COUNT - 1),), False),
    ("attach_types", (), (*ATTACH_TYPES, "text/html"), True),
    ("attach_types", (), ATTACH_TYPES[1:], False),
    ("auth", (), ("xoauth2",), False),
    ("stale_after", (("stale_after", ("3d",)),), ("4d",), True),
    ("stale_after", (("stale_after", ("3d",)),), ("",), True),
    ("stale_after", (("stale_after", ("3d",)),), ("2d",), False),
    ("stale_after", (), ("3d",), False),
    ("smtp", MAIL, ("mail.other.test:587",), True),
    ("smtp", MAIL, ("mail.bus.test:587",), False),
    ("imap", MAIL, ("mail.other.test:993",), True),
    ("imap", MAIL, ("mail.bus.test:993",), False),
    ("smtp.tls", LOOP, ("none",), True),
    ("smtp.tls", LOOP, ("implicit",), False),
    ("imap.tls", MAIL, ("starttls",), True),
    ("imap.tls", MAIL, ("implicit",), False),
    ("poll_interval", MAIL, ("30",), False),
    ("groups.ops", (), ("alpha",), False),
]
LOOSENING = [case for case in CASES if case[3]]


def _values(values: tuple[str, ...], tmp_path: Path) -> list[str]:
    if CA not in values:
        return list(values)
    return [str(create_pki(tmp_path, name="partner").ca_file)]


def _set_up(registry: Registry, base: Base, *, approver: bool) -> Path:
    """The bus as its operator left it, then (``approver``) carol approving alpha's letters."""
    root = registry.root
    for key, values in (("hold", ("beta@bus.test",)), ("trusted_authserv_ids", ("mail.bus.test",)), *base):
        bus.set_setting(root, key, list(values))
    if approver:
        bus.set_person(registry_mod.load(root), "alpha", CAROL, follows=False, writes=False, approves=True)
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _asks(home: Path) -> list[EmailMessage]:
    return [m for m in mailbox(home, CAROL) if str(m["Subject"]).startswith("Approve? a change: agentmail bus set ")]


def test_every_row_of_the_settings_table_has_its_cases() -> None:
    """A loosening case for every row that can loosen, a case left alone for every row but the
    one every set of which is asked."""
    rows = {row.name for row in SETTINGS}
    named = {"groups.NAME" if key.startswith("groups.") else key: asked for key, _b, _v, asked in CASES}
    assert set(named) == rows
    loosening = {"groups.NAME" if key.startswith("groups.") else key for key, *_ in LOOSENING}
    assert loosening == rows - {row.name for row in SETTINGS if row.loosens is never}
    kept = {"groups.NAME" if key.startswith("groups.") else key for key, _b, _v, asked in CASES if not asked}
    assert kept == rows - {"ca_file"}


@pytest.mark.parametrize(
    ("key", "base", "values", "asked"), CASES, ids=[f"{c[0]}={'+'.join(c[2])[:24]}" for c in CASES]
)
def test_a_loosening_change_waits_for_an_approver_through_the_api_and_the_cli(
    registry: Registry, home: Path, tmp_path: Path, cli: Cli, key: str, base: Base, values: tuple[str, ...], asked: bool
) -> None:
    root = _set_up(registry, base, approver=True)
    given = _values(values, tmp_path)
    before = _files(root)
    if not asked:
        changed = bus.change_setting(root, key, given)
        assert changed.guarded and changed.loosens == "" and changed.approved_by == ""
        assert _asks(home) == []
        code, _, err = cli("--as", "alpha", "bus", "set", key, *given)
        assert code == 0 and "mistakes" not in err, err
        assert _asks(home) == []
        return
    with pytest.raises(Refused, match="waits for an approver"):
        bus.set_setting(root, key, given)  # a program, or an agent through the API
    assert _files(root) == before  # nothing written, no certificate copied
    (ask,) = _asks(home)
    code, out, err = cli("--as", "alpha", "bus", "set", key, *given)
    assert (code, out) == (4, "") and "still waits" in err, err
    assert _files(root) == before and len(_asks(home)) == 1
    answer(home, ask, "approve")
    code, out, err = cli("--json", "--as", "alpha", "bus", "set", key, *given)
    assert code == 0 and f'"key": "{key}"' in out and "mistakes" not in err, err
    assert _files(root) != before
    if key == "ca_file":  # the certificate came with the change, and a new one is asked anew
        assert (root / "ca.pem").read_bytes() == Path(given[0]).read_bytes()
        with pytest.raises(Refused, match="waits for an approver"):
            bus.set_setting(root, key, given)


@pytest.mark.parametrize(
    ("key", "base", "values", "asked"), LOOSENING, ids=[f"{c[0]}={'+'.join(c[2])[:24]}" for c in LOOSENING]
)
def test_with_nobody_approving_it_takes_effect_and_the_cli_says_what_a_guard_is_worth(
    registry: Registry, home: Path, tmp_path: Path, cli: Cli, key: str, base: Base, values: tuple[str, ...], asked: bool
) -> None:
    root = _set_up(registry, base, approver=False)
    given = _values(values, tmp_path)
    before = _files(root)
    code, out, err = cli("bus", "set", key, *given)
    assert code == 0 and "mistakes, not against the agent" in err and len(err.strip().splitlines()) <= 2, err
    assert _files(root) != before
    assert not (home / "postoffice").exists() or not any((home / "postoffice").glob("*@*"))


def test_the_api_returns_what_the_change_loosened_and_who_approved_it(registry: Registry, home: Path) -> None:
    root = _set_up(registry, (("new_threads_per_hour", ("20",)),), approver=True)
    with pytest.raises(Refused):
        bus.change_setting(root, "new_threads_per_hour", ["0"])
    (ask,) = _asks(home)
    assert str(ask["Subject"]) == "Approve? a change: agentmail bus set new_threads_per_hour 0"
    answer(home, ask, "approve")
    changed = bus.change_setting(root, "new_threads_per_hour", ["0"])
    assert (changed.stored, changed.approved_by, changed.guarded) == (0, CAROL, True)
    assert changed.loosens == "Lets the agents open more new threads an hour (0: no cap at all)."
    assert registry_mod.load(root).bus.new_threads_per_hour == 0


def test_a_value_refused_is_refused_before_anyone_is_asked(registry: Registry, home: Path, cli: Cli) -> None:
    _set_up(registry, LOOP, approver=True)
    for args in (("max_size", "lots"), ("smtp", "nowhere"), ("ca_file", str(home / "missing.pem")), ("policy", "lax")):
        code, out, err = cli("--as", "alpha", "bus", "set", *args)
        assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1, (args, err)
    assert _asks(home) == []


@pytest.mark.parametrize("key", ["smtp.tls", "imap.tls"])
def test_plaintext_to_a_server_off_this_machine_is_refused_as_an_endpoint_s_is(
    registry: Registry, cli: Cli, key: str
) -> None:
    root = _set_up(registry, MAIL, approver=False)
    before = _files(root)
    code, out, err = cli("bus", "set", key, "none")
    assert (code, out) == (2, "") and err.strip() == (
        "agentmail: tls none is refused for mail.bus.test: plaintext is allowed only to a loopback address"
    )
    assert _files(root) == before


def test_mcp_has_no_way_to_change_a_setting() -> None:
    """The agent's MCP tools read and write letters; none of them changes the bus."""
    names = set(mcp_server.TOOLS) | set(mcp_server.OPS)
    assert not [name for name in names if "set" in name or "bus" in name or "config" in name]
    source = Path(mcp_server.__file__).read_text()
    assert "admin" not in source and "set_setting" not in source and "change_setting" not in source
