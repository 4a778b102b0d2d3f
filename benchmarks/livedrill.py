"""Figure 10 (issue 28 target 3): the 8-platform drill on the live stack, beside a raw client.

    python -m benchmarks.livedrill [--letters 60] [--rounds 3] [--json-out FILE]
    python -m benchmarks --only livedrill

8 platforms (``drill1`` .. ``drill8@bus.test``) each send ``--letters`` letters round robin to
the other 7 and each receive as many, all at once: one sender and one receiver process per
platform (16 processes, as 8 agents sending and waiting would be), started together behind a
barrier. The clock runs from the barrier until the last receiver holds all its letters, each
exactly once. Three modes, rounds alternating so load hits them alike:

* ``agentmail``: ``AgentMail.send()`` per letter (compose, sign, outbox, submit on the reused
  session, the Sent copy); the receiver waits in ``AgentMail.wait()`` (IMAP IDLE), reads
  every unread letter with ``inbox(sync=False)`` and marks it ``done``.
* ``agentmail, no Sent copy``: the same with ``sent_folder = ""``.
* ``raw``: smtplib, one STARTTLS + AUTH session per sender, ``sendmail`` of prebuilt letters of
  agentmail's own size (composed and signed before the clock starts); imaplib on implicit TLS
  waits in IDLE (by hand: imaplib has none), then ``UID SEARCH`` + ``UID FETCH BODY.PEEK[]``.

Every process counts its protocol commands (each a round trip: neither side pipelines), so
the figure says where agentmail's extra round trips are. Needs the repo's stack started with
the drill's mailboxes; without it the figure is skipped with a message saying how.
"""

from __future__ import annotations

import argparse
import imaplib
import json
import multiprocessing
import os
import queue
import resource
import shutil
import smtplib
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import REPO
from .report import Figure, Target, median

PLATFORMS = tuple(f"drill{i}" for i in range(1, 9))
DOMAIN = "bus.test"
LETTERS = 60
ROUNDS = 3
MODES = ("agentmail", "agentmail_no_sent", "raw")
TIMEOUT = 180.0  # a receiver gives up after this: the round then fails loudly, never passes
BODY = (
    "I am the agent of {me}; drill letter {n} ({token}).\n"
    "Reproduction: `curl -s https://x.example/quota?id=7` returns 500 since 2.4.1 (2026-11-28).\n"
    "Expected 200 per the documented contract. Blast radius: the free plan.\n"
)
START = (
    f'MAILSTACK_USERS="{" ".join(f"{p}@{DOMAIN}" for p in PLATFORMS)}" '
    "sudo -E bash live_tests/mailstack/up   (MAILSTACK_DIR names a run dir other than live_tests/mailstack/run)"
)


def stack() -> tuple[dict[str, Any] | None, str]:
    """The running stack's stack.json with the drill's mailboxes, or (None, why not)."""
    folder = Path(os.environ.get("MAILSTACK_DIR") or REPO / "live_tests" / "mailstack" / "run")
    try:
        data = json.loads((folder / "stack.json").read_text())
    except FileNotFoundError:
        return None, f"no stack at {folder} (no stack.json); start it: {START}"
    users = {u["address"] for u in data.get("users", [])}
    missing = [p for p in PLATFORMS if f"{p}@{DOMAIN}" not in users]
    if missing:
        return None, f"the stack at {folder} has no mailbox for {', '.join(missing)}; restart it: {START}"
    for key in ("MAILSTACK_SUBMISSION_PORT", "MAILSTACK_IMAP_PORT"):
        try:
            with socket.create_connection((data["MAILSTACK_SMTP_HOST"], int(data[key])), timeout=3):
                pass
        except OSError as exc:
            return None, f"the stack at {folder} does not answer on {data[key]} ({exc}); start it: {START}"
    return data, ""


def plan(letters: int) -> dict[str, list[str]]:
    """Who each platform writes to, letter by letter: round robin over the other 7, so each
    platform also receives ``letters`` (7 senders, 8 or 9 letters each)."""
    n = len(PLATFORMS)
    return {p: [PLATFORMS[(i + 1 + j % (n - 1)) % n] for j in range(letters)] for i, p in enumerate(PLATFORMS)}


