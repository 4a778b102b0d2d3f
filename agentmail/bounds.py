"""What one letter may make agentmail do: the one table of bounds (DESIGN §10).

Every feature of a letter its sender writes freely has a bound here, read by both sides: the
sender's compose refuses a letter over one (``BadInput``, exit 2, naming the bound), the
reader's parse quarantines it (``too-large``, the detail naming the bound). Pure: no I/O.

The bounds keep each step on a letter linear in its size and small in its count: the email
package's parser costs (multipart levels) x (lines), a person's client check costs
(References) x (spool look-ups), an announcement costs a person's attention.
"""

from __future__ import annotations

import re

# A letter, as written and as read.
SUBJECT = 200  # characters of a Subject (a reader does not count a client's "Re: "/"Fwd: " prefixes)
REF = 100  # characters of the block's ``ref``
REFERENCES = 100  # Message-IDs in References (a sender writes its last 20: client.sender)
HEADER_BYTES = 65_536  # the header section (over it: ``malformed``, as it always was)
HEADER_FIELDS = 250  # header fields (a person's letter through a few relays has about 50)
ADDRESS_CHARS = 8_192  # characters of one address header (From, Sender, Reply-To, To, Cc): some 250 addresses
ADDRESS_COMMENTS = 32  # comments ("(...)") in one address header
SIGNATURE_CHARS = 4096  # characters of one DKIM-Signature field (an RSA-4096 one naming 40 headers: ~1,500)
SIGNATURES = 16  # DKIM-Signature fields (each verified hashes the whole body; a person's letter has 1-3)
MULTIPARTS = 16  # multipart entities declared ("Content-Type: multipart/..."): they bound the nesting
MIME_DEPTH = 8  # multipart levels, one inside the other
QUOTED_LINES = 10_000  # lines quoted with ">" in the text
# Bounds older than this table, kept under their old names where they are read (their reasons
# as they always were: malformed, loop, unauthenticated).
BLOCK_BYTES = 4096  # the agentmail front-matter block (letter/matter.MAX_BLOCK)
PERSON_PARTS = 50  # MIME parts of a person's letter (letter/readable.MAX_PARTS)
BOUNDARIES = 8  # multipart boundaries a partly signed letter is read against (letter/partly_signed)
HOPS = 50  # Received headers (trust/authenticity.MAX_HOPS: quarantined ``loop``)

# An answer whose letter is not filed here yet waits for it (stages/route.py: ``awaiting-parent``).
# Each sync looks again at the WAITING oldest of each sender only (a flood of orphan answers costs
# each sync the same, and holds back no other sender's); one that has waited ANSWER_WAIT_MS is judged
# without its letter, as it would have been.
WAITING = 100
ANSWER_WAIT_MS = 3_600_000

# What letters may make agentmail say to people (people/escalation.py): a run announces at most
# ANNOUNCE_PER_RUN threads, and at most ANNOUNCE_PER_SENDER threads with one counterpart a day;
# the rest wait (the digest lists every thread whatever these say).
ANNOUNCE_PER_RUN = 5
ANNOUNCE_PER_SENDER = 3
ANNOUNCE_WINDOW_MS = 86_400_000
# Changes of the guards asked of the approvers and not answered yet (client/consent.py): a steered
# agent trying one change after another mails them this many asks, then is refused unmailed.
ASKS_WAITING = 5

# Possessive white space: the two runs around an optional "[2]" were tried at every split of a
# long run ("Re" and 60,000 spaces: seconds, on a subject read before its length is weighed).
_REPLY_PREFIX = r"(?i)^(?:[ \t]*+(?:re|fwd?|aw|wg|sv|vs|tr|antw|rif|r)[ \t]*+(?:\[\d{1,3}\])?[ \t]*+:[ \t]*+){1,8}"
_MULTIPART = rb"(?im)^Content-Type:[ \t]*(?:\r?\n[ \t]+)*multipart/"
_QUOTED = r"(?m)^[ \t]{0,3}>"
_FIELD = rb"(?m)^[!-9;-~]+[ \t]*:"
_FIELD_END = rb"\r?\n(?![ \t])"
_SIGNATURE = rb"(?i)DKIM-Signature[ \t]*:"


