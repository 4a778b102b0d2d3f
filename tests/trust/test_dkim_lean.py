"""dkim_lean against dkimpy, difference by difference: the signer writes dkimpy's bytes, the lean
verifier passes only what dkimpy passes (and passes agentmail's own letters), and each parser of
outside bytes (header section, tag list, folding) reads as dkimpy's reads."""

from __future__ import annotations

import base64
import re
import types
from collections.abc import Callable
from unittest import mock

import dkim
import dkim.util
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.letter.mime import header_counts
from agentmail.trust import dkim_lean, signing
from tests.helpers.letters import burst_bytes

from ..depth import examples

PRIVATE, PUBLIC = signing.generate_keypair()
KEY = signing.PinnedKey("bus.test", "am1", "ed25519", PUBLIC)
NOW = 1_790_000_000


def _clock(now: int) -> types.SimpleNamespace:
    return types.SimpleNamespace(time=lambda: float(now))


def _dkimpy_sign(message: bytes, domain: bytes, selector: bytes, include: list[bytes], now: int) -> bytes:
    with mock.patch.object(dkim, "time", _clock(now)):
        header: bytes = dkim.sign(
            message,
            selector,
            domain,
            PRIVATE.encode(),
            signature_algorithm=b"ed25519-sha256",
            canonicalize=(b"relaxed", b"simple"),
            include_headers=include,
            linesep=b"\r\n",
        )
    return header


def _lean_sign(message: bytes, domain: bytes, selector: bytes, include: list[bytes], now: int) -> bytes:
    key = signing._signing_key(PRIVATE)
    return dkim_lean.signature_header(message, domain, selector, include, now, lambda d: key.sign(d).signature)


def _dkimpy_verdict(raw: bytes, key: signing.PinnedKey = KEY) -> signing.DkimResult:
    """What signing.verify says with the lean path taken away: dkimpy's verdict alone."""
    with mock.patch.object(signing, "_lean_pass", return_value=False):
        return signing.verify(raw, key)


def _lean(raw: bytes, key: signing.PinnedKey = KEY, now: int | None = None) -> bool:
    if now is None:
        return signing._lean_pass(raw, key, header_counts(raw))
    with mock.patch.object(signing, "time", _clock(now)):
        return signing._lean_pass(raw, key, header_counts(raw))


# --- letters, hostile ones among them ---------------------------------------------------------

_NAMES = ("From", "To", "Subject", "Date", "Message-ID", "Cc", "In-Reply-To", "X-Agentmail-Type", "Content-Type", "X-A")
_name = st.one_of(st.sampled_from(_NAMES), st.text("abcXYZ-_.!~:", min_size=1, max_size=12))
_value = st.one_of(
    st.text(max_size=90).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=40),
    st.sampled_from([b"", b" ", b"\t x  y\t", b"a" * 120, " é ünï ".encode(), b"x\r"]),
).map(lambda v: v.replace(b"\n", b" "))
_fold = st.sampled_from([b"", b" more", b"\tmore", b" ", b"  a  b  "])


@st.composite
def _header_line(draw: st.DrawFn) -> bytes:
    line = draw(_name).encode() + draw(st.sampled_from([b":", b": ", b" :", b":\t"])) + draw(_value)
    return line + b"".join(b"\n" + draw(_fold) for _ in range(draw(st.integers(0, 2))) if draw(st.booleans()))


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    """Header sections with folding, unicode, long and odd lines; bodies empty, blank-ended,
    white-space-ended; CRLF, LF or both."""
    lines = [b"From: alpha <alpha@bus.test>"] if draw(st.booleans()) else []
    lines += draw(st.lists(_header_line(), max_size=8))
    if draw(st.integers(0, 9)) == 0:  # now and then a line dkimpy refuses, or skips
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from([b"no colon here", b" lead", b"From x"])))
    body_lines = draw(st.lists(st.one_of(_value, st.sampled_from([b"", b"  ", b"\t", b"x \t"])), max_size=6))
    ending = draw(st.sampled_from([b"\r\n", b"\n"]))
    mixed = draw(st.booleans())
    text = b"".join(line + (draw(st.sampled_from([b"\r\n", b"\n"])) if mixed else ending) for line in lines).replace(
        b"\n", ending if not mixed else b"\n"
    )
    if draw(st.booleans()):
        text += ending + ending.join(body_lines) + draw(st.sampled_from([b"", ending, ending * 3]))
    return text


