"""Hostile mail, generated (issue 9 §4): mutate real signed letters, and sign hostile content
validly, then sync them between genuine letters on both transports. Over every example:

- nothing escapes: ``sync`` returns, and no letter is an internal error (an unexpected
  exception class is a bug to fix, even though the per-letter boundary contains it);
- conservation: accepted + quarantined + duplicates + bounces + skipped == fetched, every
  fetched letter is committed (the next sync fetches nothing), and the genuine letters around
  the hostile one arrive unaltered;
- integrity: a letter that is accepted shows what its sender signed: its body exactly (the body
  is signed with simple canonicalization), its headers modulo the whitespace relaxed header
  canonicalization does not sign. Mutations of the MIME headers are left to
  the MIME-integrity properties: here they must only never escape.

Derandomized and database-free, so CI runs the same examples every time; what the fuzzer
once found is kept below as explicit examples.
"""

from __future__ import annotations

import base64
import os
import quopri
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email import policy
from email.header import Header
from email.parser import BytesParser
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.client.facade import AgentMail, SyncReport
from agentmail.config.credentials import read_private_key
from agentmail.config.identity import Identity
from agentmail.model import Letter, new_thread_id
from agentmail.stages.compose import Draft, compose
from agentmail.transport.local import deliver
from agentmail.trust import signing

from ..depth import examples, suppressed
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import USERS, make_bus

# AGENTMAIL_FUZZ_SCALE=20 explores: 20x the examples, random rather than derandomized.
SCALE = int(os.environ.get("AGENTMAIL_FUZZ_SCALE", "1"))
FUZZ = settings(
    deadline=None,
    derandomize=SCALE == 1,
    database=None,
    print_blob=SCALE > 1,
    suppress_health_check=suppressed(
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ),
)

# --- the mailboxes --------------------------------------------------------------------------


@dataclass
class Bus:
    """alpha signs, beta receives; ``drop`` puts raw bytes in beta's mailbox on this transport."""

    alpha: AgentMail
    beta: AgentMail
    drop: Callable[[bytes, str], None]  # (raw, envelope recipient)


@pytest.fixture(scope="module")
def local_bus(tmp_path_factory: pytest.TempPathFactory) -> Bus:
    home = tmp_path_factory.mktemp("fuzz-local")
    reg = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    return Bus(
        AgentMail(reg, Identity("alpha"), home),
        AgentMail(reg, Identity("beta"), home),
        lambda raw, _rcpt: (deliver(home / "postoffice" / "beta", raw), None)[1],
    )


# Per test, not per module: its servers and the clients' sessions are torn down inside the test
# that started them, so the per-test leak check sees a test leave the process as it found it.
@pytest.fixture
def imap_bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bus]:
    home = tmp_path_factory.mktemp("fuzz-imap")
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as servers:
        reg = make_bus(home, servers)
        with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
            yield Bus(alpha, beta, lambda raw, rcpt: (servers.store.deliver(rcpt, raw), None)[1])


@pytest.fixture(params=["local", "imap"])
def mail(request: pytest.FixtureRequest) -> Bus:
    found: Bus = request.getfixturevalue(f"{request.param}_bus")
    return found


# --- genuine letters ------------------------------------------------------------------------

KINDS = ("report", "reply", "note", "long", "human-ish")


def genuine(sender: AgentMail, kind: str, label: str, answering: Letter | None = None) -> tuple[Letter, bytes, str]:
    """A fresh signed letter (Letter as composed, raw, envelope recipient) of one of KINDS;
    ``answering``: a reply into that letter's thread, answering it (filed before it, so the
    reply does not wait for its letter: stages/route.py ``awaiting-parent``)."""
    to = sender.registry.get("beta")
    thread = answering.thread if answering is not None else new_thread_id()
    body = f"{label}: the /quota endpoint returns 500 since 2.4.1.\nSteps: curl -s beta/quota?id=7\n"
    options: dict[str, Any] = {}
    if kind == "report":
        options = {"severity": "high", "ref": "tokengate#12"}
    elif kind == "reply" and answering is not None:
        options = {"in_reply_to": answering.message_id, "references": ("<01root.beta@bus.test>", answering.message_id)}
    elif kind == "reply":
        options = {
            "in_reply_to": "<01parent.beta@bus.test>",
            "references": ("<01root.beta@bus.test>", "<01parent.beta@bus.test>"),
        }
    elif kind == "note":
        options = {"to_agent": "tester"}
    elif kind == "long":
        body = "Überprüfung — naïve café ✓\n" + ("x" * 1200) + "\n\tindented\n"
    type_ = {"reply": "ack", "note": "note", "human-ish": "question"}.get(kind, "report")
    letter, raw = compose(
        sender.registry,
        sender.home,
        sender.me.platform,
        Draft(to.name, type_, thread, f"{label} {kind} Quota 500s", body, **options),
    )
    return letter, raw, f"beta+{thread}@bus.test"


