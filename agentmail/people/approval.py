"""Approval by a person (DESIGN §6): a held letter is announced by mail to the
platform's approvers (people listed with ``approves``); an approver's authenticated reply whose
first word is ``approve`` or ``reject`` decides it. The operator's CLI path needs the approval
key, a file the agent is not given: only its SHA-256 is pinned in the registry.

Nothing here sends or moves a letter of the spool: it words the announcements (written, signed
and wrapped by ``for_people``, the one writer of letters for people), reads the decision in a
reply and checks the key; the client acts on them."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from ..config import bound
from ..config.bound import PIN_FILE
from ..config.registry import Registry
from ..errors import BadInput, Refused
from ..frame import body as framed
from ..frame import quoted
from ..letter import wire
from ..letter.attach import Attachment
from ..model import Letter
from ..text import one_line, visible

HOW_TO_ANSWER = 'To decide, reply with "approve" or "reject REASON" as the first word.'  # one short line
NO_KEY = (
    "approving from the command line needs the operator's approval key (--key-file FILE, "
    "pinned in the registry's approval-key.sha256); the agent does not hold it: an approver "
    "answers the announcement by mail instead"
)


def approvers(registry: Registry, platform: str) -> tuple[str, ...]:
    """The addresses of the people who approve ``platform``'s held letters."""
    entry = registry.platforms.get(platform)
    return tuple(p.address for p in entry.people if p.approves) if entry else ()


def every_approver(registry: Registry) -> tuple[str, ...]:
    return tuple(dict.fromkeys(a for name in sorted(registry.platforms) for a in approvers(registry, name)))


def digest_of(raw: bytes, envelope: tuple[str, ...]) -> str:
    """The SHA-256 a person's approval is bound to: every RCPT TO, then exactly the bytes that
    leave. Any change of either (a recipient added, a byte of an attachment) is another digest."""
    h = hashlib.sha256(b"agentmail approval 1\n%d\n" % len(envelope))
    for address in envelope:  # each one length-prefixed: no two envelopes read as one
        data = address.encode("utf-8", "surrogateescape")
        h.update(b"%d:%s\n" % (len(data), data))
    h.update(raw)
    return h.hexdigest()


def commits_of(patch: bytes) -> list[tuple[str, tuple[str, ...]]]:
    """The commits of a ``git format-patch`` file, read without git: each one's subject and every
    path ``git am`` could touch — both sides of ``diff --git a/OLD b/NEW``, the ``--- a/``/``+++ b/``
    headers of a diff without one, ``rename``/``copy from``/``to`` — so a patch never changes a
    path the announcement leaves out. A diff before any ``From <sha>`` line (a bare patch) is a
    commit too. Hostile bytes: never raises, every value one printable line."""
    commits: list[tuple[str, list[str]]] = []

    def touched(path: str) -> None:
        if not commits:
            commits.append(("", []))
        shown = visible(one_line(path))
        if shown and shown not in commits[-1][1]:
            commits[-1][1].append(shown)

    for raw_line in patch.decode("utf-8", "replace").splitlines():
        if raw_line.startswith("From ") and len(raw_line) > 45 and all(c in "0123456789abcdef" for c in raw_line[5:45]):
            commits.append(("", []))
        elif raw_line.startswith("Subject: ") and not (commits and (commits[-1][0] or commits[-1][1])):
            subject = raw_line[len("Subject: ") :].strip()
            if subject.startswith("[PATCH") and "]" in subject:
                subject = subject.partition("]")[2].strip()
            commits[-1:] = [(visible(one_line(subject)) or "(no subject)", commits[-1][1] if commits else [])]
        elif raw_line.startswith("diff --git "):
            rest = raw_line[len("diff --git ") :]
            old, sep, new = rest.rpartition(" b/")
            for path in (old.removeprefix("a/"), new) if sep else (rest,):
                touched(path)
        elif raw_line.startswith(("--- a/", "+++ b/")):
            touched(raw_line[6:].partition("\t")[0])
        elif raw_line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            touched(raw_line.split(" ", 2)[2])
    return [(subject or "(no subject)", tuple(paths)) for subject, paths in commits]


def attachments_of(raw: bytes) -> tuple[Attachment, ...]:
    """The attachments exactly as ``raw`` carries them (what would leave)."""
    try:
        return wire.body_and_attachments(wire.parse_message(raw, len(raw) + 1))[1]
    except wire.Malformed:
        return ()


