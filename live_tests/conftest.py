"""Fixtures of the live checks: one bus per session, fresh spools, unique threads per test.

Not part of the hermetic suite (pyproject's testpaths = ["tests"]). Run:

    python -m pytest live_tests -p no:cacheprovider            # a skip is reported (-rs)
    python -m pytest live_tests -p no:cacheprovider --no-skips # what CI runs: a skip fails

With no bus configured (no LIVE_BUS_REGISTRY, no running stack) every check FAILS with a
message saying how to start the stack; it never skips quietly.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import livebus
import pytest

from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.model import Letter

collect_ignore = ["mailstack"]  # the stack's run dir holds Maildirs, not tests

TIMEOUT = float(os.environ.get("LIVE_BUS_TIMEOUT", "30"))  # seconds a letter may take
T = TypeVar("T")

OPENER = """\
I am the agent of {sender}; this is a live check of the bus ({token}).
Reproduction: `curl -s https://{receiver}.example/quota?id=7` returns status 500 with the output
"KeyError: 'plan'" since version 2.4.1 (2026-11-28). Expected 200 per the documented contract.
Blast radius: all invoices for users on the free plan. Please fix or tell us the new contract.
"""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--no-skips",
        action="store_true",
        default=False,
        help="Turn every skipped live check into a failure (CI: a missing stack must not pass).",
    )


def _strict(config: pytest.Config) -> bool:
    return bool(config.getoption("--no-skips") or os.environ.get("LIVE_BUS_NO_SKIPS"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _strict(item.config):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under --no-skips, which makes a skip a failure: {reason}"


# --- the bus ---------------------------------------------------------------------------------


class LiveBus:
    """The bus under test, copied into a session folder: its registry, secrets, fresh spools."""

    def __init__(self, cfg: livebus.BusConfig, root: Path) -> None:
        self.cfg = cfg
        self.root = root
        self.registry_dir, self.home = livebus.snapshot(cfg, root)
        self.registry: Registry = registry_mod.load(self.registry_dir)
        if self.registry.problems:
            pytest.fail("the bus registry has problems: " + "; ".join(self.registry.problems))
        self._clients: list[AgentMail] = []
        for name in (cfg.sender, cfg.receiver, cfg.partner):
            if name and name not in self.registry.platforms:
                pytest.fail(f"platform {name!r} is not in the registry at {cfg.registry} (LIVE_BUS_PLATFORMS)")

    def client(self, platform: str, *, home: Path | None = None, registry: Registry | None = None) -> AgentMail:
        """An AgentMail for ``platform`` whose spool ignores everything already in the mailbox:
        the mailboxes persist between runs, so each check only looks at what it sends."""
        am = AgentMail(registry or self.registry, Identity(platform), home or self.home)
        transport = am.transport
        validity, uidnext = transport._select()  # type: ignore[attr-defined]  # (UIDVALIDITY, UIDNEXT) of INBOX
        am.spool.ensure().write.set_checkpoint(transport.name, f"{validity}:{max(uidnext - 1, 0)}")
        self._clients.append(am)
        return am

    def variant(self, name: str, *, policy: str | None = None, own_registry: bool = False) -> tuple[Registry, Path]:
        """A second view of the same bus for one check: its own home (secrets copied, spools
        empty, so they may differ, e.g. an unpinned key), optionally another policy or its own
        copy of the registry files to add to. Returns (registry, home)."""
        home = self.root / f"home-{name}"
        (home / "secrets").mkdir(parents=True, mode=0o700)
        os.chmod(home, 0o700)
        for path in (self.home / "secrets").glob("*"):
            target = home / "secrets" / path.name
            target.write_bytes(path.read_bytes())
            os.chmod(target, 0o600)
        registry = self.registry
        if own_registry:
            shutil.copytree(self.registry_dir, self.root / f"registry-{name}")
            registry = registry_mod.load(self.root / f"registry-{name}")
        if policy:
            registry = registry.replace(bus=registry.bus.replace(policy=policy))
        return registry, home

    def close(self) -> None:
        for am in self._clients:
            am.close()


@pytest.fixture(scope="session")
def bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveBus]:
    for name in (
        "AGENTMAIL_PLATFORM",
        "AGENTMAIL_AGENT",
        "AGENTMAIL_DKIM_KEY",
        "AGENTMAIL_USERNAME",
        "AGENTMAIL_PASSWORD",
    ):
        os.environ.pop(name, None)  # each platform's own secrets, never the caller's
    try:
        cfg = livebus.load_config()
    except livebus.NotConfigured as exc:
        pytest.fail(str(exc), pytrace=False)
    reg = registry_mod.load(cfg.registry)
    if reg.bus.transport != "smtp+imap" or reg.bus.smtp is None or reg.bus.imap is None:
        pytest.fail(
            f"the bus at {cfg.registry} is not an smtp+imap bus; the live checks need a real mail system", pytrace=False
        )
    for endpoint in (reg.bus.smtp, reg.bus.imap):
        down = livebus.reachable(endpoint.host, endpoint.port)
        if down:
            hint = livebus.HOW_TO_START if cfg.is_stack else f"check the endpoints in {cfg.registry}/bus.toml"
            pytest.fail(f"{down}; {hint}", pytrace=False)
    live = LiveBus(cfg, tmp_path_factory.mktemp("livebus"))
    yield live
    live.close()


@pytest.fixture(autouse=True)
def _logged_out_after_each_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every client of the session logs out after each check: Dovecot takes at most 10 logins
    per user and address, and a client kept open by one check would stand in the next's way (a
    claim on the server refused a login is no claim). A client used again logs in again."""
    yield
    if "bus" in request.fixturenames:
        request.getfixturevalue("bus").close()