_domain = st.from_regex(r"\A[a-z0-9]{1,20}(\.[a-z0-9]{1,30}){0,3}\Z").map(str.encode)
_selector = st.from_regex(r"\A[a-z0-9]{1,40}\Z").map(str.encode)
_include = st.lists(st.sampled_from([n.lower().encode() for n in _NAMES] + [b"x-absent"]), max_size=30).map(
    lambda names: [b"from", *names]
)


def _both(fn: Callable[[], bytes]) -> bytes | type[Exception]:
    try:
        return fn()
    except (dkim.DKIMException, dkim_lean.Unreadable, IndexError, TypeError):  # dkimpy: TypeError for b""
        return Exception


@settings(max_examples=examples(600), deadline=None)
@given(messages(), _domain, _selector, _include, st.integers(0, 4_000_000_000))
def test_the_lean_signer_writes_dkimpys_bytes(
    message: bytes, domain: bytes, selector: bytes, include: list[bytes], now: int
) -> None:
    theirs = _both(lambda: _dkimpy_sign(message, domain, selector, include, now))
    ours = _both(lambda: _lean_sign(message, domain, selector, include, now))
    assert ours == theirs
    froms = (
        [name for name, _ in dkim_lean.split(message)[0] if name.lower() == b"from"] if ours is not Exception else []
    )
    # and dkimpy verifies what the lean signer wrote; not where it looks for one From more than
    # h= lists (which it does on verifying alone, to catch one added), nor where its folding cut a
    # d= or i= longer than a line (a space inside the domain it then looks up)
    if isinstance(ours, bytes) and len(froms) <= include.count(b"from") and len(domain) <= 60:
        with mock.patch.object(dkim, "time", _clock(now)):
            record = b"v=DKIM1; k=ed25519; p=" + PUBLIC.encode()
            assert dkim.verify(ours + message, dnsfunc=lambda name, timeout=5: record)


def _subjects() -> st.SearchStrategy[str]:
    return st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Cf")), min_size=1, max_size=150)


@settings(max_examples=examples(300), deadline=None)
@given(_subjects(), st.text(st.characters(codec="utf-8"), max_size=400))
def test_signing_sign_is_dkimpys_signature_for_agentmails_letters(subject: str, body: str) -> None:
    try:
        unsigned = burst_bytes(subject=subject, body=body.strip() or "x")
    except ValueError:  # a subject or body the renderer refuses never gets signed
        return
    with mock.patch.object(signing, "time", _clock(NOW)):
        ours = signing.sign(unsigned, "bus.test", "am1", PRIVATE)
    assert ours == _dkimpy_sign(unsigned, b"bus.test", b"am1", signing._INCLUDE, NOW) + unsigned
    assert _lean(ours) and _dkimpy_verdict(ours).ok


# --- the lean verifier: the verdicts of dkimpy -------------------------------------------------

_OTHER_PRIVATE, _OTHER_PUBLIC = signing.generate_keypair()


def _signed(unsigned: bytes | None = None) -> bytes:
    return signing.sign(burst_bytes() if unsigned is None else unsigned, "bus.test", "am1", PRIVATE)


def _retag(raw: bytes, old: bytes, new: bytes) -> bytes:
    head, sep, body = raw.partition(b"\r\n\r\n")
    return head.replace(old, new, 1) + sep + body


def _unfolded_signature(raw: bytes) -> bytes:
    """The DKIM-Signature on one line (a relay may refold it): still the same signature."""
    at = re.search(rb"\r?\nFrom:", raw)
    if at is None:  # a tampering before took the From away
        return raw
    return re.sub(rb"\r?\n ", b" ", raw[: at.start()]) + raw[at.start() :]