def _listed(letter: Letter, envelope: tuple[str, ...], raw: bytes, digest: str) -> list[str]:
    """Every recipient and every attachment of the held letter, one short line each."""
    lines = [f"To: {one_line(a)}" for a in letter.recipients or (letter.to_address,)]
    lines += [f"Cc: {one_line(a)}" for a in letter.cc]
    lines.append("Delivered to: " + ", ".join(one_line(a) for a in envelope))
    attachments = attachments_of(raw)
    lines.append(f"Attachments: {len(attachments)}" if attachments else "Attachments: none")
    for item in attachments:
        lines.append(f"  {visible(one_line(item.name))} ({item.type}, {item.size} bytes)")
        lines.append(f"    SHA-256 {item.sha256}")
        if item.type == "text/x-diff" or item.name.endswith((".patch", ".diff")):
            for subject, paths in commits_of(item.data):
                lines.append(f"    commit: {subject}")
                lines += [f"      {path}" for path in paths]
    lines.append(f"Digest: {digest}")
    return lines


def announcement(
    registry: Registry, home: Path, platform: str, letter: Letter, reason: str, raw: bytes, envelope: tuple[str, ...]
) -> tuple[str, bytes]:
    """The announcement of a held letter to ``platform``'s approvers (its Message-ID, which
    their answer's In-Reply-To names, and its signed bytes): why it waits, every recipient of
    the envelope, every attachment (name, type, size, SHA-256; a patch's commits and paths),
    the digest the answer is bound to, the letter's whole body (as the agent wrote it, in lines
    a person's client shows unwrapped, each behind ``| `` so none of them reads as a line of the
    announcement), and how to answer."""
    about = [
        f"A letter from {platform} waits for your approval before it is sent.",
        f"Why it waits: {one_line(reason)}",
        "",
        f"Letter: {letter.id} (thread {letter.thread})",
        f"Subject: {quoted(letter.subject)}",
        f"Type: {letter.type}",
        *_listed(letter, envelope, raw, digest_of(raw, envelope)),
        "Any change to this letter or its recipients needs a new approval.",
    ]
    from .for_people import compose_for_people, wrap

    # A line holding text the agent or a partner chose (subject, attachment name, a commit's
    # subject or path) stays one line, its client wraps it on screen: cut at its spaces, a piece
    # would read as a line of the announcement ("  Attachments: none", "    SHA-256 ...").
    shown = [wrap(line) if line.startswith("Delivered to: ") else line for line in about]
    body = "\n".join(["\n".join(shown), "", framed(letter.body), "", "-- ", HOW_TO_ANSWER])
    subject = f"Approve? {quoted(letter.subject)} ({letter.id})"
    return compose_for_people(registry, home, platform, approvers(registry, platform), subject, body, as_written=True)


def hold_change(
    registry: Registry, home: Path, platform: str, before: list[str], after: list[str]
) -> tuple[str, bytes]:
    """The announcement of a change of the bus's ``hold`` rule to every approver."""
    from .for_people import compose_for_people

    def shown(rule: list[str]) -> str:
        return ", ".join(rule) if rule else "(none: nothing is held by rule)"

    body = (
        f"The bus's hold rule was changed from {platform}'s checkout.\n\n"
        f"Before: {shown(before)}\nNow:    {shown(after)}\n\n"
        "Nothing needs an answer; if you did not expect this, ask the operator.\n"
    )
    return compose_for_people(registry, home, platform, every_approver(registry), "The hold rule changed", body)


def change_request(
    registry: Registry, home: Path, platform: str, change: str, effect: str, to: tuple[str, ...]
) -> tuple[str, bytes]:
    """The announcement, to ``to`` (who decides it), of a change that would loosen what guards against
    the agent (``client/consent``): exactly what was asked, what it does, and that it takes
    effect only if one of them approves it."""
    from .for_people import compose_for_people

    body = (
        f"Someone asked, from {platform}'s checkout, to change what guards against the agent:\n\n"
        f"    {visible(one_line(change))}\n\n{one_line(effect)}\n\n"
        "It takes effect only if you approve it, and only exactly this change; nothing is changed meanwhile. "
        "If you did not expect it, reject it and ask the operator.\n\n-- \n" + HOW_TO_ANSWER
    )
    return compose_for_people(registry, home, platform, to, f"Approve? a change: {one_line(change)}"[:200], body)