def _canon(text: str) -> str:
    """What relaxed header canonicalization signs of a text (whitespace runs as one space, none
    at line ends), without the whitespace around the whole text, which agentmail strips."""
    lines = [re.sub(r"[ \t]+", " ", line).rstrip(" ") for line in text.replace("\r\n", "\n").split("\n")]
    return "\n".join(lines).strip()


def shown(letter: Letter) -> tuple[object, ...]:
    return (
        letter.message_id,
        letter.sender_address,
        letter.type,
        letter.thread,
        _canon(letter.subject),
        letter.body.replace("\r\n", "\n").strip(),
        letter.severity,
        letter.ref,
        letter.to_agent,
        letter.in_reply_to,
        tuple(letter.references),
    )


_PARSER = BytesParser(policy=policy.compat32)


def _mime_headers(raw: bytes) -> list[tuple[str, str]] | None:
    try:
        msg = _PARSER.parsebytes(raw, headersonly=True)
        return [
            (k.lower(), " ".join(str(v).split())) for k, v in msg.items() if k.lower().startswith(("content-", "mime-"))
        ]
    except Exception:
        return None


# --- mutations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutation:
    """One edit of a letter's bytes. ``index`` picks the place (modulo what there is), ``data``
    is what goes there; ``kind`` says how to read both. Plain values, so @example can keep one."""

    kind: str
    index: int = 0
    data: bytes = b""
    cut: int = 0


def _lines(raw: bytes) -> tuple[list[bytes], bytes]:
    """(header lines with their endings, the rest from the blank line on)."""
    end = re.search(rb"\r?\n\r?\n", raw)
    head, rest = (raw, b"") if end is None else (raw[: end.start()], raw[end.start() :])
    return re.findall(rb"[^\n]*\n|[^\n]+$", head), rest


def _fields(lines: list[bytes]) -> list[int]:
    return [i for i, line in enumerate(lines) if line[:1] not in (b" ", b"\t")]


def _set_header(raw: bytes, name: bytes, value: bytes) -> bytes:
    """``raw`` with every ``name`` field (and its continuation lines) replaced by one at the end."""
    lines, rest = _lines(raw)
    kept: list[bytes] = []
    dropping = False
    for line in lines:
        if line[:1] not in (b" ", b"\t"):
            dropping = line.lower().startswith(name.lower() + b":")
        if not dropping:
            kept.append(line)
    head = b"".join(kept)
    if head and not head.endswith(b"\n"):
        head += b"\r\n"
    return head + name + b": " + value + (rest if rest.startswith((b"\r\n", b"\n")) else b"\r\n" + rest)


def _reencode(raw: bytes, how: int) -> bytes:
    """The body decoded from quoted-printable if it was, encoded again another way (CTE set to match)."""
    lines, rest = _lines(raw)
    body = re.sub(rb"\A\r?\n\r?\n", b"", rest)
    if re.search(rb"(?im)^content-transfer-encoding:\s*quoted-printable", b"".join(lines)):
        body = quopri.decodestring(body)
    name, encoded = [
        (b"base64", base64.encodebytes(body).replace(b"\n", b"\r\n")),
        (b"quoted-printable", quopri.encodestring(body)),
        (b"8bit", body),
    ][how % 3]
    return _set_header(b"".join(lines), b"Content-Transfer-Encoding", name) + b"\r\n" + encoded