TAMPERINGS: dict[str, Callable[[bytes], bytes]] = {
    "none": lambda r: r,
    "lf line ends": lambda r: r.replace(b"\r\n", b"\n"),
    "refolded signature": _unfolded_signature,
    "body changed": lambda r: r.replace(b"Fired 14", b"Fired 15"),
    "body grown": lambda r: r + b"appended\r\n",
    "header changed": lambda r: r.replace(b"Subject: Burst", b"Subject: Burts"),
    "header added above": lambda r: r.replace(b"\r\nFrom:", b"\r\nSubject: x\r\nFrom:", 1),
    "from added below": lambda r: r.replace(b"\r\n\r\n", b"\r\nFrom: mallory@bus.test\r\n\r\n", 1),
    "l= tag": lambda r: _retag(r, b"v=1;", b"v=1; l=5;"),
    "x= tag": lambda r: _retag(r, b"v=1;", b"v=1; x=9999999999;"),
    "unknown tag": lambda r: _retag(r, b"v=1;", b"v=1; z=1;"),
    "duplicate tag": lambda r: _retag(r, b"v=1;", b"v=1; v=1;"),
    "tag without =": lambda r: _retag(r, b"v=1;", b"v=1; junk;"),
    "tag name not a letter": lambda r: _retag(r, b"v=1;", b"v=1; 9=1;"),
    "v=2": lambda r: _retag(r, b"v=1;", b"v=2;"),
    "rsa claimed": lambda r: _retag(r, b"a=ed25519-sha256", b"a=rsa-sha256"),
    "simple headers": lambda r: _retag(r, b"c=relaxed/simple", b"c=simple/simple"),
    "relaxed body": lambda r: _retag(r, b"c=relaxed/simple", b"c=relaxed/relaxed"),
    "q= other": lambda r: _retag(r, b"q=dns/txt", b"q=dns/xtx"),
    "d= upper": lambda r: _retag(r, b"d=bus.test", b"d=BUS.test"),
    "d= other": lambda r: _retag(r, b"d=bus.test", b"d=bus.tesu"),
    "i= other": lambda r: _retag(r, b"i=@bus.test", b"i=x@bus.test"),
    "s= upper": lambda r: _retag(r, b"s=am1", b"s=AM1"),
    "t= future": lambda r: _retag(r, b"; t=", b"; t=9"),
    "t= not digits": lambda r: _retag(r, b"; t=", b"; t=-"),
    "bh= lenient": lambda r: _retag(r, b"bh=", b"bh=!"),
    "b= lenient": lambda r: _retag(r, b" b=", b" b=!"),  # b= starts a line of its own
    "b= short": lambda r: _retag(r, b" b=", b" b=AAAA"),
    "h= without from": lambda r: _retag(r, b"h=from : from : ", b"h="),
    "h= spaced name": lambda r: _retag(r, b"subject : subject", b"sub ject : subject"),
    "two signatures": lambda r: signing.sign(r, "bus.test", "am1", PRIVATE),
    "another key's above": lambda r: signing.sign(r, "bus.test", "am1", _OTHER_PRIVATE),
    "another key's below": lambda r: signing.sign(r, "bus.test", "am1", _OTHER_PRIVATE).replace(
        b"DKIM-Signature", b"X-Old", 1
    ),
    "signature lowercase": lambda r: r.replace(b"DKIM-Signature:", b"dkim-signature:", 1),
    "no signature": lambda r: r.replace(b"DKIM-Signature:", b"X-Was:", 1),
    "continuation first": lambda r: b" x\r\n" + r,
    "bad header line": lambda r: b"no colon\r\n" + r,
    "mbox From line": lambda r: b"From alpha Sat Jan  3 01:05:34 1996\r\n" + r,
}


@pytest.mark.parametrize("name", sorted(TAMPERINGS))
def test_the_lean_verdict_is_dkimpys(name: str) -> None:
    original = _signed()
    raw = TAMPERINGS[name](original)
    assert (raw != original) is (name != "none"), "the tampering changed nothing"
    theirs = _dkimpy_verdict(raw)
    assert signing.verify(raw, KEY) == theirs
    if _lean(raw):
        assert theirs.ok
    if name in ("none", "lf line ends", "refolded signature", "signature lowercase", "mbox From line"):
        assert _lean(raw), "the common case went to dkimpy"  # the fast path is the one taken


@pytest.mark.parametrize(
    "key",
    [
        signing.PinnedKey("bus.test", "am1", "ed25519", _OTHER_PUBLIC),  # the wrong key
        signing.PinnedKey("bus.test", "am1", "rsa", PUBLIC),  # an rsa pin: dkimpy's
        signing.PinnedKey("bus.test", "am1", "ed25519", ""),  # published in DNS: dkimpy's
        signing.PinnedKey("bus.test", "am1", "ed25519", PUBLIC.rstrip("=")),  # lenient base64
        signing.PinnedKey("bus.test", "am1", "ed25519", "!" + PUBLIC),
        signing.PinnedKey("bus.test", "am1", "ed25519", base64.b64encode(b"x" * 31).decode()),
        signing.PinnedKey("bus.test", "AM1", "ed25519", PUBLIC),
        signing.PinnedKey("Bus.test", "am1", "ed25519", PUBLIC),
        signing.PinnedKey("bus.test", "am2", "ed25519", PUBLIC),
    ],
)
def test_a_key_the_lean_path_cannot_vouch_for_is_left_to_dkimpy(key: signing.PinnedKey) -> None:
    raw = _signed()
    assert _lean(raw, key) is False
    assert signing.verify(raw, key) == _dkimpy_verdict(raw, key)