def decision(body: str) -> tuple[str, str] | None:
    """``("approve", "")`` or ``("reject", REASON)`` from the first word of a reply's first
    written line (quoted lines skipped); None when the reply decides nothing."""
    for raw_line in body.splitlines():
        text = raw_line.strip()
        if not text or text.startswith(">"):
            continue
        word, _, rest = text.partition(" ")
        word = word.strip(".,:;!").lower()
        if word in ("approve", "approved"):
            return "approve", ""
        if word in ("reject", "rejected"):
            return "reject", one_line(rest).strip(" .,:;-") or "no reason given"
        return None
    return None


def _pin(registry: Registry) -> str | None:
    path = registry.root / PIN_FILE
    try:
        value = path.read_text(encoding="ascii").strip().lower()
    except (OSError, UnicodeDecodeError):
        return None
    return value if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else None


def _read_key(key_file: str) -> bytes:
    try:
        data = Path(key_file).expanduser().read_bytes()
    except OSError as exc:
        raise Refused(f"the approval key {key_file} cannot be read ({exc.strerror or exc})") from None
    if not data.strip():
        raise Refused(f"the approval key {key_file} is empty")
    return data.strip()


def check_key(registry: Registry, key_file: str | None) -> None:
    """Refused unless ``key_file`` holds the key whose SHA-256 the registry pins."""
    pin = _pin(registry)
    if key_file is None or pin is None:
        raise Refused(NO_KEY)
    digest = hashlib.sha256(_read_key(key_file)).hexdigest()
    if not hmac.compare_digest(digest, pin):
        raise Refused(f"{key_file} is not the approval key pinned in the registry")


NO_FIRST_KEY = (
    "no approval key is pinned on this bus, and an agent's command never pins the first one: the operator "
    "pins it with 'agentmail init --approval-key FILE' (on an existing bus: 'init --force NAME... --approval-key FILE')"
)


def _target(root: Path, key_file: str, home: Path) -> Path:
    target = Path(key_file).expanduser().resolve()
    if target.is_relative_to(home.resolve()) or target.is_relative_to(root.resolve()):
        raise BadInput(
            f"{target} is inside AGENTMAIL_HOME or the registry: keep the approval key where the agent cannot read it"
        )
    return target


def may_pin_first(root: Path, key_file: str, home: Path) -> None:
    """``init --approval-key``, checked before the bus is made: Refused when the registry at
    ``root`` pins a key already (replacing it needs the old one); BadInput for a place the
    agent could read."""
    if (root / PIN_FILE).exists():
        raise Refused("an approval key is pinned already: replace it with 'approve --new-key FILE --key-file OLD'")
    _target(root, key_file, home)
    bound.refuse_another(home, root)  # a key pinned in a registry of the agent's own would guard nothing


def may_replace(registry: Registry, key_file: str, home: Path, old_key: str | None) -> None:
    """``approve --new-key``: a key is pinned (only ``init`` pins the first), the new file is
    outside the agent's reach, and ``old_key`` is the pinned key."""
    if _pin(registry) is None:
        raise Refused(NO_FIRST_KEY)
    _target(registry.root, key_file, home)
    check_key(registry, old_key)


def first_key(registry: Registry, key_file: str, home: Path) -> Path:
    """``init --approval-key``: the bus's first approval key, written and pinned."""
    may_pin_first(registry.root, key_file, home)
    written = _write_key(registry, key_file, home)
    bound.check(home, registry)  # this registry's guards hold over the home's keys from now on
    return written


def new_key(registry: Registry, key_file: str, home: Path, old_key: str | None) -> Path:
    """Replace the pinned approval key: a fresh one written to ``key_file`` and pinned; needs
    the old one. With none pinned, Refused: only ``init`` pins the first (``first_key``)."""
    may_replace(registry, key_file, home, old_key)
    return _write_key(registry, key_file, home)


def _write_key(registry: Registry, key_file: str, home: Path) -> Path:
    """A fresh key in ``key_file`` (a new file, 0600, O_EXCL|O_NOFOLLOW), its SHA-256 pinned."""
    target = _target(registry.root, key_file, home)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise BadInput(f"{target} exists: name a new file") from None
    except OSError as exc:
        raise BadInput(f"{target} cannot be written ({exc.strerror or exc})") from None
    key = secrets.token_urlsafe(32).encode()
    with os.fdopen(fd, "wb") as out:
        out.write(key + b"\n")
    (registry.root / PIN_FILE).write_text(hashlib.sha256(key).hexdigest() + "\n", encoding="ascii")
    return target