@pytest.fixture(scope="session")
def sender(bus: LiveBus) -> AgentMail:
    return bus.client(bus.cfg.sender)


@pytest.fixture(scope="session")
def receiver(bus: LiveBus) -> AgentMail:
    return bus.client(bus.cfg.receiver)


@pytest.fixture(scope="session")
def partner(bus: LiveBus) -> AgentMail:
    if not bus.cfg.partner:
        pytest.skip("no partner platform (a third name in LIVE_BUS_PLATFORMS, of another domain)")
    return bus.client(bus.cfg.partner)


@pytest.fixture
def token() -> str:
    """A unique word for this check's subject: the mailboxes keep everything ever sent."""
    return "lc" + secrets.token_hex(5)


def opener(sender: str, receiver: str, token: str) -> str:
    return OPENER.format(sender=sender, receiver=receiver, token=token)


# --- waiting for the wire ----------------------------------------------------------------------


def eventually(check: Callable[[], T | None], what: str, timeout: float = TIMEOUT, every: float = 0.05) -> T:
    """Call ``check`` until it returns something (not None), or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: nothing after {timeout:g}s")
        time.sleep(every)


def receive(am: AgentMail, thread: str, *, count: int = 1, timeout: float = TIMEOUT) -> list[Letter]:
    """Sync ``am`` until ``count`` unread letters of ``thread`` are in its spool; they are returned
    oldest first (and stay unread)."""

    def arrived() -> list[Letter] | None:
        mine = [x for x in am.inbox() if x.thread == thread]
        return mine if len(mine) >= count else None

    return eventually(arrived, f"{am.me.platform} waiting for {count} letter(s) of {thread}", timeout)


def quarantined(am: AgentMail, token: str, *, timeout: float = TIMEOUT) -> Letter:
    """Sync ``am`` until a quarantined letter whose subject carries ``token`` is there."""

    def found() -> Letter | None:
        return next((x for x in am.quarantined() if token in (x.subject or "")), None)

    return eventually(found, f"{am.me.platform} waiting for a quarantined letter {token}")