class Exceeded(ValueError):
    """A letter over one bound: ``bound`` is its name in this module, the message one sentence."""

    def __init__(self, bound: str, message: str) -> None:
        super().__init__(message)
        self.bound = bound


def _over(bound: str, what: str, found: int, limit: int) -> Exceeded:
    return Exceeded(bound, f"{what} is {found}; a letter holds at most {limit} (bounds.{bound})")


def topic_length(subject: str) -> int:
    """The length of a subject without the reply and forward prefixes mail clients add."""
    prefix = re.match(_REPLY_PREFIX, subject)
    return len(subject) - (prefix.end() if prefix else 0)


def check_header_fields(head: bytes) -> None:
    """The number of fields in a header section (``head``: its bytes)."""
    if head.count(b"\n") < HEADER_FIELDS:  # a field starts a line: no more fields than lines
        return
    fields = len(re.findall(_FIELD, head))
    if fields > HEADER_FIELDS:
        raise _over("HEADER_FIELDS", "the number of header fields", fields, HEADER_FIELDS)


def check_signatures(head: bytes) -> None:
    """The DKIM-Signature fields of a header section, counted and measured before any is
    verified; anyone on the way can add one. Each verified hashes the whole body, and dkimpy splits a signature's h= at white space around colons in
    time quadratic in a run of white space."""
    # Each signature is a piece of ``head`` holding the name (ASCII case-insensitively, as
    # _SIGNATURE reads it): few names in a short section leave nothing to count or measure.
    named = head.lower().count(b"dkim-signature")
    if named <= SIGNATURES and (not named or len(head) <= SIGNATURE_CHARS):
        return
    signatures = [field for field in re.split(_FIELD_END, head) if re.match(_SIGNATURE, field)]
    if len(signatures) > SIGNATURES:
        raise _over("SIGNATURES", "the number of DKIM-Signature fields", len(signatures), SIGNATURES)
    for field in signatures:
        if len(field) > SIGNATURE_CHARS:
            raise _over("SIGNATURE_CHARS", "a DKIM-Signature field's length", len(field), SIGNATURE_CHARS)


def check_multiparts(raw: bytes) -> None:
    """The multipart entities ``raw`` declares, counted before the email package parses it:
    its parser checks every line against every open boundary. Every match holds "multipart/"
    in some ASCII case (a bytes pattern's IGNORECASE is ASCII's, as ``bytes.lower`` is), so a
    count of that at most the bound proves the bound holds without the search."""
    if raw.lower().count(b"multipart/") <= MULTIPARTS:
        return
    found = len(re.findall(_MULTIPART, raw))
    if found > MULTIPARTS:
        raise _over("MULTIPARTS", "the number of multipart entities", found, MULTIPARTS)


def check_address_header(name: str, value: str) -> None:
    """One address header's length and comments, before the email package's address parser
    reads it (its work grows faster than the header)."""
    if len(value) > ADDRESS_CHARS:
        raise _over("ADDRESS_CHARS", f"the {name} header's length", len(value), ADDRESS_CHARS)
    comments = value.count("(")
    if comments > ADDRESS_COMMENTS:
        raise _over("ADDRESS_COMMENTS", f"the number of comments in the {name} header", comments, ADDRESS_COMMENTS)


def check_depth(depth: int) -> None:
    if depth > MIME_DEPTH:
        raise _over("MIME_DEPTH", "the MIME nesting depth", depth, MIME_DEPTH)


def check_subject(subject: str) -> None:
    length = topic_length(subject)
    if length > SUBJECT:
        raise _over("SUBJECT", "the Subject's length (characters, without Re:/Fwd: prefixes)", length, SUBJECT)


def check_references(count: int) -> None:
    if count > REFERENCES:
        raise _over("REFERENCES", "the number of Message-IDs in References", count, REFERENCES)


def quoted_lines(text: str) -> int:
    return len(re.findall(_QUOTED, text)) if ">" in text else 0  # every quoted line holds ">"


def check_quoted(text: str) -> None:
    if text.count(">") <= QUOTED_LINES:  # every quoted line holds one
        return
    found = quoted_lines(text)
    if found > QUOTED_LINES:
        raise _over("QUOTED_LINES", "the number of quoted lines ('>')", found, QUOTED_LINES)
