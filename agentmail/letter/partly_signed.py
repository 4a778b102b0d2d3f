"""A person's letter whose vouching signature leaves MIME headers out (DESIGN §5).
Pure functions, no I/O.

Stock signers (OpenDKIM's default ``h=From:To:Subject:Date``, many providers) do not cover
MIME-Version, Content-Type or Content-Transfer-Encoding, so a relay may re-declare them. The
body is signed (``bh=``, no ``l=``): the structure, charset and transfer encoding are derived
from the signed bytes and the signed headers alone, every reading those bytes plausibly have is
tried, and the letter is shown only when they all show one text and the declared (unsigned)
headers show it too. Anything else is refused, naming the headers the person's server must sign.
"""

from __future__ import annotations

import itertools
import re
from email.message import Message
from email.parser import BytesParser

from .. import bounds
from . import mime, readable

# A reading is (Content-Type value, Content-Transfer-Encoding value) for the top level.
Reading = tuple[str, str]
_IDENTITY = "7bit"
# A boundary of RFC 2046 §5.1.1 (bchars, 1 to 70, not ending in a space).
_BOUNDARY = rb"[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]"
# What an HTML writer always writes and a person's plain text almost never holds: a tag of a
# common element, a comment or a doctype ("<carol@people.test>" and "<https://…>" are not).
_HTML_MARKUP = (
    r"(?i)<(?:!--|!doctype\b|/?(?:html|head|body|div|p|br|span|b|i|u|a|img|table|tr|td|th|ul|ol|li|"
    r"blockquote|pre|font|style|script|h[1-6]|hr|em|strong|meta|title|center|section)\b[^<>]*>)"
)
_HTML_DOCUMENT = r"(?is)\s*<(?:!doctype\s+html|html)\b"
_PART_HEADER_LINES = 50  # a part's header block longer than this is not one a mail client wrote
MAX_BOUNDARIES = bounds.BOUNDARIES  # readings are tried per boundary: a body holding more is refused as ambiguous
_QP_ESCAPE = rb"=(?:[0-9A-Fa-f]{2}|\n)"
_MIME_VERSION = r"[ \t]*1\.0[ \t]*(?:\(.*\))?[ \t]*"


def unsigned_of(covered: tuple[str, ...]) -> tuple[str, ...]:
    """The MIME headers (MIME-Version, Content-Type, Content-Transfer-Encoding) a signature
    covering ``covered`` (lowercased names) leaves out, present or not: a relay may add, change
    or remove each of them."""
    return tuple(name for name in mime.MIME_HEADERS if name.lower() not in covered)


def person_text(raw: bytes, msg: Message, unsigned: tuple[str, ...], *, disposition_signed: bool) -> str:
    """The text (quoted history cut) of a person's letter whose signature does not cover
    ``unsigned``: the one text every plausible reading of the signed bytes shows, if the
    declared headers show it too. ``mime.Refused`` otherwise: ``Ambiguous`` / ``Disagrees``
    (the person's server must sign ``unsigned``), or the refusal every reading shares."""
    body = _body_of(raw)
    disposition = _signed_disposition(msg) if disposition_signed else ""
    outcomes: dict[str, list[Reading]] = {}
    for reading in readings(body, msg, unsigned):
        outcomes.setdefault(_outcome(reading, body, disposition), []).append(reading)
    if not outcomes:
        raise Ambiguous(
            unsigned, "no charset can be derived from its bytes: 8-bit bytes that are not UTF-8 need one named"
        )
    if len(outcomes) > 1:
        raise Ambiguous(unsigned, _differ(outcomes))
    ((only, _),) = outcomes.items()
    if only.startswith("refused:"):
        raise mime.Refused(only.removeprefix("refused:"))
    _check_declared(msg)
    declared = _shown(msg, disposition_signed)
    if declared != only:
        raise Disagrees(unsigned, f"as declared it {_say(declared)}, as signed it {_say(only)}")
    return only.removeprefix("text:")


class Ambiguous(mime.Refused):
    """The signed bytes read as more than one text: the unsigned headers decide which."""

    def __init__(self, unsigned: tuple[str, ...], why: str) -> None:
        super().__init__(f"the body reads more than one way without them ({why}); {_ask(unsigned)}")