def test_a_signature_dated_ahead_of_the_clock_beyond_dkimpys_leeway_is_left_to_dkimpy() -> None:
    with mock.patch.object(signing, "time", _clock(NOW)):
        raw = _signed()
    assert _lean(raw, now=NOW - 36000) is True  # within the leeway: both pass
    assert _lean(raw, now=NOW - 36001) is False  # dkimpy would refuse it


def test_a_signature_by_a_domain_with_a_special_is_left_to_dkimpy() -> None:
    key = signing.PinnedKey("bus,test", "am1", "ed25519", PUBLIC)
    raw = signing.sign(burst_bytes(), "bus,test", "am1", PRIVATE)
    assert _lean(raw, key) is False
    assert _dkimpy_verdict(raw, key).ok is False


@settings(max_examples=examples(400), deadline=None)
@given(st.data())
def test_the_lean_verdict_is_dkimpys_for_any_tampering(data: st.DataObject) -> None:
    raw = _signed()
    for _ in range(data.draw(st.integers(1, 3))):
        try:
            raw = TAMPERINGS[data.draw(st.sampled_from(sorted(TAMPERINGS)))](raw)
        except dkim_lean.Unreadable:  # a signature added to a letter already unreadable: as dkimpy, none
            pass
    if data.draw(st.booleans()):  # a byte anywhere changed
        at = data.draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] + bytes([data.draw(st.integers(0, 255))]) + raw[at + 1 :]
    theirs = _dkimpy_verdict(raw)
    assert signing.verify(raw, KEY) == theirs
    if _lean(raw):
        assert theirs.ok


# --- the parsers of outside bytes --------------------------------------------------------------


def _parsed(message: bytes) -> object:
    try:
        headers, body = dkim.rfc822_parse(message)
    except (dkim.MessageFormatError, IndexError):
        return Exception
    return [tuple(h) for h in headers], body


def _split(message: bytes) -> object:
    try:
        return dkim_lean.split(message)
    except dkim_lean.Unreadable:
        return Exception


@settings(max_examples=examples(2000), deadline=None)
@given(
    st.one_of(
        messages(),
        st.binary(max_size=300),
        st.lists(st.sampled_from([b"\r", b"\n", b"a", b":", b" ", b"F"])).map(b"".join),
    )
)
def test_the_header_section_splits_as_dkimpy_splits_it(message: bytes) -> None:
    assert _split(message) == _parsed(message)


def _tags_dkimpy(value: bytes) -> dict[bytes, bytes] | None:
    try:
        tags: dict[bytes, bytes] = dkim.util.parse_tag_value(value)
    except dkim.util.InvalidTagValueList:
        return None
    return tags


_TAG_BITS = st.sampled_from([b"v", b"=", b";", b" ", b"\r\n ", b"\t", b"1", b"a", b"_", b"9", b"bh", b"==", b"x;y"])


@settings(max_examples=examples(2000), deadline=None)
@given(st.one_of(st.binary(max_size=80), st.lists(_TAG_BITS, max_size=20).map(b"".join)))
def test_a_tag_list_reads_as_dkimpy_reads_it(value: bytes) -> None:
    assert dkim_lean.parse_tags(value) == _tags_dkimpy(value)


@settings(max_examples=examples(2000), deadline=None)
@given(
    st.lists(st.sampled_from([b"a", b"bb", b" ", b";", b"=", b"\r\n ", b"x" * 30, b"\r\n"]), max_size=40).map(b"".join),
    st.integers(0, 20),
)
def test_folding_is_dkimpys(header: bytes, namelen: int) -> None:
    assert dkim_lean.fold(header, namelen) == dkim.fold(header, namelen=namelen)


