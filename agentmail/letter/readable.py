"""A person's letter made readable for an agent (DESIGN §3). Pure functions, no I/O.

Agents' letters keep ``mime.shown_text``'s one strict shape. A person writes from an ordinary
mail client (mutt, Thunderbird, a phone), whose letters are often ``multipart/alternative``,
HTML only, or in a legacy charset: for a letter the bus's mail server vouched for, this module
picks the part a mail client shows (an HTML part turned into its visible text by ``html_text``),
decodes it, and cuts the quoted history so the agent is shown only the new text. The whole letter stays in the
spool (``show --raw``).
"""

from __future__ import annotations

import codecs
import re
from email.message import Message

from .. import bounds
from . import mime

# The charsets a person's letter may be in: plain byte → text mappings (codecs.lookup's names).
# Not utf-7, HZ or ISO-2022 (they change meaning by escape sequences: "+ADw-" is "<" in utf-7),
# not unicode_escape and its kin ("\\u0069gnore" would read "ignore"), never a bytes-to-bytes
# codec (rot13, base64, zlib...). A charset outside this set is refused, naming it.
TEXT_CODECS = frozenset(
    {"ascii", "utf-8", "utf-8-sig", "utf-16", "utf-16-be", "utf-16-le", "utf-32", "utf-32-be", "utf-32-le",
     "latin-1", "iso8859-1", *(f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16)),
     *(f"cp{n}" for n in (437, 720, 737, 775, 850, 852, 855, 856, 857, 858, 860, 861, 862, 863, 864, 865,
                          866, 869, 874, 932, 949, 950, 1125, 1250, 1251, 1252, 1253, 1254, 1255, 1256,
                          1257, 1258)),
     "koi8-r", "koi8-u", "koi8-t", "kz1048", "ptcp154", "tis-620", "mac-roman", "mac-cyrillic", "mac-greek",
     "mac-iceland", "mac-latin2", "mac-turkish", "big5", "big5hkscs", "gb2312", "gbk", "gb18030", "euc_jp",
     "euc_jis_2004", "euc_jisx0213", "euc_kr", "shift_jis", "shift_jis_2004", "shift_jisx0213", "johab"}
)  # fmt: skip
MAX_PARTS = bounds.PERSON_PARTS  # a person's letter with more parts than this is not a letter a person wrote
# Words a mail client adds when it writes the text version of an HTML letter (Gmail's "[image: …]",
# a link's address): not a difference between what the two versions say.
_CLIENT_WORDS = frozenset({"image", "mailto", "http", "https", "www", "cid"})


def person_text(msg: Message, *, cut: bool = False, disposition_signed: bool = True) -> str:
    """The text of a person's letter, as a mail client displays it (with ``cut``, its quoted
    history cut): the first text part of the letter, an alternative's plain text when its HTML
    says the same words (else refused), else the HTML's visible text. ``mime.Refused`` says why
    when there is none, or when a person and the agent would be shown different texts. The
    letter's own Content-Disposition is read only when ``disposition_signed`` (MTAs seldom sign
    it: one a relay added is not what the person sent)."""
    if disposition_signed and _is_attachment(msg):
        raise mime.Refused("the person's letter is disposed as an attachment: a mail client shows no text, only a file")
    plain, html = _body(msg)
    if plain is None and html is None:
        kinds = ", ".join(sorted({p.get_content_type()[:40] for p in _leaves(msg)})) or "nothing"
        raise mime.Refused(f"the person's letter holds no text or HTML part ({kinds})")
    if html is None:
        assert plain is not None
        text = _decode(plain)
        return cut_quotes(text) if cut else text
    markup = _decode(html)
    if plain is None:
        return _html(markup, cut)
    text = _decode(plain)
    from . import html_text

    differ = _words_differ(text, _html(markup, False), _words(html_text.link_texts(markup)))
    if differ:
        raise mime.Refused(
            "the person's letter says different things in its text and HTML versions (a mail client shows one, "
            f"the agent would be shown the other): {differ}"
        )
    return cut_quotes(text) if cut else text


def _body(msg: Message) -> tuple[Message | None, Message | None]:
    """(the text/plain part, the text/html part) a mail client shows as the letter: the first
    text leaf in order; an alternative's plain and HTML versions. Refused when that first text
    part is disposed as an attachment (clients differ on whether it is the letter or a file)."""
    for part in _leaves(msg):
        ctype = part.get_content_type()
        if ctype not in ("text/plain", "text/html"):
            continue
        if part is not msg and _is_attachment(part):
            raise mime.Refused(
                "the person's letter's first text part is disposed as an attachment: a mail client shows it as a "
                "file, not as the letter"
            )
        parent = _alternative_of(msg, part)
        if parent is None:
            return (part, None) if ctype == "text/plain" else (None, part)
        versions = [p for p in _leaves(parent) if not _is_attachment(p)]
        plain = next((p for p in versions if p.get_content_type() == "text/plain"), None)
        html = next((p for p in reversed(versions) if p.get_content_type() == "text/html"), None)
        return plain, html
    return None, None


def _alternative_of(msg: Message, leaf: Message) -> Message | None:
    """The nearest multipart/alternative holding ``leaf``, or None."""
    found: Message | None = None

    def walk(part: Message, inside: Message | None) -> bool:
        nonlocal found
        if part is leaf:
            found = inside
            return True
        if not part.is_multipart():
            return False
        here = part if part.get_content_type() == "multipart/alternative" else inside
        return any(walk(child, here) for child in part.get_payload() if isinstance(child, Message))

    walk(msg, None)
    return found


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
            stack[0:0] = [p for p in payload if isinstance(p, Message)]
        else:
            found.append(part)
    return found