# --- the bus ------------------------------------------------------------------------------------


class Drill:
    """The drill's registry and secrets, made once; each round works in a fresh home copy."""

    def __init__(self, root: Path, st: dict[str, Any]) -> None:
        from agentmail.admin import bus
        from agentmail.config.credentials import Login, write_login

        self.root, self.stack = root, st
        self.home = root / "drill-home"
        host = st["MAILSTACK_SMTP_HOST"]
        endpoints = bus.endpoints(
            f"{host}:{st['MAILSTACK_SUBMISSION_PORT']}",
            f"{st['MAILSTACK_IMAP_HOST']}:{st['MAILSTACK_IMAP_PORT']}",
            ("starttls", "implicit"),
            st["MAILSTACK_CA"],
            (st["MAILSTACK_AUTHSERV_ID"],),
        )
        # The drill opens 480 threads a round: no hourly cap (the live checks do the same).
        self.registry = bus.init(self.home, self.home / "registry", list(PLATFORMS), domain=DOMAIN,
                                 transport="smtp+imap", endpoints={**endpoints, "new_threads_per_hour": 0})  # fmt: skip
        self.passwords = {u["address"]: u["password"] for u in st["users"]}
        for name in PLATFORMS:
            write_login(self.home, name, Login(f"{name}@{DOMAIN}", self.passwords[f"{name}@{DOMAIN}"]))
        self.ca = st["MAILSTACK_CA"]
        self.smtp = (host, int(st["MAILSTACK_SUBMISSION_PORT"]))
        self.imap = (st["MAILSTACK_IMAP_HOST"], int(st["MAILSTACK_IMAP_PORT"]))

    def round_home(self, label: str) -> Path:
        home = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=self.root))
        shutil.copytree(self.home / "secrets", home / "secrets")
        os.chmod(home, 0o700)
        return home


# --- counting round trips -----------------------------------------------------------------------


def count_commands() -> dict[str, int]:
    """Count every IMAP and SMTP command this process sends (each waits for its answer)."""
    import aiosmtplib

    counts = {"imap": 0, "smtp": 0}
    imap_command = imaplib.IMAP4._command  # type: ignore[attr-defined]
    smtp_put = smtplib.SMTP.putcmd
    aio_execute = aiosmtplib.SMTP.execute_command

    def imap(self: imaplib.IMAP4, name: str, *args: Any) -> Any:
        counts["imap"] += 1
        counts[f"imap {name}"] = counts.get(f"imap {name}", 0) + 1
        return imap_command(self, name, *args)

    def smtp(self: smtplib.SMTP, cmd: str, args: str = "") -> None:
        counts["smtp"] += 1
        return smtp_put(self, cmd, args)

    async def aio(self: aiosmtplib.SMTP, *args: bytes, **kwargs: Any) -> Any:
        counts["smtp"] += 1
        name = args[0].decode(errors="replace").split()[0].upper() if args else "?"
        counts[f"smtp {name}"] = counts.get(f"smtp {name}", 0) + 1
        return await aio_execute(self, *args, **kwargs)

    imaplib.IMAP4._command = imap  # type: ignore[attr-defined]
    smtplib.SMTP.putcmd = smtp  # type: ignore[method-assign]
    aiosmtplib.SMTP.execute_command = aio  # type: ignore[method-assign]
    return counts


# --- the workers (one process each) -------------------------------------------------------------


def _agentmail_client(drill: Drill, home: Path, platform: str, agent: str, no_sent: bool) -> Any:
    from agentmail.client.facade import AgentMail
    from agentmail.config.identity import Identity

    registry = drill.registry
    if no_sent:
        registry = registry.replace(bus=registry.bus.replace(sent_folder=""))
    return AgentMail(registry, Identity(platform, agent), home)