def test_the_signature_header_folds_at_72_with_b_on_its_own_lines() -> None:
    header = _lean_sign(burst_bytes(), b"bus.test", b"am1", signing._INCLUDE, NOW)
    lines = header.split(b"\r\n")
    assert lines[-1] == b"" and all(len(line) <= 72 for line in lines)
    assert lines[0].startswith(b"DKIM-Signature: v=1; a=ed25519-sha256; c=relaxed/simple; d=bus.test;")


def test_unsigned_bytes_the_renderer_writes_sign_identically_with_attachments() -> None:
    from agentmail.letter import attach

    unsigned = attach.mixed(burst_bytes(), (attach.Attachment("a.txt", "text/plain", b"x\n" * 3000),))
    with mock.patch.object(signing, "time", _clock(NOW)):
        ours = signing.sign(unsigned, "bus.test", "am1", PRIVATE)
    assert ours == _dkimpy_sign(unsigned, b"bus.test", b"am1", signing._INCLUDE, NOW) + unsigned
    assert _lean(ours)


# --- dkim_lean's own verifier, without agentmail's policy: dkimpy's verify ---------------------


def _confirm(digest: bytes, signature: bytes) -> bool:
    try:
        signing._verify_key(PUBLIC).verify(digest, signature)  # type: ignore[union-attr]
    except signing.BadSignatureError:
        return False
    return True


def _dkimpy_verifies(raw: bytes, now: int) -> bool:
    record = b"v=DKIM1; k=ed25519; p=" + PUBLIC.encode()
    with mock.patch.object(dkim, "time", _clock(now)):
        try:
            return bool(dkim.verify(raw, dnsfunc=lambda name, timeout=5: record))
        except (IndexError, ValueError):  # dkimpy's escapes on hostile bytes (signing._DKIM_ERRORS)
            return False


@settings(max_examples=examples(600), deadline=None)
@given(
    messages(),
    _domain,
    _selector,
    st.one_of(
        _include,
        _include.map(lambda names: [n for n in names if n != b"from"] or [b"subject"]),
        _include.map(lambda names: [n.upper() for n in names]),  # h= in capitals: dkimpy reads it lowercased
    ),
    st.integers(0, 4_000_000_000),
    st.data(),
)
def test_the_lean_verifier_passes_what_dkimpy_passes(
    message: bytes, domain: bytes, selector: bytes, include: list[bytes], now: int, data: st.DataObject
) -> None:
    try:  # the lean signer, also for an h= without From (dkimpy's signer refuses one)
        raw = _lean_sign(message, domain, selector, include, now) + message
    except dkim_lean.Unreadable:
        return
    if data.draw(st.booleans()):  # a byte anywhere changed
        at = data.draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] + bytes([data.draw(st.integers(0, 255))]) + raw[at + 1 :]
        if dkim_lean.pinned_pass(raw, domain, selector, now, lambda tags, names: True, _confirm):
            assert _dkimpy_verifies(raw, now)
        return
    lean = dkim_lean.pinned_pass(raw, domain, selector, now, lambda tags, names: True, _confirm)
    assert bool(lean) == _dkimpy_verifies(raw, now)


def test_the_policy_of_the_caller_decides_and_sees_the_tags_and_names() -> None:
    with mock.patch.object(signing, "time", _clock(NOW)):
        raw = _signed()
    seen: list[tuple[bytes, list[bytes]]] = []

    def refuse(tags: dict[bytes, bytes], names: list[bytes]) -> bool:
        seen.append((tags[b"d"], names))
        return False

    assert dkim_lean.pinned_pass(raw, b"bus.test", b"am1", NOW, refuse, _confirm) is None
    ((d, names),) = seen
    assert d == b"bus.test" and names == signing._INCLUDE


def test_an_empty_letter_cannot_be_signed() -> None:
    with pytest.raises(dkim_lean.Unreadable, match="^an empty message$"):
        _lean_sign(b"", b"bus.test", b"am1", [b"from"], NOW)


@pytest.mark.parametrize("text", [b"!" * 88, b"A" * 87, b"A" * 84, b"QUFB" * 22 + b"QQ=="])
def test_a_b_value_not_canonical_base64_of_64_bytes_is_none(text: bytes) -> None:
    assert dkim_lean._strict_b64(text, 64) is None


def test_a_b_value_with_folding_decodes() -> None:
    signature = bytes(range(64))
    text = base64.b64encode(signature)
    assert dkim_lean._strict_b64(text[:40] + b"\r\n\t " + text[40:], 64) == signature