class Disagrees(mime.Refused):
    """The declared (unsigned) headers read the signed bytes otherwise than they allow."""

    def __init__(self, unsigned: tuple[str, ...], why: str) -> None:
        super().__init__(
            f"as declared they read the signed body otherwise than its bytes allow ({why}): a relay may have "
            f"changed them; {_ask(unsigned)}"
        )


def names(unsigned: tuple[str, ...]) -> str:
    return " and ".join(unsigned) if len(unsigned) < 3 else f"{', '.join(unsigned[:-1])} and {unsigned[-1]}"


def _ask(unsigned: tuple[str, ...]) -> str:
    listed = ":".join(name.lower() for name in unsigned)
    return f"the person's mail server must sign {names(unsigned)} (h=…:{listed})"


# --- the readings -------------------------------------------------------------------------------


def readings(body: bytes, msg: Message, unsigned: tuple[str, ...]) -> list[Reading]:
    """Every top-level (Content-Type, Content-Transfer-Encoding) the signed bytes plausibly have:
    a signed header's value as signed (absent: RFC 2045's default), an unsigned one derived."""
    lf = body.replace(b"\r\n", b"\n")
    ct_signed = "Content-Type" not in unsigned
    cte_signed = "Content-Transfer-Encoding" not in unsigned
    signed_ct = str(msg.get("Content-Type", "text/plain")) if ct_signed else ""
    signed_cte = str(msg.get("Content-Transfer-Encoding", _IDENTITY)) if cte_signed else ""
    if ct_signed:
        ctype, params = mime.parse_content_type(re.sub(r"\r?\n(?=[ \t])", "", signed_ct))
        if ctype.startswith("multipart/"):
            return [(signed_ct, signed_cte or _IDENTITY)]  # RFC 2045 §6.4: a multipart is never encoded
        charset = params.get("charset", "us-ascii")
        if cte_signed:
            return [(signed_ct, signed_cte)]
        return [(signed_ct, _derived_encoding(lf, charset))]
    boundaries = multipart_boundaries(lf)
    if len(boundaries) > MAX_BOUNDARIES:
        raise Ambiguous(unsigned, f"it holds the delimiters of more than {MAX_BOUNDARIES} multipart boundaries")
    if boundaries:  # a body with a multipart's delimiters is one: never its raw MIME as text
        whole = signed_cte or _IDENTITY
        return [(f'multipart/{sub}; boundary="{b}"', whole) for b in boundaries for sub in ("mixed", "alternative")]
    cte = signed_cte if cte_signed else _derived_encoding(lf, None)
    decoded = _decoded(lf, cte)
    named = _derived_charset(decoded) if decoded is not None else None
    if decoded is None or named is None:
        return []
    text = decoded.decode(named)
    found: list[Reading] = []
    if not re.match(_HTML_DOCUMENT, text):
        found.append((f"text/plain; charset={named}", cte))
    if re.search(_HTML_MARKUP, text):
        found.append((f"text/html; charset={named}", cte))
    return found


def multipart_boundaries(lf_body: bytes) -> list[str]:
    """The boundaries B the body holds as a multipart: an opening ``--B`` line whose part begins
    with MIME headers (a Content-Type among them), and a closing ``--B--`` line after it."""
    stripped = [line.rstrip(b" \t") for line in lf_body.split(b"\n")]
    last = {
        line: index for index, line in enumerate(stripped) if line.startswith(b"--")
    }  # one pass: no n² on hostile bodies
    found: list[str] = []
    for index, line in enumerate(stripped):
        match = re.fullmatch(b"--(" + _BOUNDARY + b")", line) if line.startswith(b"--") else None
        if not match or match.group(1).decode() in found:
            continue
        headers = itertools.takewhile(bool, stripped[index + 1 : index + 1 + _PART_HEADER_LINES])
        has_type = any(h.lower().startswith(b"content-type:") for h in headers)
        if has_type and last.get(b"--" + match.group(1) + b"--", -1) > index:
            found.append(match.group(1).decode())
            if len(found) > MAX_BOUNDARIES:
                break
    return found


def _decoded(lf_body: bytes, cte: str) -> bytes | None:
    """The body decoded strictly from ``cte``; None when it is not so encoded."""
    cte = cte.strip().lower()
    if cte in ("7bit", "8bit", "binary"):
        return lf_body
    if cte not in mime.TRANSFER_ENCODINGS:
        return None
    # Trailing white space on a line was added in transport (RFC 2045 §6.7 (3)) or by a relaxed
    # body canonicalisation: it decides nothing.
    data = b"\n".join(line.rstrip(b" \t") for line in lf_body.split(b"\n"))
    try:
        return mime.decode_transfer(data, cte)  # base64's line breaks are dropped there, the last ones too
    except mime.Refused:
        return None