def agentmail_sender(drill: Drill, home: Path, platform: str, to: list[str], token: str, no_sent: bool,
                     go: Any) -> dict[str, Any]:  # fmt: skip
    am = _agentmail_client(drill, home, platform, "sender", no_sent)
    counts = count_commands()
    go.wait()
    cpu_at_start, began = _cpu(), time.perf_counter()
    for n, recipient in enumerate(to):
        letter = am.send(recipient, f"Drill {token} {platform} {n}", BODY.format(me=platform, n=n, token=token))
        if letter.state != "sent":
            raise RuntimeError(f"{platform} letter {n}: {letter.state} {letter.extra}")
    ended = time.perf_counter()
    am.close()
    return {"began": began, "ended": ended, "counts": counts, "cpu_at_start": cpu_at_start}


def agentmail_receiver(drill: Drill, home: Path, platform: str, expect: int, token: str, no_sent: bool,
                       go: Any) -> dict[str, Any]:  # fmt: skip
    am = _agentmail_client(drill, home, platform, "receiver", no_sent)
    transport = am.transport
    validity, uidnext = transport._select()  # an agent already waiting: at the mailbox's end
    am.spool.ensure().write.set_checkpoint(transport.name, f"{validity}:{max(uidnext - 1, 0)}")
    _skip_sent_history(am)
    counts = count_commands()
    go.wait()
    cpu_at_start, began = _cpu(), time.perf_counter()
    seen: dict[str, int] = {}
    mechanisms: dict[str, int] = {}
    deadline = time.monotonic() + TIMEOUT
    while sum(seen.values()) < expect:
        _letter, mechanism = am.wait(max(deadline - time.monotonic(), 0.1))
        mechanisms[mechanism] = mechanisms.get(mechanism, 0) + 1
        unread = am.inbox(sync=False)
        for x in unread:
            if token in (x.subject or ""):
                seen[x.message_id] = seen.get(x.message_id, 0) + 1
        am.done(*[x.id for x in unread])
    ended = time.perf_counter()
    am.close()
    return {
        "began": began,
        "ended": ended,
        "counts": counts,
        "cpu_at_start": cpu_at_start,
        "seen": seen,
        "mechanisms": mechanisms,
    }


def _skip_sent_history(am: Any) -> None:
    """The sent record (issue 25: a home reads its platform's other homes' letters from the sent
    folder) starts at the folder's end too: earlier rounds' copies are no part of this drill."""
    from agentmail.client import sibling_letters

    transport = am.transport
    client = transport._connect()
    folder = transport._sent_folder(client)
    if folder and client.folder_exists(folder):
        status = client.folder_status(folder, [b"UIDVALIDITY", b"UIDNEXT"])
        last = max(int(status[b"UIDNEXT"]) - 1, 0)
        am.spool.write.set_checkpoint(sibling_letters.checkpoint_name(transport), f"{status[b'UIDVALIDITY']}:{last}")


def raw_letters(drill: Drill, platform: str, to: list[str], token: str) -> list[tuple[str, bytes]]:
    """Letters of agentmail's own size and form (composed and signed here, before the clock)."""
    from agentmail.model import new_thread_id
    from agentmail.stages.compose import Draft, compose

    made = []
    for n, recipient in enumerate(to):
        draft = Draft(recipient, "report", new_thread_id(), f"Drill {token} {platform} {n}",
                      BODY.format(me=platform, n=n, token=token))  # fmt: skip
        _letter, raw = compose(drill.registry, drill.home, platform, draft)
        made.append((f"{recipient}@{DOMAIN}", raw))
    return made


def raw_sender(drill: Drill, home: Path, platform: str, to: list[str], token: str, no_sent: bool,
               go: Any) -> dict[str, Any]:  # fmt: skip
    made = raw_letters(drill, platform, to, token)
    address = f"{platform}@{DOMAIN}"
    counts = count_commands()
    go.wait()
    cpu_at_start, began = _cpu(), time.perf_counter()
    smtp = smtplib.SMTP(*drill.smtp, local_hostname="raw.localhost", timeout=30)
    smtp.starttls(context=ssl.create_default_context(cafile=drill.ca))
    smtp.login(address, drill.passwords[address])
    for rcpt, raw in made:
        smtp.sendmail(address, [rcpt], raw)
    smtp.quit()
    ended = time.perf_counter()
    return {"began": began, "ended": ended, "counts": counts, "cpu_at_start": cpu_at_start}