def mutate(raw: bytes, m: Mutation) -> bytes:
    lines, rest = _lines(raw)
    fields = _fields(lines)
    if m.kind == "bytes":
        at = m.index % (len(raw) + 1)
        return raw[:at] + m.data + raw[at + m.cut :]
    if not fields or not lines:
        return raw + m.data  # nothing left to aim at (an earlier edit truncated it): just append
    if m.kind in ("header-name", "header-value"):
        i = fields[m.index % len(fields)]
        name, colon, value = lines[i].partition(b":")
        lines[i] = (m.data + colon + value) if m.kind == "header-name" else (name + b": " + m.data + b"\r\n")
        return b"".join(lines) + rest
    if m.kind == "add-header":
        i = fields[m.index % len(fields)] if m.index >= 0 else len(lines)
        return b"".join(lines[:i]) + m.data + b"\r\n" + b"".join(lines[i:]) + rest
    if m.kind == "fold":
        head = b"".join(lines)
        at = m.index % (len(head) + 1)
        return head[:at] + (m.data or b"\r\n ") + head[at + m.cut :] + rest
    if m.kind == "dkim-tag":
        sig = re.search(rb"(?msi)^DKIM-Signature:.*?(?=\r?\n[^ \t]|\Z)", raw)
        tags = list(re.finditer(rb"(?<=[;:\s])([a-z]{1,2})=", sig.group())) if sig else []
        if sig is None or not tags:
            return raw + m.data
        at = sig.start() + tags[m.index % len(tags)].end() + m.cut % 3
        return raw[:at] + m.data + raw[at:]
    if m.kind == "mime":
        name = (b"Content-Type", b"Content-Transfer-Encoding", b"MIME-Version", b"Content-Disposition")[m.index % 4]
        return _set_header(raw, name, m.data)
    if m.kind == "reencode":
        return _reencode(raw, m.index)
    if m.kind == "truncate":
        return raw[: m.index % (len(raw) + 1)]
    if m.kind == "line-endings":
        head, body = b"".join(lines), rest
        return [
            raw.replace(b"\r\n", b"\n"),
            raw.replace(b"\r\n", b"\r"),
            head.replace(b"\r\n", b"\n") + body,
            head + body.replace(b"\r\n", b"\n"),
            raw.replace(b"\r\n", b"\n", m.cut % 20 + 1),
            raw.replace(b"\r\n", b"\r\r\n"),
            raw + b"\r\n" * (m.cut % 5 + 1),
            raw.replace(b"\n", b"\r\n"),
        ][m.index % 8]
    raise AssertionError(m.kind)


HOSTILE = [
    b"\x00",
    b"\x01",
    b"\x7f",
    b"\x80",
    b"\xe9",
    b"\xc3\xa9",
    b"\xff",
    b"\r",
    b"\n",
    b"\r\n",
    b"\r\n ",
    b"\t",
    b" ",
    b":",
    b";",
    b"=",
    b"<",
    b">",
    b"@",
    b'"',
    b"(",
    b"=?",
    b"?=",
    b"=?utf-8?b?",
    b"=?x-bogus?q?a?=",
    b"--- agentmail v1 ---",
    b"--- end agentmail ---",
    b"\r\n\r\n",
    b"\xef\xbb\xbf",
]
hostile_bytes = st.lists(st.one_of(st.sampled_from(HOSTILE), st.binary(min_size=1, max_size=6)), max_size=4).map(
    b"".join
)
header_names = st.one_of(
    st.sampled_from(
        [
            b"X-\x01Bad",
            b"X-\xffBad",
            b"",
            b" Lead",
            b"Sub ject",
            b"From",
            b"Message-ID",
            b"Content-Type",
            b"DKIM-Signature",
            b"\xe9",
        ]
    ),
    hostile_bytes,
)
added_headers = st.one_of(
    st.sampled_from(
        [
            b"From: mallory@evil.test",
            b"Subject: injected",
            b"Message-ID: <01other.alpha@bus.test>",
            b"Auto-Submitted: auto-replied",
            b"Precedence: bulk",
            b"Delivered-To: beta+thr-zzzzzz999@bus.test",
            b"Authentication-Results: mx.bus.test; dkim=fail header.d=bus.test",
            b"Authentication-Results: \xe9; dkim=pass",
            b"DKIM-Signature: v=1; a=ed25519-sha256; d=bus.test; s=x; h=from; bh=\xe9AAA; b=AAAA",
            b'Content-Type: multipart/mixed; boundary="b"',
            b"Received: from x\r\n" * 60,
            b"X-Agentmail-Type: close",
        ]
    ),
    hostile_bytes.map(lambda v: b"X-Junk: " + v),
)
mime_values = st.one_of(
    st.sampled_from(
        [
            b"text/plain; charset=latin-1",
            b"text/plain; charset=x-bogus",
            b'text/plain; charset="utf-16"',
            b"text/html; charset=utf-8",
            b'multipart/mixed; boundary="zz"',
            b"multipart/alternative",
            b"message/rfc822",
            b"application/octet-stream",
            b"base64",
            b"quoted-printable",
            b"x-uuencode",
            b"8bit",
            b"1.0",
            b"attachment",
            b"text/plain; charset=utf-8; format=flowed; delsp=yes",
        ]
    ),
    hostile_bytes,
)