@pytest.mark.parametrize(
    "header,namelen",
    [
        (b"x" * 72, 0),  # fits
        (b"x" * 71 + b"\r\n", 0),  # fits but for its line end, which does not count
        (b"x" * 70 + b"\r\n", 2),
        (b"x" * 72 + b"\r\n", 0),  # 72 and a line end: kept
        (b"x" * 73 + b"\r\n", 0),  # one over: cut
        (b"a\r\n" + b"x" * 68 + b"\r\n", 0),  # the last line end is the one that does not count
        (b"a b\r\n " + b"y" * 80, 0),  # folded before: only what follows the last fold is refolded
        (b"w " * 40, 14),
    ],
)
def test_folding_at_the_edges_is_dkimpys(header: bytes, namelen: int) -> None:
    assert dkim_lean.fold(header, namelen) == dkim.fold(header, namelen=namelen)


def test_a_selector_in_capitals_is_left_to_dkimpy_whose_key_lookup_misses_it() -> None:
    key = signing.PinnedKey("bus.test", "AM1", "ed25519", PUBLIC)
    raw = signing.sign(burst_bytes(), "bus.test", "AM1", PRIVATE)
    assert _lean(raw, key) is False
    assert _dkimpy_verdict(raw, key).ok is False
    assert signing.verify(raw, key) == _dkimpy_verdict(raw, key)


@pytest.mark.parametrize("identity", [b"@evilbus.test", b"x@bus.test", b"@mail.bus.test"])
def test_a_signature_with_another_identity_is_dkimpys_to_judge(identity: bytes) -> None:
    header = dkim.sign(
        burst_bytes(), b"am1", b"bus.test", PRIVATE.encode(), identity=identity,
        signature_algorithm=b"ed25519-sha256", canonicalize=(b"relaxed", b"simple"),
        include_headers=signing._INCLUDE, linesep=b"\r\n",
    )  # fmt: skip
    raw = header + burst_bytes()
    assert _lean(raw) is False  # i= is not @d: not the shape agentmail writes
    assert signing.verify(raw, KEY) == _dkimpy_verdict(raw)
    assert _dkimpy_verdict(raw).ok is (identity != b"@evilbus.test")  # dkimpy: i= must be d= or under it


# --- every branch by a fixed example: the floor of 100 % never rests on a draw ------------------


@pytest.mark.parametrize(
    "message",
    [
        b"\r\nthe first line is empty: no headers\r\n",  # no header section at all
        b"\nthe same with a bare LF\n",
        b"Subject: headers only, no blank line\r\nTo: b@bus.test\r\n",  # the message ends with its headers
        b" a continuation first\r\nSubject: x\r\n\r\nbody\r\n",  # nothing to continue
        b"no colon in this line\r\n\r\nbody\r\n",  # neither a field nor a continuation
        b"From alpha Sun Dec  6 09:00:00 2026\r\nSubject: x\r\n\r\nbody\r\n",  # an mbox From line, skipped
        b"Subject: x\r\n\r\nbody with a bare LF\nand CRLF\r\n",  # the body's lines ended by CRLF
    ],
)
def test_each_shape_of_header_section_splits_as_dkimpy_splits_it(message: bytes) -> None:
    assert _split(message) == _parsed(message)


@pytest.mark.parametrize("value", [b"v=1; a=ed25519-sha256;", b"v=1;;", b";"])
def test_a_trailing_semicolon_reads_as_dkimpy_reads_it(value: bytes) -> None:
    assert dkim_lean.parse_tags(value) == _tags_dkimpy(value)


@pytest.mark.parametrize("include", [[b"subject", b"to"], [b"from", b"subject"]])
def test_a_value_with_runs_of_white_space_and_an_h_with_or_without_from_verify_as_dkimpy(
    include: list[bytes],
) -> None:
    """Relaxed canonicalisation folds a tab and a run of spaces into one space; an h= without
    From is verified as dkimpy verifies it (no From looked for above the signed ones)."""
    message = burst_bytes().replace(b"Subject: Burst", b"Subject: Burst  in\ttwo  runs")
    assert b"Subject: Burst  in\ttwo  runs" in message
    raw = _lean_sign(message, b"bus.test", b"am1", include, NOW) + message
    lean = dkim_lean.pinned_pass(raw, b"bus.test", b"am1", NOW, lambda tags, names: True, _confirm)
    assert lean and _dkimpy_verifies(raw, NOW)