def raw_receiver(drill: Drill, home: Path, platform: str, expect: int, token: str, no_sent: bool,
                 go: Any) -> dict[str, Any]:  # fmt: skip
    address = f"{platform}@{DOMAIN}"
    imap = imaplib.IMAP4_SSL(*drill.imap, ssl_context=ssl.create_default_context(cafile=drill.ca))
    imap.login(address, drill.passwords[address])
    _, data = imap.select("INBOX", readonly=True)
    _, status = imap.status("INBOX", "(UIDNEXT)")
    imap.untagged_responses.pop("EXISTS", None)  # the letters before the clock
    last = int(status[0].split(b"UIDNEXT")[1].strip(b" )")) - 1
    counts = count_commands()
    go.wait()
    cpu_at_start, began = _cpu(), time.perf_counter()
    seen = collect(imap, last, expect, token.encode(), time.monotonic() + TIMEOUT)
    ended = time.perf_counter()
    imap.logout()
    return {
        "began": began,
        "ended": ended,
        "counts": counts,
        "cpu_at_start": cpu_at_start,
        "seen": seen,
        "mechanisms": {},
    }


def collect(imap: imaplib.IMAP4, last: int, expect: int, mark: bytes, deadline: float) -> dict[str, int]:
    """How often each letter carrying ``mark`` came in after UID ``last``, by Message-ID, until
    ``expect`` have: a UID SEARCH and a FETCH while there are new ones, else IDLE."""
    seen: dict[str, int] = {}
    while sum(seen.values()) < expect:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{sum(seen.values())} of {expect} letters")
        _, found = imap.uid("SEARCH", f"UID {last + 1}:*")
        uids = sorted(u for u in map(int, found[0].split()) if u > last)
        if uids:
            _, rows = imap.uid("FETCH", ",".join(map(str, uids)), "(BODY.PEEK[])")
            for row in rows:
                if isinstance(row, tuple) and mark in row[1]:
                    head = row[1].split(b"\r\n\r\n", 1)[0]
                    mid = next(line for line in head.split(b"\r\n") if line.lower().startswith(b"message-id:"))
                    seen[mid.decode()] = seen.get(mid.decode(), 0) + 1
            last = uids[-1]
            continue
        if imap.untagged_responses.pop("EXISTS", None):
            continue  # told of a letter after the SEARCH had run: IDLE would never tell again
        _idle(imap, deadline)
    return seen


def _idle(imap: imaplib.IMAP4, deadline: float) -> None:
    """IDLE by hand until the server pushes EXISTS (or the deadline): no poll, no sleep."""
    tag = imap._new_tag()
    imap.send(tag + b" IDLE\r\n")
    imap.readline()  # "+ idling"
    readable = True  # a socket file that timed out cannot be read again: no DONE then
    try:
        while True:
            # Per line: the server's "* OK Still here" must not push the deadline back.
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no letter by the deadline")
            imap.sock.settimeout(left)
            try:
                line = imap.readline()
            except TimeoutError:
                readable = False
                raise TimeoutError("no letter by the deadline") from None
            if not line:
                raise OSError("the IMAP server hung up")
            if line.split()[2:3] == [b"EXISTS"]:
                break
    finally:
        imap.sock.settimeout(30)
        if readable:
            imap.send(b"DONE\r\n")
            while not (line := imap.readline()).startswith(tag + b" "):
                if not line:
                    raise OSError("the IMAP server hung up")


WORKERS: dict[str, tuple[Callable[..., dict[str, Any]], Callable[..., dict[str, Any]]]] = {
    "agentmail": (agentmail_sender, agentmail_receiver),
    "agentmail_no_sent": (agentmail_sender, agentmail_receiver),
    "raw": (raw_sender, raw_receiver),
}


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _work(fn: Callable[..., dict[str, Any]], args: tuple[Any, ...], results: Any, key: str) -> None:
    try:
        out = fn(*args)
        out["cpu"] = _cpu() - out["cpu_at_start"]  # this process's CPU from the barrier on
        results.put((key, out))
    except BaseException as exc:  # reported to the parent, which fails the round
        results.put((key, {"error": f"{exc.__class__.__name__}: {exc}"}))
        raise