mutations = st.one_of(
    st.builds(Mutation, st.just("bytes"), st.integers(0, 4000), hostile_bytes, st.integers(0, 3)),
    st.builds(Mutation, st.just("header-name"), st.integers(0, 30), header_names),
    st.builds(Mutation, st.just("header-value"), st.integers(0, 30), hostile_bytes),
    st.builds(Mutation, st.just("add-header"), st.integers(-1, 30), added_headers),
    st.builds(
        Mutation,
        st.just("fold"),
        st.integers(0, 1500),
        st.sampled_from([b"\r\n ", b"\r\n\t", b"\n ", b"\r\n", b" "]),
        st.integers(0, 2),
    ),
    st.builds(Mutation, st.just("dkim-tag"), st.integers(0, 20), hostile_bytes, st.integers(0, 2)),
    st.builds(Mutation, st.just("mime"), st.integers(0, 3), mime_values),
    st.builds(Mutation, st.just("reencode"), st.integers(0, 2)),
    st.builds(Mutation, st.just("truncate"), st.integers(0, 4000)),
    st.builds(Mutation, st.just("line-endings"), st.integers(0, 7), st.just(b""), st.integers(0, 30)),
)


# --- the invariants -------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """A hostile letter in the mailbox: its bytes, the envelope recipient, the Message-ID its
    sender gave it, and the Letter an honest reading must show if it is accepted (None: this
    module does not judge its integrity)."""

    raw: bytes
    rcpt: str
    message_id: str
    signed: Letter | None


def check_sync(mail: Bus, hostile: list[Sent], label: str) -> SyncReport:
    """Sync ``hostile`` between two genuine letters and assert the invariants of this module."""
    first, first_raw, first_rcpt = genuine(mail.alpha, "report", f"{label} before")
    last, last_raw, last_rcpt = genuine(mail.alpha, "reply", f"{label} after", answering=first)
    mail.drop(first_raw, first_rcpt)
    for sent in hostile:
        mail.drop(sent.raw, sent.rcpt)
    mail.drop(last_raw, last_rcpt)
    report = mail.beta.sync()  # nothing escapes: an exception here fails the example
    data = report.to_json()
    assert data["internal_errors"] == 0, [q.detail for q in report.quarantined]
    assert data["fetched"] == len(hostile) + 2
    assert data["fetched"] == sum(data[k] for k in ("accepted", "quarantined", "duplicates", "bounces", "skipped"))
    accepted = {x.message_id: x for x in report.accepted}
    for genuine_letter in (first, last):
        assert shown(accepted.pop(genuine_letter.message_id)) == shown(genuine_letter)
    signed = {sent.message_id: sent.signed for sent in hostile}
    for mid, letter in accepted.items():
        assert mid in signed, f"an accepted letter nobody signed: {mid}"
        expected = signed[mid]
        if expected is not None:
            assert shown(letter) == shown(expected), "an accepted letter shows what its sender did not sign"
    assert mail.beta.sync().fetched == 0  # everything fetched was committed
    return report


@settings(FUZZ, max_examples=examples(120) * SCALE)
@given(kind=st.sampled_from(KINDS), edits=st.lists(mutations, min_size=1, max_size=3))
@example(kind="report", edits=[Mutation("dkim-tag", 9, b"\xe9")])  # bh=: binascii.Error from dkimpy
@example(kind="report", edits=[Mutation("header-name", 3, b"X-\x01Bad")])  # dkim.MessageFormatError
@example(kind="report", edits=[Mutation("header-name", 3, b"X-\xffBad")])
@example(kind="report", edits=[Mutation("bytes", 0, b" ")])  # a continuation first: IndexError in dkimpy
@example(kind="report", edits=[Mutation("dkim-tag", 10, b";", 2)])  # b= cut short: PyNaCl ValueError
@example(kind="report", edits=[Mutation("bytes", 74, b"", 1)])  # i=@bus.test -> i=bus.test: IndexError in dkimpy
@example(
    kind="report", edits=[Mutation("header-name", 5, b"not a header\r\nSubject")]
)  # dkimpy refuses, email starts the body
def test_mutated_signed_letters(mail: Bus, kind: str, edits: list[Mutation]) -> None:
    letter, raw, rcpt = genuine(mail.alpha, kind, "mutated")
    mutant = raw
    for edit in edits:
        mutant = mutate(mutant, edit)
    same_mime = _mime_headers(mutant) == _mime_headers(raw)
    check_sync(mail, [Sent(mutant, rcpt, letter.message_id, letter if same_mime else None)], "mutated")


@settings(FUZZ, max_examples=examples(40) * SCALE)
@given(batch=st.lists(st.tuples(st.sampled_from(KINDS), mutations), min_size=2, max_size=6))
def test_many_hostile_letters_in_one_sync(mail: Bus, batch: list[tuple[str, Mutation]]) -> None:
    sent = []
    for kind, edit in batch:
        letter, raw, rcpt = genuine(mail.alpha, kind, "batch")
        mutant = mutate(raw, edit)
        sent.append(
            Sent(mutant, rcpt, letter.message_id, letter if _mime_headers(mutant) == _mime_headers(raw) else None)
        )
    check_sync(mail, sent, "batch")


def test_the_mutations_reach_every_verdict(local_bus: Bus) -> None:
    """The fuzzer is worth something only if its letters get past each stage: a sample of its
    mutations lands in accepted and in quarantine for several reasons."""
    reasons: set[str] = set()
    accepted = 0

    @settings(FUZZ, max_examples=examples(60) * SCALE)
    @given(kind=st.sampled_from(KINDS), edit=mutations)
    def sample(kind: str, edit: Mutation) -> None:
        nonlocal accepted
        letter, raw, rcpt = genuine(local_bus.alpha, kind, "reach")
        report = check_sync(local_bus, [Sent(mutate(raw, edit), rcpt, letter.message_id, None)], "reach")
        accepted += len(report.accepted) - 2
        reasons.update(q.reason or "" for q in report.quarantined)

    sample()
    assert accepted > 0
    assert {"malformed", "unauthenticated"} <= reasons


# --- hostile content, validly signed --------------------------------------------------------


@dataclass(frozen=True)
class Hostile:
    """A letter alpha really signs, built by hand instead of by wire.render: every value is
    what a compromised or buggy sender could put there. ``block`` None: no front matter;
    "HONEST": the block a genuine letter of this thread carries."""

    subject: str
    body: str
    block: str | None
    subject_raw: bool = False  # the subject's UTF-8 bytes unencoded (8-bit), not RFC 2047
    charset: str = "utf-8"
    cte: str = "8bit"
    extra: bytes = b""  # more header lines, signed too


def sign_hostile(alpha: AgentMail, h: Hostile) -> Sent:
    thread = new_thread_id()
    mid = f"<{thread[4:]}.hostile.alpha@bus.test>"
    block = f"type: report\nthread: {thread}" if h.block == "HONEST" else h.block
    subject = h.subject.encode() if h.subject_raw else Header(h.subject, "utf-8").encode(linesep="\r\n").encode()
    text = (f"--- agentmail v1 ---\n{block}\n--- end agentmail ---\n\n" if block is not None else "") + h.body
    try:
        payload = text.encode(h.charset)
    except (UnicodeError, LookupError):
        payload = text.encode()
    payload = payload.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    body = {
        "base64": base64.encodebytes(payload).replace(b"\n", b"\r\n"),
        "quoted-printable": quopri.encodestring(payload),
    }.get(h.cte, payload)
    head = (
        b"From: Alpha <alpha@bus.test>\r\nTo: beta+"
        + thread.encode()
        + b"@bus.test\r\nSubject: "
        + subject
        + b"\r\nDate: Tue, 01 Dec 2026 01:00:00 +0000\r\nMessage-ID: "
        + mid.encode()
        + b"\r\nAuto-Submitted: auto-generated\r\nX-Agentmail-Type: report\r\nX-Agentmail-Thread: "
        + thread.encode()
        + b'\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset="'
        + h.charset.encode()
        + b'"\r\nContent-Transfer-Encoding: '
        + h.cte.encode()
        + b"\r\n"
        + h.extra
    )
    try:
        raw = signing.sign(
            head + b"\r\n" + body, "bus.test", alpha.platform.selector, read_private_key(alpha.home, "alpha")
        )
    except Exception:
        assume(False)  # not even a hostile sender's signer can sign these bytes
        raise
    honest = (
        h.block == "HONEST"
        and not h.subject_raw
        and h.charset == "utf-8"
        and h.cte in ("8bit", "base64", "quoted-printable")
        and not h.extra
        and h.subject.isprintable()
        and h.subject == h.subject.strip()
        and h.body.replace("\n", "").replace("\t", "").isprintable()
        and not h.body.startswith("--- agentmail")
    )
    expected = Letter(
        message_id=mid,
        sender="alpha",
        sender_address="alpha@bus.test",
        to="beta",
        to_address="beta@bus.test",
        type="report",
        thread=thread,
        subject=h.subject,
        body=h.body.strip("\n"),
        date="",
    )
    return Sent(raw, f"beta+{thread}@bus.test", mid, expected if honest else None)


BLOCKS = [
    None,
    "HONEST",
    "type: report",
    "type: report\nthread: thr-aaaaaa",
    "type: &a report\nthread: *a",
    "type: !!python/object x",
    "type: report\ntype: close",
    "type: report\nevil: 1",
    "type: {a: b}",
    "type: [report]",
    "type: report\nseverity: yes",
    "type: ack\nto-agent: ../../etc",
    "type: report\nref: \x1b[31m",
    "? complex\n: key",
    "type: 'report'",
    "type: report\nref: " + "x" * 5000,
    "type: report\nthread: thr-aaaaaa\n--- agentmail v1 ---",
]
hostile_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=80)


@st.composite
def _anything(draw: st.DrawFn) -> Hostile:
    return Hostile(
        subject=draw(
            st.one_of(hostile_text, st.sampled_from(["=?utf-8?b?AAEC?=", "=?bogus?q?x?=", "a\x1bb", " pad "]))
        ),
        body=draw(
            st.one_of(hostile_text, st.sampled_from(["", "\n\n", "--- end agentmail ---\nrest", "\r\rx", "a\x00b"]))
        ),
        block=draw(st.one_of(st.sampled_from(BLOCKS), hostile_text)),
        subject_raw=draw(st.booleans()),
        charset=draw(st.sampled_from(["utf-8", "utf-8", "latin-1", "utf-16", "x-bogus", "ascii"])),
        cte=draw(st.sampled_from(["8bit", "base64", "quoted-printable", "7bit", "x-bogus"])),
        extra=draw(
            st.sampled_from(
                [
                    b"",
                    b"",
                    b"X-Agentmail-Type: close\r\n",
                    b"In-Reply-To: <\xe9@x>\r\n",
                    b"References: " + b"<a@b> " * 500 + b"\r\n",
                    b"Precedence: list\r\n",
                ]
            )
        ),
    )


# Well formed but for the text, which is any Unicode: these are accepted, so integrity is checked.
def _printable(also: str) -> st.SearchStrategy[str]:
    return st.characters(
        codec="utf-8", exclude_categories=["Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"], include_characters=also
    )


_well_formed = st.builds(
    Hostile,
    subject=st.text(_printable(" "), max_size=60).map(str.strip),
    body=st.text(_printable(" \n\t"), max_size=200),
    block=st.just("HONEST"),
    cte=st.sampled_from(["8bit", "base64", "quoted-printable"]),
)
hostile_letters = st.one_of(_well_formed, _anything())


@settings(FUZZ, max_examples=examples(100) * SCALE)
@given(hostile=hostile_letters)
@example(hostile=Hostile(subject="Quota", body="see below\n", block="HONEST"))
@example(hostile=Hostile(subject="x", body="y", block="type: &a report\nthread: *a"))
def test_hostile_but_validly_signed_letters(mail: Bus, hostile: Hostile) -> None:
    check_sync(mail, [sign_hostile(mail.alpha, hostile)], "hostile")


def test_hostile_letters_are_accepted_often_enough_to_check_integrity(local_bus: Bus) -> None:
    """Integrity is only checked on accepted letters: a fair share of the signed ones must be."""
    checked = 0

    @settings(FUZZ, max_examples=40)  # a share of 40: never fewer
    @given(hostile=hostile_letters)
    def sample(hostile: Hostile) -> None:
        nonlocal checked
        sent = sign_hostile(local_bus.alpha, hostile)
        report = check_sync(local_bus, [sent], "share")
        checked += sent.signed is not None and any(x.message_id == sent.message_id for x in report.accepted)

    sample()
    assert checked >= 3
