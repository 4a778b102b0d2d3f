"""Signed bytes mean what the sender signed (issue 9 §2): a relay that re-declares a genuine
letter's charset, transfer encoding or MIME structure either changes nothing the agent sees or
gets the letter quarantined. Every case runs through the real sync path (local post office);
one sweep runs through the in-process IMAP server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import dkim
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail import text
from agentmail.client.facade import AgentMail
from agentmail.config.credentials import read_private_key
from agentmail.config.identity import Identity
from agentmail.letter import wire
from agentmail.model import new_thread_id
from agentmail.stages.compose import Draft, compose
from agentmail.transport.local import deliver
from agentmail.trust import authenticity

from ..depth import examples, suppressed
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import make_bus, servers  # noqa: F401  (the fixture)

# Genuine bodies that read differently under another charset, encoding or structure.
BODIES = {
    "utf-7": "Run +ADw-script+AD4-alert(1)+ADw-/script+AD4- and see.",
    "qp-lookalike": "Set limit =3D 5, not =3D3D; caf=C3=A9 is not cafe.",
    "boundary-line": "before\n--b1\nContent-Type: text/plain; charset=utf-7\n\n+ADw-hidden+AD4-\n--b1--\nafter",
    "soft-breaks": "ends with an equals sign =\nand =\n\nthen a line = \nlast",
    "non-ascii": "Größe — naïve café ✓ 日本語\n--b1\n+ADw-",
    "long-line": "word =3D " * 200,
    "whitespace": "def f():\n\tif x:\n        return 1   \n\t\tdone",
    "base64-ish": "SGVsbG8gd29ybGQ=\nQUJDREVG",
}


def _head_body(raw: bytes) -> tuple[bytes, bytes]:
    end = raw.index(b"\r\n\r\n")
    return raw[: end + 2], raw[end + 2 :]


def set_header(name: str, value: str) -> Callable[[bytes], bytes]:
    """Replace the value of ``name`` (every line of it, folded or not)."""

    def mutate(raw: bytes) -> bytes:
        head, body = _head_body(raw)
        pattern = re.compile(rb"^" + re.escape(name.encode()) + rb":[^\r\n]*\r\n(?:[ \t][^\r\n]*\r\n)*", re.I | re.M)
        return pattern.sub(lambda _: f"{name}: {value}\r\n".encode(), head, count=1) + body

    return mutate


def drop(*names: str) -> Callable[[bytes], bytes]:
    def mutate(raw: bytes) -> bytes:
        head, body = _head_body(raw)
        for name in names:
            head = re.sub(
                rb"^" + re.escape(name.encode()) + rb":[^\r\n]*\r\n(?:[ \t][^\r\n]*\r\n)*", b"", head, flags=re.I | re.M
            )
        return head + body

    return mutate


def add(line: str, where: str = "above") -> Callable[[bytes], bytes]:
    """Add a header line above every signed header (what a parser reads first) or at the bottom."""

    def mutate(raw: bytes) -> bytes:
        head, body = _head_body(raw)
        if where == "above":
            at = head.index(b"\r\nFrom:") + 2
            return head[:at] + line.encode() + b"\r\n" + head[at:] + body
        return head + line.encode() + b"\r\n" + body

    return mutate


def rename(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    def mutate(raw: bytes) -> bytes:
        head, body = _head_body(raw)
        return head.replace(old, new, 1) + body

    return mutate


MUTATIONS: dict[str, Callable[[bytes], bytes]] = {
    "charset utf-7": set_header("Content-Type", "text/plain; charset=utf-7"),
    "charset iso-8859-1": set_header("Content-Type", "text/plain; charset=iso-8859-1"),
    "charset us-ascii": set_header("Content-Type", "text/plain; charset=us-ascii"),
    "cte quoted-printable": set_header("Content-Transfer-Encoding", "quoted-printable"),
    "cte base64": set_header("Content-Transfer-Encoding", "base64"),
    "cte 8bit": set_header("Content-Transfer-Encoding", "8bit"),
    "cte 7bit": set_header("Content-Transfer-Encoding", "7bit"),
    "cte binary": set_header("Content-Transfer-Encoding", "binary"),
    "second content-type above": add("Content-Type: text/plain; charset=utf-7"),
    "second content-type below": add("Content-Type: text/plain; charset=utf-7", "below"),
    "same content-type twice": add('Content-Type: text/plain; charset="utf-8"'),
    "second cte above": add("Content-Transfer-Encoding: base64"),
    "second cte below": add("Content-Transfer-Encoding: quoted-printable", "below"),
    "second mime-version": add("MIME-Version: 1.0"),
    "content-type with a space before the colon": add("Content-Type : text/plain; charset=utf-7"),
    "multipart, boundary = a body line": set_header("Content-Type", 'multipart/mixed; boundary="b1"'),
    "multipart/alternative": set_header("Content-Type", "multipart/alternative; boundary=b1"),
    "message/rfc822": set_header("Content-Type", "message/rfc822"),
    "text/html": set_header("Content-Type", 'text/html; charset="utf-8"'),
    "charset twice": set_header("Content-Type", 'text/plain; charset="utf-8"; charset=utf-7'),
    "rfc 2231 charset": set_header("Content-Type", "text/plain; charset*=utf-7''"),
    "comment in content-type": set_header("Content-Type", 'text/plain; charset="utf-8" (utf-7)'),
    "mime-version 2.0": set_header("MIME-Version", "2.0"),
    "no mime-version": drop("MIME-Version"),
    "no content-type": drop("Content-Type"),
    "no cte": drop("Content-Transfer-Encoding"),
    "no mime headers": drop("MIME-Version", "Content-Type", "Content-Transfer-Encoding"),
    "added content-disposition": add("Content-Disposition: attachment; filename=x.txt", "below"),
    # benign: relaxed header canonicalisation reads these as the signed header, and so must we
    "header name case": rename(b"Content-Type:", b"content-type:"),
    "refolded content-type": rename(
        b'Content-Type: text/plain; charset="utf-8"', b'Content-Type: text/plain;\r\n charset="utf-8"'
    ),
}


def genuine(sender: AgentMail, body: str) -> bytes:
    """A letter exactly as ``sender`` writes and signs it."""
    recipient = sender.registry.get("beta")
    _letter, raw = compose(
        sender.registry,
        sender.home,
        sender.me.platform,
        Draft(recipient.name, "question", new_thread_id(), "Tricky body", body),
    )
    return raw


def shown_or_quarantined(beta: AgentMail, raw: bytes) -> tuple[str, str]:
    """("accepted", the text the agent sees) or ("quarantined", reason: detail), via a real sync."""
    deliver(beta.home / "postoffice" / "beta", raw)
    report = beta.sync()
    assert len(report.accepted) + len(report.quarantined) == 1, report.to_json()
    if report.accepted:
        return "accepted", report.accepted[0].body
    letter = report.quarantined[0]
    return "quarantined", f"{letter.reason}: {letter.detail}"


@pytest.mark.parametrize("body_name", sorted(BODIES))
def test_a_genuine_tricky_letter_shows_exactly_what_was_signed(
    alpha: AgentMail, beta: AgentMail, body_name: str
) -> None:
    raw = genuine(alpha, BODIES[body_name])
    assert shown_or_quarantined(beta, raw) == ("accepted", BODIES[body_name].strip())


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("body_name", sorted(BODIES))
def test_a_changed_mime_header_changes_nothing_shown_or_quarantines(
    alpha: AgentMail, beta: AgentMail, body_name: str, mutation: str
) -> None:
    raw = genuine(alpha, BODIES[body_name])
    mutated = MUTATIONS[mutation](raw)
    outcome, what = shown_or_quarantined(beta, mutated)
    if outcome == "accepted":
        assert what == BODIES[body_name].strip(), f"{mutation} changed what the agent sees"
        assert mutation in ("header name case", "refolded content-type") or mutated == raw, mutation
    else:
        assert what.startswith(("unauthenticated: ", "malformed: ")), what
        # and the genuine copy, arriving later, is not blocked by the altered one
        assert shown_or_quarantined(beta, raw) == ("accepted", BODIES[body_name].strip())


@pytest.mark.parametrize(
    "line,header",
    [
        ("Content-Type: text/plain; charset=utf-7", "2 Content-Type headers"),
        ("Content-Transfer-Encoding: base64", "2 Content-Transfer-Encoding headers"),
        ("MIME-Version: 1.0", "2 MIME-Version headers"),
        ("Content-Type : text/plain; charset=utf-7", "2 Content-Type headers"),
    ],
)
def test_a_duplicated_mime_header_is_unauthenticated_and_named(
    alpha: AgentMail, beta: AgentMail, line: str, header: str
) -> None:
    outcome, what = shown_or_quarantined(beta, add(line)(genuine(alpha, BODIES["utf-7"])))
    assert outcome == "quarantined" and what.startswith("unauthenticated: ") and header in what, what


def test_an_unsigned_extra_mime_header_is_unauthenticated_and_named(alpha: AgentMail, beta: AgentMail) -> None:
    mutated = MUTATIONS["added content-disposition"](genuine(alpha, BODIES["utf-7"]))
    outcome, what = shown_or_quarantined(beta, mutated)
    assert outcome == "quarantined" and what == (
        "unauthenticated: no valid signature by alpha's pinned key: "
        "the signature does not cover the content-disposition header"
    )


def old_version_letter(sender: AgentMail, body: str) -> bytes:
    """A letter as agentmail signed it before MIME headers were signed: same rendering, the old
    header list (each name twice), relaxed/relaxed, the same pinned key."""
    old = (
        "From",
        "To",
        "Subject",
        "Date",
        "Message-ID",
        "In-Reply-To",
        "References",
        "Auto-Submitted",
        "X-Agentmail-Type",
        "X-Agentmail-Thread",
    )
    recipient = sender.registry.get("beta")
    outline = wire.draft_letter(
        sender.platform.address,
        sender.platform.display_name,
        recipient.address,
        "question",
        new_thread_id(),
        "Old sender",
        body,
        message_id=wire.new_message_id("alpha", "bus.test"),
    )
    unsigned = wire.render(outline)
    header: bytes = dkim.sign(
        unsigned,
        sender.platform.selector.encode(),
        sender.platform.dkim_domain.encode(),
        read_private_key(sender.home, "alpha").encode(),
        signature_algorithm=b"ed25519-sha256",
        canonicalize=(b"relaxed", b"relaxed"),
        include_headers=[h.lower().encode() for h in old for _ in (0, 1)],
        linesep=b"\r\n",
    )
    return header + unsigned


def test_a_letter_from_an_older_agentmail_is_quarantined_saying_so(alpha: AgentMail, beta: AgentMail) -> None:
    raw = old_version_letter(alpha, BODIES["utf-7"])
    assert b"h=from:from:to:to:" in raw.replace(b"\r\n ", b"").replace(b" ", b"")  # really the old list
    outcome, what = shown_or_quarantined(beta, raw)
    assert outcome == "quarantined" and what.startswith("unauthenticated: "), what
    assert "does not cover the MIME headers" in what and "agentmail is too old and must be upgraded" in what


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.replace(b"\tif x:", b"    if x:"),  # a tab re-indented
        lambda r: r.replace(b"return 1   \r\n", b"return 1\r\n"),  # trailing white space dropped
        lambda r: r.replace(b"def f():", b"def  f():"),  # a run of spaces widened
    ],
)
def test_white_space_in_the_body_is_signed_exactly(alpha: AgentMail, beta: AgentMail, change) -> None:  # type: ignore[no-untyped-def]
    raw = genuine(alpha, BODIES["whitespace"])
    changed = change(raw)
    assert changed != raw
    outcome, what = shown_or_quarantined(beta, changed)
    assert outcome == "quarantined" and "the body changed after signing" in what, what


# --- the same sweep through the in-process IMAP server ---------------------------------------


def test_over_imap_every_altered_copy_is_refused_or_identical_and_the_genuine_one_arrives(
    home: Path,
    servers: MailServers,  # noqa: F811
) -> None:
    reg = make_bus(home, servers)
    with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
        raw = genuine(alpha, BODIES["boundary-line"])
        for mutation in sorted(MUTATIONS):  # the altered copies arrive before the genuine one
            servers.store.inject("beta@bus.test", MUTATIONS[mutation](raw))
        servers.store.inject("beta@bus.test", raw)
        report = beta.sync()
        assert len(report.accepted) == 1
        assert len(report.accepted) + len(report.quarantined) + report.duplicates == len(MUTATIONS) + 1
        (shown,) = beta.inbox(sync=False)
        assert shown.body == BODIES["boundary-line"].strip()
        assert {q.reason for q in beta.quarantined(sync=False)} <= {"unauthenticated", "malformed"}


# --- a property over generated bodies and mutations -----------------------------------------

TOKENS = [
    "+ADw-",
    "+AD4-",
    "=3D",
    "=C3=A9",
    "=\n",
    "--b1",
    "--b1--",
    "\t",
    "   ",
    "é",
    "—",
    "日",
    "\n\n",
    "Content-Type: text/plain; charset=utf-7",
    "SGVsbG8=",
    "=",
    "+",
]
bodies = (
    st.lists(
        st.one_of(
            st.sampled_from(TOKENS),
            st.text(
                st.characters(min_codepoint=32, max_codepoint=0x2FFF, blacklist_categories=("Cs", "Cc")), max_size=30
            ),
        ),
        min_size=1,
        max_size=12,
    )
    .map("".join)
    .filter(lambda b: b.strip() != "" and "---" not in b and text.forbidden_in_text(b) is None)  # sendable
)
NAMES = ["MIME-Version", "Content-Type", "Content-Transfer-Encoding", "Content-Disposition"]
VALUES = [
    "1.0",
    "text/plain; charset=utf-7",
    "text/plain; charset=iso-8859-1",
    'text/plain; charset="utf-8"',
    "text/plain",
    "multipart/mixed; boundary=b1",
    "quoted-printable",
    "base64",
    "7bit",
    "8bit",
    "inline",
]
generated = st.one_of(
    st.sampled_from(sorted(MUTATIONS)).map(lambda name: MUTATIONS[name]),
    st.builds(set_header, st.sampled_from(NAMES[:3]), st.sampled_from(VALUES)),
    st.builds(
        lambda n, v, w: add(f"{n}: {v}", w),
        st.sampled_from(NAMES),
        st.sampled_from(VALUES),
        st.sampled_from(["above", "below"]),
    ),
    st.lists(st.sampled_from(NAMES[:3]), min_size=1, max_size=3).map(lambda names: drop(*names)),
)


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(body=bodies, mutation=generated)
def test_property_any_mime_mutation_is_quarantined_or_shows_the_signed_text(
    alpha: AgentMail, beta: AgentMail, body: str, mutation: Callable[[bytes], bytes]
) -> None:
    raw = genuine(alpha, body)
    verdict = authenticity.judge(raw, beta.registry)
    assert verdict.route == "accept" and verdict.letter is not None, verdict.detail
    signed_text = verdict.letter.body
    outcome, what = shown_or_quarantined(beta, mutation(raw))
    assert outcome == "quarantined" or what == signed_text


def test_empty_lines_added_at_the_end_verify_and_show_the_same_text(alpha: AgentMail, beta: AgentMail) -> None:
    """The one change a simple body canonicalisation allows (RFC 6376 §3.4.3) shows nothing new."""
    raw = genuine(alpha, BODIES["non-ascii"])
    assert shown_or_quarantined(beta, raw + b"\r\n\r\n\r\n") == ("accepted", BODIES["non-ascii"].strip())