def run_round(drill: Drill, mode: str, letters: int, index: int) -> dict[str, Any]:
    """One drill: 16 processes behind one barrier; seconds from it to the last letter filed."""
    token = f"d{index}{mode[:3]}{os.urandom(3).hex()}"
    home = drill.round_home(f"{mode}-{index}")
    sends = plan(letters)
    expect = {p: sum(to.count(p) for to in sends.values()) for p in PLATFORMS}
    no_sent = mode == "agentmail_no_sent"
    send_fn, recv_fn = WORKERS[mode]
    ctx = multiprocessing.get_context("fork")
    go = ctx.Barrier(2 * len(PLATFORMS))
    results = ctx.Queue()
    procs = []
    for p in PLATFORMS:
        for role, fn, arg in (("recv", recv_fn, expect[p]), ("send", send_fn, sends[p])):
            proc = ctx.Process(
                target=_work, args=(fn, (drill, home, p, arg, token, no_sent, go), results, f"{role} {p}")
            )
            proc.start()
            procs.append(proc)
    got: dict[str, dict[str, Any]] = {}
    try:
        while len(got) < len(procs):
            try:
                key, value = results.get(timeout=TIMEOUT + 60)
            except queue.Empty:
                go.abort()
                silent = sorted(
                    f"{role} {p}" for p in PLATFORMS for role in ("recv", "send") if f"{role} {p}" not in got
                )
                raise RuntimeError(f"{mode} round {index}: no word from {', '.join(silent)}") from None
            if "error" in value:
                go.abort()
                raise RuntimeError(f"{mode} round {index}: {key}: {value['error']}")
            got[key] = value
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
        shutil.rmtree(home, ignore_errors=True)
    began = min(v["began"] for v in got.values())
    ended = max(v["ended"] for k, v in got.items() if k.startswith("recv"))
    sent_by = max(v["ended"] for k, v in got.items() if k.startswith("send"))
    total = letters * len(PLATFORMS)
    received = sum(len(v["seen"]) for k, v in got.items() if k.startswith("recv"))
    twice = sum(1 for k, v in got.items() if k.startswith("recv") for c in v["seen"].values() if c > 1)
    if received != total or twice:
        raise RuntimeError(f"{mode} round {index}: {received} of {total} letters, {twice} seen twice")
    counts: dict[str, float] = {}
    for key, value in got.items():
        side = key.split()[0]
        for name, n in value["counts"].items():
            counts[f"{side} {name}"] = counts.get(f"{side} {name}", 0) + n
    mechanisms: dict[str, int] = {}
    for value in got.values():
        for name, n in value.get("mechanisms", {}).items():
            mechanisms[name] = mechanisms.get(name, 0) + n
    cpu = {side: sum(v["cpu"] for k, v in got.items() if k.startswith(side)) for side in ("send", "recv")}
    return {
        "cpu_ms_per_letter": {side: round(c * 1000 / total, 2) for side, c in cpu.items()},
        "seconds": ended - began,
        "submitted_s": sent_by - began,
        "letters": total,
        "per_letter": {k: round(v / total, 2) for k, v in sorted(counts.items())},
        "wakes": mechanisms,
    }


# --- the figure -----------------------------------------------------------------------------------


