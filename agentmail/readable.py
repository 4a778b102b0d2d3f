"""A person's letter made readable for an agent (DESIGN §3, issue 12). Pure functions, no I/O.

Agents' letters keep ``mime.shown_text``'s one strict shape. A person writes from an ordinary
mail client (mutt, Thunderbird, a phone), whose letters are often ``multipart/alternative``,
HTML only, or in a legacy charset: for a letter the bus's mail server vouched for, this module
picks the text part (else the HTML part, turned into text by inscriptis), decodes it, and cuts
the quoted history so the agent is shown only the new text. The whole letter stays in the
spool (``show --raw``).
"""

from __future__ import annotations

import codecs
import re
from email.message import Message

from . import mime

# Charsets that change meaning with state or escape sequences: "+ADw-" is "<" in utf-7. Refused
# for people too; every other charset Python knows is a plain byte → text mapping.
_REFUSED_CHARSETS = {"utf-7", "utf7", "unicode-1-1-utf-7", "csunicode11utf7", "hz", "hz-gb-2312"}
_REFUSED_CODECS = {"utf_7", "hz", "iso2022_jp", "iso2022_jp_1", "iso2022_jp_2", "iso2022_jp_2004",
                   "iso2022_jp_3", "iso2022_jp_ext", "iso2022_kr"}  # fmt: skip
MAX_PARTS = 50  # a person's letter with more parts than this is not a letter a person wrote


def person_text(msg: Message) -> str:
    """The text of a person's letter, whole (quoted history included): the first text/plain part,
    else the first text/html part as text. ``mime.Refused`` says why when there is none."""
    parts = list(_leaves(msg))
    for wanted in ("text/plain", "text/html"):
        for part in parts:
            if part.get_content_type() == wanted and (part is msg or not _is_attachment(part)):
                text = _decode(part)
                return html_to_text(text) if wanted == "text/html" else text
    kinds = ", ".join(sorted({p.get_content_type()[:40] for p in parts})) or "nothing"
    raise mime.Refused(f"the person's letter holds no text or HTML part ({kinds})")


def _leaves(msg: Message) -> list[Message]:
    found: list[Message] = []
    stack = [msg]
    while stack:
        part = stack.pop(0)
        if len(found) + len(stack) > MAX_PARTS:
            raise mime.Refused(f"the person's letter has more than {MAX_PARTS} MIME parts")
        if part is not msg and part.get_content_type().startswith("message/"):
            continue  # a forwarded or attached letter: someone else's words, never shown as theirs
        if part.is_multipart():
            payload = part.get_payload()  # a list: is_multipart() says the payload is one
            if part.get_content_type() == "multipart/alternative":
                payload = sorted(payload, key=lambda p: p.get_content_type() != "text/plain")
            stack[0:0] = [p for p in payload if isinstance(p, Message)]
        else:
            found.append(part)
    return found


def _is_attachment(part: Message) -> bool:
    """An inner part marked as an attachment (its headers are signed as body bytes). The letter's
    own Content-Disposition is not read: MTAs seldom sign it, so a relay could add one."""
    return str(part.get("Content-Disposition", "")).strip().lower().startswith("attachment")


def _decode(part: Message) -> str:
    charset = str(part.get_param("charset", "us-ascii") or "us-ascii").strip().lower()
    if charset in _REFUSED_CHARSETS:
        raise mime.Refused(f"the letter's charset {charset[:40]!r} is refused (it changes meaning by escapes)")
    try:
        codec = codecs.lookup(charset).name
    except LookupError:
        raise mime.Refused(f"the letter uses an unknown charset {charset[:40]!r}") from None
    if codec in _REFUSED_CODECS or codec.replace("-", "_") in _REFUSED_CODECS:
        raise mime.Refused(f"the letter's charset {charset[:40]!r} is refused (it changes meaning by escapes)")
    cte = str(part.get("Content-Transfer-Encoding", "7bit")).strip().lower()
    if cte not in mime.TRANSFER_ENCODINGS:
        raise mime.Refused(f"the Content-Transfer-Encoding {cte[:40]!r} is not one agentmail decodes")
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        raise mime.Refused("the letter's text part cannot be decoded")
    text = data.decode(codec, errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("\x00", "")


def html_to_text(html: str) -> str:
    """What a person's HTML says, as plain text (inscriptis: it keeps the layout of paragraphs,
    lists and tables and never runs scripts or fetches anything)."""
    if not html.strip():
        return ""
    from inscriptis import get_text  # loaded only for the rare HTML letter

    try:
        return str(get_text(html)).strip("\n")
    except Exception:  # lxml raises several types on hostile markup
        raise mime.Refused("the letter's HTML part does not parse") from None


# --- the quoted history ------------------------------------------------------------------

_ATTRIBUTION = re.compile(r"^\s*On\b.{0,300}\bwrote:\s*$", re.IGNORECASE)
_ATTRIBUTION_START = re.compile(r"^\s*On\b.{0,300}$", re.IGNORECASE)
_ATTRIBUTION_END = re.compile(r"^.{0,300}\bwrote:\s*$", re.IGNORECASE)
_FORWARDED = re.compile(r"^\s*-{2,}\s*(?:Original Message|Forwarded message)\s*-{2,}\s*$", re.IGNORECASE)
_RULE = re.compile(r"^\s*_{10,}\s*$")
_QUOTED = re.compile(r"^\s{0,3}>")
SIGNATURE = "-- "


def cut_quotes(text: str) -> str:
    """The new text of a person's reply: without lines quoted with ``>``, the "On … wrote:"
    line (one or two lines) that introduces them, an "-----Original Message-----" (or Outlook's
    rule of underscores above a "From:" line) and all after it, and the signature (everything after a line that is exactly ``-- ``). Interleaved
    answers between quoted lines are kept, each kept line as it was; blank lines at either end
    go."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line == SIGNATURE or (line == SIGNATURE.rstrip() and _rest_is_signature(lines, index)):
            break
        if _FORWARDED.match(line) or _outlook_header(lines, index):
            break
        if _QUOTED.match(line):
            index += 1
            continue
        span = _attribution(lines, index)
        if span:
            index += span
            continue
        kept.append(line)
        index += 1
    return _squeeze("\n".join(kept))


def _outlook_header(lines: list[str], index: int) -> bool:
    """Outlook's quoted history: a rule of underscores, then the original's "From:" line."""
    if not _RULE.match(lines[index]):
        return False
    following = next((line for line in lines[index + 1 :] if line.strip()), "")
    return following.lstrip().lower().startswith("from:")


def _rest_is_signature(lines: list[str], index: int) -> bool:
    """A bare ``--`` (a client that trimmed the space) starts a signature only near the end."""
    return len(lines) - index <= 8


def _attribution(lines: list[str], index: int) -> int:
    """How many lines (1 or 2) form an "On … wrote:" line introducing quoted lines, else 0."""
    for span in (1, 2):
        chunk = lines[index : index + span]
        if len(chunk) < span:
            return 0
        if span == 1 and not _ATTRIBUTION.match(chunk[0]):
            continue
        if span == 2 and not (_ATTRIBUTION_START.match(chunk[0]) and _ATTRIBUTION_END.match(chunk[1])):
            continue
        following = [line for line in lines[index + span :] if line.strip()]
        if not following or _QUOTED.match(following[0]):
            return span
    return 0


def _squeeze(text: str) -> str:
    """The blank lines the cut leaves at either end removed; every kept line is as it was."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)