def _is_attachment(part: Message) -> bool:
    """A part marked as an attachment (an inner part's headers are signed as body bytes)."""
    return str(part.get("Content-Disposition", "")).strip().lower().startswith("attachment")


def _decode(part: Message) -> str:
    charset = str(part.get_param("charset", "us-ascii") or "us-ascii").strip().lower()
    try:
        info = codecs.lookup(charset)
    except (LookupError, ValueError):  # ValueError: a name with a NUL in it
        raise mime.Refused(f"the letter uses an unknown charset {charset[:40]!r}") from None
    if info.name not in TEXT_CODECS:  # every name in it is a text encoding (a bytes-to-bytes codec is not in it)
        raise mime.Refused(
            f"the letter's charset {charset[:40]!r} is refused (not a plain text encoding: it changes meaning "
            "by escapes, or is not text)"
        )
    cte = str(part.get("Content-Transfer-Encoding", "7bit")).strip().lower()
    if cte not in mime.TRANSFER_ENCODINGS:
        raise mime.Refused(f"the Content-Transfer-Encoding {cte[:40]!r} is not one agentmail decodes")
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        raise mime.Refused("the letter's text part cannot be decoded")
    text = data.decode(info.name, errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("\x00", "")


def _html(markup: str, cut: bool) -> str:
    from . import html_text

    text = html_text.render(markup, cut=cut)
    return cut_quotes(text) if cut else text


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


def _words_differ(plain: str, html: str, links: set[str]) -> str | None:
    """A sentence naming the words one version has and the other lacks, or None when they agree."""
    plain_words, html_words = _words(plain), _words(html)
    only_plain = sorted(plain_words - html_words - links - _CLIENT_WORDS)
    only_html = sorted(html_words - plain_words)
    if not only_plain and not only_html:
        return None
    said = [f"only the text says {', '.join(only_plain[:5])}" if only_plain else "",
            f"only the HTML shows {', '.join(only_html[:5])}" if only_html else ""]  # fmt: skip
    return "; ".join(s for s in said if s)[:300]


# --- the quoted history ------------------------------------------------------------------

# Strings, compiled by re's cache on first use: most letters quote nothing (start-up).
_ATTRIBUTION = r"(?i)^\s*On\b.{0,300}\bwrote:\s*$"
_ATTRIBUTION_START = r"(?i)^\s*On\b.{0,300}$"
_ATTRIBUTION_END = r"(?i)^.{0,300}\bwrote:\s*$"
_FORWARDED = r"(?i)^\s*(?:-{2,}\s*(?:Original Message|Forwarded message)\s*-{2,}|Begin forwarded message:)\s*$"
_RULE = r"^\s*_{10,}\s*$"
_QUOTED = r"^\s{0,3}>"
SIGNATURE = "-- "


def cut_quotes(text: str) -> str:
    """The new text of a person's reply: without lines quoted with ``>``, the "On … wrote:"
    line (one or two lines) that introduces them, an "-----Original Message-----" (or Outlook's
    rule of underscores above a "From:" line) and all after it, and the signature (everything after a line that is exactly ``-- ``). Interleaved
    answers between quoted lines are kept, each kept line as it was; blank lines at either end
    go. Linear in the text: each line is looked at a bounded number of times (``_next_text``)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    following = _next_text(lines)
    kept: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line == SIGNATURE or (line == SIGNATURE.rstrip() and _rest_is_signature(lines, index)):
            break
        if re.match(_FORWARDED, line) or _outlook_header(lines, following, index):
            break
        if re.match(_QUOTED, line):
            index += 1
            continue
        span = _attribution(lines, following, index)
        if span:
            index += span
            continue
        kept.append(line)
        index += 1
    return _squeeze("\n".join(kept))


def _next_text(lines: list[str]) -> list[int]:
    """For each index, the index of the first line at or after it that is not blank (``len(lines)``
    when none is): built once backwards, so no line scans the rest of the letter."""
    found = [len(lines)] * (len(lines) + 1)
    for index in range(len(lines) - 1, -1, -1):
        found[index] = index if lines[index].strip() else found[index + 1]
    return found


def _outlook_header(lines: list[str], following: list[int], index: int) -> bool:
    """Outlook's quoted history: a rule of underscores, then the original's "From:" line."""
    if not re.match(_RULE, lines[index]):
        return False
    after = following[index + 1]
    return after < len(lines) and lines[after].lstrip().lower().startswith("from:")


def _rest_is_signature(lines: list[str], index: int) -> bool:
    """A bare ``--`` (a client that trimmed the space) starts a signature only near the end."""
    return len(lines) - index <= 8


def _attribution(lines: list[str], following: list[int], index: int) -> int:
    """How many lines (1 or 2) form an "On … wrote:" line introducing quoted lines, else 0."""
    for span in (1, 2):
        if index + span > len(lines):
            return 0
        if span == 1 and not re.match(_ATTRIBUTION, lines[index]):
            continue
        if span == 2 and not (
            re.match(_ATTRIBUTION_START, lines[index]) and re.match(_ATTRIBUTION_END, lines[index + 1])
        ):
            continue
        after = following[index + span]
        if after == len(lines) or re.match(_QUOTED, lines[after]):
            return span
    return 0


def _squeeze(text: str) -> str:
    """The blank lines the cut leaves at either end removed; every kept line is as it was."""
    lines = text.split("\n")
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[start:end])