def measure(
    root: Path, letters: int = LETTERS, rounds: int = ROUNDS, echo: Callable[[str], None] = print
) -> dict[str, Any]:
    st, why = stack()
    if st is None:
        return {"skipped": why}
    drill = Drill(root, st)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for index in range(rounds):
        order = MODES if index % 2 == 0 else tuple(reversed(MODES))
        for mode in order:
            result = run_round(drill, mode, letters, index)
            runs[mode].append(result)
            cpu = result["cpu_ms_per_letter"]
            echo(f"  round {index} {mode:<18} {result['seconds']:6.2f} s  "
                 f"({result['letters'] / result['seconds']:5.1f} letters/s; submitted in {result['submitted_s']:.2f} s; "
                 f"client CPU/letter: send {cpu['send']:.2f} ms, receive {cpu['recv']:.2f} ms; load {os.getloadavg()[0]:.2f})")  # fmt: skip
    seconds = {m: median([r["seconds"] for r in runs[m]]) for m in MODES}
    return {
        "letters": letters * len(PLATFORMS),
        "platforms": len(PLATFORMS),
        "rounds": rounds,
        "seconds": seconds,
        "letters_per_s": {m: letters * len(PLATFORMS) / s for m, s in seconds.items()},
        "speed_vs_raw": seconds["raw"] / seconds["agentmail"],
        "speed_no_sent_vs_raw": seconds["raw"] / seconds["agentmail_no_sent"],
        "sent_copy_cost": seconds["agentmail"] / seconds["agentmail_no_sent"] - 1,
        "per_letter": {m: runs[m][-1]["per_letter"] for m in MODES},
        "cpu_ms_per_letter": {
            m: {side: median([r["cpu_ms_per_letter"][side] for r in runs[m]]) for side in ("send", "recv")}
            for m in MODES
        },  # fmt: skip
        "wakes": {m: runs[m][-1]["wakes"] for m in MODES},
        "runs": {m: [round(r["seconds"], 3) for r in runs[m]] for m in MODES},
    }


def figures(root: Path, settings: Any) -> list[Figure]:
    """``python -m benchmarks --only livedrill``: figure 10 (skipped without the stack)."""
    out = measure(
        root,
        10 if settings.quick else LETTERS,
        1 if settings.quick else ROUNDS,
        echo=lambda line: print("\n" + line, end=""),
    )
    key, title = "live_drill", f"10. live drill: 8 platforms x {10 if settings.quick else LETTERS} letters"
    if "skipped" in out:
        print(f" skipped: {out['skipped']}", end="")
        return [Figure(key, title, "letters/s", None, None, "", skipped=out["skipped"])]
    rate = out["letters_per_s"]
    return [Figure(key, title, "letters/s", rate["agentmail"], rate["raw"], "smtplib + imaplib (IDLE), same stack",
                   Target("ratio", ">=", 0.8, ">= 0.8x raw"), out["rounds"], out)]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.livedrill", description=__doc__.split("\n\n")[0])
    parser.add_argument("--letters", type=int, default=LETTERS, help="per platform (default 60)")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    for name in [n for n in os.environ if n.startswith("AGENTMAIL_")]:
        del os.environ[name]
    load = os.getloadavg()
    print(f"live drill: {len(PLATFORMS)} platforms x {args.letters} letters, {args.rounds} rounds, "
          f"{os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="agentmail-drill-"))
    try:
        os.environ["AGENTMAIL_HOME"] = str(root / "default-home")
        out = measure(root, args.letters, args.rounds, echo=lambda line: print(line, flush=True))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if "skipped" in out:
        print(f"skipped: {out['skipped']}")
        return 0
    out["load_before"], out["load_after"] = list(load), list(os.getloadavg())
    rate = out["letters_per_s"]
    print(
        f"\nagentmail          {out['seconds']['agentmail']:6.2f} s  {rate['agentmail']:6.1f} letters/s"
        f"  = {out['speed_vs_raw']:.2f}x raw (target >= 0.8x)"
    )
    print(
        f"agentmail, no Sent {out['seconds']['agentmail_no_sent']:6.2f} s  {rate['agentmail_no_sent']:6.1f} letters/s"
        f"  = {out['speed_no_sent_vs_raw']:.2f}x raw"
    )
    print(f"raw smtplib+imaplib{out['seconds']['raw']:6.2f} s  {rate['raw']:6.1f} letters/s")
    print(f"the Sent copy costs {out['sent_copy_cost'] * 100:+.1f}% (target <= 10%)")
    for mode in MODES:
        print(f"round trips per letter, {mode}: " + ", ".join(f"{k} {v:g}" for k, v in out["per_letter"][mode].items()))
    for mode in MODES:
        cpu = out["cpu_ms_per_letter"][mode]
        print(f"client CPU per letter, {mode}: sender {cpu['send']:.2f} ms, receiver {cpu['recv']:.2f} ms")
    print(f"receiver wakes (agentmail): {out['wakes']['agentmail']}; load after {out['load_after']}")
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