def _derived_encoding(lf_body: bytes, charset: str | None) -> str:
    """The transfer encoding the signed bytes are in: base64 if they are strictly base64 of text,
    else quoted-printable if they are strictly quoted-printable with an escape or a soft line
    break, else as written (7bit or 8bit)."""
    for cte in ("base64", "quoted-printable"):
        if cte == "quoted-printable" and not re.search(_QP_ESCAPE, lf_body):
            continue
        decoded = _decoded(lf_body, cte)
        if decoded is not None and decoded and _is_text(decoded, charset):
            return cte
    return "8bit" if not lf_body.isascii() else _IDENTITY


def _derived_charset(decoded: bytes) -> str | None:
    """us-ascii for 7-bit bytes, utf-8 for valid UTF-8; None for other 8-bit bytes, whose
    charset (latin-1? koi8-r? cp1252?) only a signed Content-Type can say."""
    if decoded.isascii():
        return "us-ascii"
    return "utf-8" if _is_text(decoded, "utf-8") else None


def _is_text(data: bytes, charset: str | None) -> bool:
    try:
        data.decode(charset or "utf-8")
    except (LookupError, UnicodeDecodeError, ValueError):
        return False
    return True


# --- what each reading shows --------------------------------------------------------------------


def _outcome(reading: Reading, body: bytes, disposition: str) -> str:
    ctype, cte = reading
    head = f"MIME-Version: 1.0\r\nContent-Type: {ctype}\r\nContent-Transfer-Encoding: {cte}\r\n{disposition}\r\n"
    # UTF-8: a signed Content-Disposition may hold 8-bit bytes (read as U+FFFD), which ASCII cannot write
    msg = BytesParser().parsebytes(head.encode() + body)
    return _shown(msg, bool(disposition))


def _shown(msg: Message, disposition_signed: bool) -> str:
    try:
        return "text:" + readable.person_text(msg, cut=True, disposition_signed=disposition_signed)
    except mime.Refused as exc:
        return f"refused:{exc}"


def _check_declared(msg: Message) -> None:
    """The declared top-level MIME headers written plainly, so every reader reads them alike."""
    version = msg.get("MIME-Version")
    declares = msg.get("Content-Type") is not None or msg.get("Content-Transfer-Encoding") is not None
    if version is None and declares:
        raise mime.Refused("the letter declares its content without MIME-Version")
    if version is not None and not re.fullmatch(_MIME_VERSION, str(version)):
        raise mime.Refused(f"the letter declares MIME-Version {str(version).strip()[:20]!r}, not 1.0")
    content_type = msg.get("Content-Type")
    if content_type is not None:
        ctype, _ = mime.parse_content_type(re.sub(r"\r?\n(?=[ \t])", "", str(content_type)))
        cte = str(msg.get("Content-Transfer-Encoding", _IDENTITY)).strip().lower()
        if ctype.startswith("multipart/") and cte not in ("7bit", "8bit", "binary"):
            raise mime.Refused(f"the letter is {ctype[:40]} encoded {cte[:20]!r} (RFC 2045 §6.4: never encoded)")


def _signed_disposition(msg: Message) -> str:
    value = msg.get("Content-Disposition")
    return "" if value is None else f"Content-Disposition: {value}\r\n"


def _body_of(raw: bytes) -> bytes:
    head = mime.header_section(raw)
    gap = re.match(rb"\r?\n\r?\n", raw[len(head) :])
    return raw[len(head) + gap.end() :] if gap else b""


def _say(outcome: str) -> str:
    if outcome.startswith("refused:"):
        return f"is refused ({outcome.removeprefix('refused:')[:120]})"
    text = outcome.removeprefix("text:")
    return f"shows {text[:60]!r}" + ("…" if len(text) > 60 else "")


def _differ(outcomes: dict[str, list[Reading]]) -> str:
    said = [f"as {readings_[0][0].split(';')[0]} {readings_[0][1]} it {_say(o)}" for o, readings_ in outcomes.items()]
    return "; ".join(said[:2])
