"""``agentmail doctor``: one line per check, each ok or exactly what to fix. Never a secret.

``--round-trip`` sends a letter to the platform's own thread address and reads it back: plus
addressing, the DKIM signature against the pinned key and the trusted Authentication-Results
are all exercised on the real server, and the time it took is reported.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from .._value import Frozen
from ..client.facade import AgentMail
from ..config import identity, registry
from ..config.credentials import read_private_key_with_source
from ..errors import AgentmailError
from ..letter import wire
from ..stages.compose import NEW_THREAD, Draft, compose
from ..transport import Envelope, Outgoing, checkup
from ..trust import authenticity, signing
from ..trust.provenance import authserv_ids, trusted_results
from . import hosts
from .exposure import exposure, work_tree_of

PROBE_AGENT = "doctor-probe"  # the probe is a note for this (absent) agent: no one's inbox shows it


class Check(Frozen):
    name: str
    ok: bool
    detail: str


def _secrets_mode(home: Path) -> Check:
    folder = home / "secrets"
    if not folder.is_dir():
        return Check("secrets folder", False, f"{folder} does not exist: 'agentmail init' or 'add' makes it (0700)")
    mode = stat.S_IMODE(folder.stat().st_mode)
    if mode & 0o077:
        return Check("secrets folder", False, f"{folder} is mode {mode:o}: run chmod 700 {folder}")
    return Check("secrets folder", True, f"{folder} mode {mode:o}")


def _home_exposure(home: Path) -> Check:
    why = exposure(home)
    if why is not None:
        return Check("home", False, why)
    top = work_tree_of(home)
    return Check(
        "home", True, f"{home}: " + (f"in {top}, which ignores its secrets/" if top else "in no git work tree")
    )


def _previous_keys(reg: registry.Registry) -> Check:
    """Every key a rotation kept beside a platform's current one, and until when: a second key
    that signs as a platform is never invisible (the registry refuses one that is not the
    platform's own or that lasts more than its maximum)."""
    now = time.time()
    kept = [
        f"{p.name}: s={p.retiring.selector} until {p.retiring.until}"
        + (" (still valid)" if p.retiring.valid_at(now) else " (ended: 'keygen --retire' drops it)")
        for p in reg.platforms.values()
        if p.retiring is not None
    ]
    return Check("previous keys", True, "; ".join(kept) if kept else "none kept")


def _outbox(client: AgentMail) -> Check:
    queued, failed = client.spool.read.ids("outbox"), client.spool.read.ids("failed")
    if queued:
        return Check(
            "outbox",
            False,
            f"{len(queued)} letter(s) queued, not sent yet: they go out with the next "
            f"command or 'agentmail flush' (do not send them again)"
            + (f"; {len(failed)} failed ('agentmail sent' shows why)" if failed else ""),
        )
    return Check(
        "outbox",
        True,
        "empty" + (f"; {len(failed)} letter(s) failed earlier ('agentmail sent' shows why)" if failed else ""),
    )


def run_checks(
    home: Path,
    registry_root: Path,
    platform: str | None,
    agent: str | None,
    round_trip: bool = False,
    timeout: float = 60.0,
) -> list[Check]:
    checks: list[Check] = []
    try:
        reg = registry.load(registry_root)
    except AgentmailError as exc:
        return [Check("registry", False, str(exc))]
    problems = "; ".join(reg.problems)
    checks.append(
        Check(
            "registry",
            not reg.problems,
            f"{len(reg.platforms)} platform(s) at {reg.root}" + (f"; fix: {problems}" if problems else ""),
        )
    )
    checks.append(_previous_keys(reg))
    try:
        me = identity.resolve(reg, platform, agent, Path.cwd())
    except AgentmailError as exc:
        checks.append(Check("identity", False, str(exc)))
        return checks
    checks.append(Check("identity", True, me.mailbox))
    entry = reg.platforms[me.platform]
    checks.append(_secrets_mode(home))
    checks.append(_home_exposure(home))
    hooks = hosts.check(identity.checkout_root(Path.cwd()))
    if hooks is not None:  # a hook that no longer starts is an agent that never hears of its mail
        checks.append(Check("hooks", *hooks))
    key_ok = False
    try:
        private, source = read_private_key_with_source(home, me.platform)
        key_ok = entry.key_lookup == "dns" or signing.public_key_of(private) == entry.public_key
        checks.append(
            Check(
                "dkim key",
                key_ok,
                f"{source}: owner-only, matches the key pinned for {me.platform} (s={entry.selector})"
                if key_ok
                else f"the private key in {source} does not match the key pinned for {me.platform} "
                f"(s={entry.selector}): letters would be quarantined; restore the key that belongs to "
                f"this registry, or run 'agentmail keygen --as {me.platform}' and commit the entry",
            )
        )
    except AgentmailError as exc:
        checks.append(Check("dkim key", False, str(exc)))
    except Exception as exc:
        checks.append(Check("dkim key", False, f"the key file is not a valid ed25519 key ({exc.__class__.__name__})"))
    client = AgentMail(reg, me, home)
    try:
        try:  # a spool that cannot be used is reported, never the end of the checks
            checks.append(Check("spool", True, client.spool.check()))
            checks.append(_outbox(client))
        except AgentmailError as exc:
            checks.append(Check("spool", False, str(exc)))
        if reg.bus.transport == "local":
            checks.append(Check("post office", True, f"local transport at {home / 'postoffice'}"))
        else:
            try:
                transport = client.transport
                checks.extend(Check(n, ok, d) for n, ok, d in transport.doctor(entry.address))  # type: ignore[attr-defined]
            except AgentmailError as exc:  # no credentials yet: the servers and their TLS still tested
                checks.append(Check("transport", False, str(exc)))
                if reg.bus.smtp is not None and reg.bus.imap is not None:
                    checks.extend(
                        Check(n, ok, d) for n, ok, d in checkup.reach(reg.bus.smtp, reg.bus.imap, reg.bus.ca_file)
                    )
        if round_trip:
            if key_ok and all(c.ok for c in checks if c.name in ("smtp", "imap", "transport")):
                checks.append(_round_trip(client, timeout))
            else:
                checks.append(Check("round trip", False, "not tried: fix the failures above first"))
    finally:
        client.close()
    return checks


def _round_trip(client: AgentMail, timeout: float) -> Check:
    """A letter to our own thread address, read back and judged as any letter is."""
    started = time.monotonic()
    me = client.platform
    try:
        transport = client.transport
        checkpoint = client.spool.read.checkpoint(transport.name)
        tip = getattr(transport, "tip", None)
        if checkpoint is None and tip is not None:
            checkpoint = tip()  # never synced: skip the mailbox's history, read only what comes next
        letter, raw = compose(
            client.registry,
            client.home,
            me.name,
            Draft(
                me.name,
                "note",
                NEW_THREAD,
                "agentmail doctor --round-trip",
                f"A round trip of agentmail doctor (pid {os.getpid()}); it can be deleted.\n",
                to_agent=PROBE_AGENT,
            ),
        )
        thread = letter.thread
        rcpt = wire.tagged_address(me.address, thread)
        # Straight to the transport, not the outbox: a probe that fails is never queued.
        (result,) = transport.submit([Outgoing("doctor", raw, Envelope(me.address, (rcpt,)))])
        if result.status != "sent":
            return Check(
                "round trip", False, f"the server did not take the probe to {rcpt}: {result.status}: {result.detail}"
            )
        deadline = started + timeout
        while True:
            for batch in transport.fetch(checkpoint, client.registry.bus.max_size):
                for item in batch:
                    if item.raw is not None and letter.message_id.encode() in item.raw:
                        return _judge_probe(client, item.raw, thread, rcpt, time.monotonic() - started)
                checkpoint = transport.advance(checkpoint, batch)
            left = deadline - time.monotonic()
            if left <= 0:
                return Check(
                    "round trip",
                    False,
                    f"the probe sent to {rcpt} did not arrive within {timeout:g}s: "
                    f"check plus addressing (recipient_delimiter = +) and delivery to INBOX",
                )
            transport.wait(checkpoint, min(left, 5.0))
    except AgentmailError as exc:
        return Check("round trip", False, str(exc))


def _judge_probe(client: AgentMail, raw: bytes, thread: str, rcpt: str, elapsed: float) -> Check:
    verdict = authenticity.judge(raw, client.registry)
    took = f"{elapsed * 1000:.0f} ms"
    if verdict.route != "accept" or verdict.letter is None:
        return Check(
            "round trip",
            False,
            f"the probe came back in {took} but would be quarantined: {verdict.reason}: {verdict.detail}",
        )
    if verdict.letter.thread != thread:
        return Check(
            "round trip", False, f"the probe came back in {took} with thread {verdict.letter.thread}, not {thread}"
        )
    trusted = client.registry.bus.trusted_authserv_ids
    results = trusted_results(raw, trusted)
    carried = _carried(raw, trusted)
    if trusted and not results:
        return Check(
            "round trip",
            False,
            f"the probe came back in {took} and is accepted, but carries no "
            f"Authentication-Results from {', '.join(trusted)}: check trusted_authserv_ids "
            f"against the id your MTA stamps ({carried})",
        )
    key = client.platform
    ar = "; trusted A-R " + " | ".join(results) if results else "; no trusted authserv-id configured"
    return Check(
        "round trip",
        True,
        f"sent to {rcpt} and read back in {took}: accepted, DKIM d={key.dkim_domain} "
        f"s={key.selector} matches the pinned key{ar} ({carried})",
    )


def _carried(raw: bytes, trusted: tuple[str, ...]) -> str:
    """The authserv-ids the probe carried, each marked trusted or not: what an operator needs to
    choose trusted_authserv_ids (an id is trusted only if the MTA removes forged ones)."""
    ids = authserv_ids(raw)
    if not ids:
        return "the probe carried no Authentication-Results"
    wanted = {t.lower() for t in trusted}
    return "the probe carried Authentication-Results from " + ", ".join(
        f"{i} ({'trusted' if i in wanted else 'not trusted'})" for i in ids
    )
