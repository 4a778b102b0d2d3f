"""The letter protocol as one table (DESIGN §6): each type, the thread's state after it, the
type a reply to it has by default, whether it ends the exchange, who may send it, whose move
follows it. Adding a type, or changing what may follow what, is a row here.

Pure data, no imports: ``--help`` reads the sendable types from it (cli/context.TYPES_HELP).
"""

from __future__ import annotations

HUMAN = "human"  # a letter with no front-matter block, written in a mail client

# Whose move a letter leaves (relative to its sender): the reader's (the usual), the writer's
# own (an ack: whoever acknowledged owes the fix), or nobody's (a close).
READER, WRITER, NOBODY = "reader", "writer", "nobody"


class LetterType:
    """One row. ``sendable``: ``send -t``/``reply -t`` and MCP's ``type`` take it (a note has
    its own command). ``terminal``: it ends the exchange, so it is never answered and its opener
    gets no advice. ``answerable``: a reply may answer it. ``after_ack``: a reporter may send it
    after the other side's ack of its own letter (more evidence, a withdrawal). ``opens``: with
    no In-Reply-To it opens a thread (counted by the new-thread quota). ``typed``: written in a
    letter's front matter (every type but a person's letter)."""

    __slots__ = ("name", "state", "reply", "move", "sendable", "terminal", "answerable", "after_ack", "opens", "typed")

    def __init__(self, name: str, state: str, reply: str = "question", move: str = READER, *, sendable: bool = True,
                 terminal: bool = False, answerable: bool = True, after_ack: bool = False, opens: bool = True,
                 typed: bool = True) -> None:  # fmt: skip
        self.name, self.state, self.reply, self.move = name, state, reply, move
        self.sendable, self.terminal, self.answerable = sendable, terminal, answerable
        self.after_ack, self.opens, self.typed = after_ack, opens, typed


# In the order ``send -t``'s help and its "one of" list name them.
PROTOCOL = (
    LetterType("report", "reported", "ack", after_ack=True),
    LetterType("question", "asked"),
    LetterType("fix-notice", "fix announced", "verify-result"),
    LetterType("verify-result", "verified"),
    LetterType("ack", "acknowledged", move=WRITER, terminal=True, answerable=False),
    LetterType("close", "closed", move=NOBODY, terminal=True, answerable=False, after_ack=True),
    LetterType("note", "note", "note", sendable=False, answerable=False, opens=False),
    LetterType(HUMAN, "human letter", typed=False, sendable=False, opens=False),
)
_BY_NAME = {row.name: row for row in PROTOCOL}
_UNKNOWN = LetterType("", "")  # a type no row names (a hostile header): read as a question would be

TYPES = tuple(k.name for k in PROTOCOL if k.typed)
SENDABLE = tuple(k.name for k in PROTOCOL if k.sendable)
TERMINAL_TYPES = tuple(k.name for k in PROTOCOL if k.terminal)
AFTER_ACK = tuple(k.name for k in PROTOCOL if k.after_ack)


def letter_type(name: str) -> LetterType:
    """The row of type ``name``; a name no row has reads as a question does (its own name as state)."""
    return _BY_NAME.get(name, _UNKNOWN)


def state_after(name: str) -> str:
    """The thread's lifecycle word after a letter of type ``name`` (``status``'s ``state``)."""
    row = _BY_NAME.get(name)
    return name if row is None else row.state


def default_reply(parent: str) -> str:
    """The type a reply to a letter of type ``parent`` has when none is given."""
    return letter_type(parent).reply


def whose_move(name: str, mine: bool, other: str) -> str:
    """Whose move a letter of type ``name`` leaves between this platform ("me") and ``other``;
    ``mine``: this platform wrote it."""
    move = letter_type(name).move
    if move == NOBODY:
        return "nobody"
    if move == WRITER:
        return "me" if mine else other
    return other if mine else "me"


def opens_thread(name: str, in_reply_to: object) -> bool:
    """Whether a letter opens a thread: a type that opens one (not a note, not a person's letter,
    whose type is ``HUMAN`` or none) and no In-Reply-To. A type no row names counts: the quota
    errs toward counting. The one rule for the server's count (transport/base) and the spool's
    (the openers rows, spool/layout.opener_row)."""
    return letter_type(name or HUMAN).opens and not in_reply_to


def default_replies() -> tuple[tuple[str, str], ...]:
    """(reply, parent) for each sendable type a reply does not answer with a question by default."""
    return tuple((k.reply, k.name) for k in PROTOCOL if k.sendable and k.reply != "question")
