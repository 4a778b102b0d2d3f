"""The front-matter block at the top of every letter body (wraps python-frontmatter + PyYAML).

    --- agentmail v1 ---
    type: report
    thread: thr-9f2a41
    --- end agentmail ---

Every value stays a string: the block is read with YAML's base loader (no ``yes`` → True,
no ``0123`` → 83), and anchors, aliases, tags, nesting, duplicate and unknown keys are all
refused, so a hostile block can neither expand nor smuggle in structure.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from .. import bounds

if TYPE_CHECKING:
    from frontmatter.default_handlers import BaseHandler

START = "--- agentmail v1 ---"
END = "--- end agentmail ---"
KEYS = ("type", "thread", "severity", "ref", "to-agent", "outcome")
MAX_BLOCK = bounds.BLOCK_BYTES


class MatterError(ValueError):
    """The block is present but not acceptable; the message says why."""


# Strings, compiled by re's cache on first use: a send never splits a body.
_START_RE = r"\A--- agentmail v1 ---[ \t]*\r?\n"
_END_RE = r"(?m)^--- end agentmail ---[ \t]*$"


def _split_block(text: str) -> tuple[str, str]:
    """(the block's lines, the rest): the delimiters found by two regexes, nothing parsed."""
    start = re.match(_START_RE, text)
    if not start:
        raise MatterError("the body does not start with the agentmail block")
    end = re.compile(_END_RE).search(text, start.end())
    if not end:
        raise MatterError("the agentmail block is not terminated")
    return text[start.end() : end.start()], text[end.end() :]


@functools.cache
def _handler() -> BaseHandler:
    """The python-frontmatter handler, made (and frontmatter and PyYAML imported) on first need:
    a block of plain values never needs them (``_plain_fields``, ``_plain_lines``)."""
    import yaml
    from frontmatter.default_handlers import BaseHandler

    class AgentmailHandler(BaseHandler):
        """python-frontmatter handler for the two distinct agentmail delimiter lines."""

        START_DELIMITER = START
        END_DELIMITER = END
        FM_BOUNDARY = re.compile(r"^--- (?:end )?agentmail(?: v1)? ---[ \t]*$", re.MULTILINE)

        def detect(self, text: str) -> bool:
            return bool(re.match(_START_RE, text))

        def split(self, text: str) -> tuple[str, str]:
            return _split_block(text)

        def load(self, fm: str) -> dict[str, Any]:
            return _load_strict(fm)

        def export(self, metadata: dict[str, object], **kwargs: object) -> str:
            lines = yaml.safe_dump(
                metadata, default_flow_style=False, sort_keys=False, allow_unicode=True, width=10_000
            )
            return str(lines).rstrip("\n")

    return AgentmailHandler()


# A line whose value YAML's base loader reads back verbatim as a plain string, and which
# yaml.safe_dump writes unquoted (safe_dump quotes the words it would read as bool or null).
_PLAIN_LINE = re.compile(r"(type|thread|severity|ref|to-agent|outcome): ([A-Za-z0-9][A-Za-z0-9._/-]*)")
_QUOTED_BY_DUMP = re.compile(r"yes|no|true|false|on|off|null|y|n|[0-9].*", re.IGNORECASE)  # or might


def _plain_fields(fm: str) -> dict[str, str] | None:
    """The fields of a block of plain ``key: value`` lines, or None: then YAML decides."""
    if not fm.endswith("\n") or len(fm.encode()) > MAX_BLOCK:
        return None
    data: dict[str, str] = {}
    for line in fm[:-1].split("\n"):
        found = _PLAIN_LINE.fullmatch(line)
        if found is None or found.group(1) in data:
            return None
        data[found.group(1)] = found.group(2)
    return data or None


def _plain_lines(fields: dict[str, str]) -> str | None:
    """What yaml.safe_dump writes for these fields when every value is plain, or None."""
    lines = []
    for key, value in fields.items():
        line = f"{key}: {value}"
        if not _PLAIN_LINE.fullmatch(line) or _QUOTED_BY_DUMP.fullmatch(value):
            return None
        lines.append(line)
    return "\n".join(lines)


def _load_strict(fm: str) -> dict[str, str]:
    """One pass over the YAML events: a single flat mapping of plain scalars, nothing else."""
    import yaml

    _Loader = getattr(yaml, "CBaseLoader", yaml.BaseLoader)  # libyaml when the wheel has it
    if len(fm.encode()) > MAX_BLOCK:
        raise MatterError(f"the agentmail block is larger than {MAX_BLOCK} bytes")
    try:
        events = list(yaml.parse(fm, Loader=_Loader))
    except yaml.YAMLError as exc:
        raise MatterError(f"the agentmail block is not valid YAML ({exc.__class__.__name__})") from exc
    for event in events:
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise MatterError("anchors and aliases are not allowed in the agentmail block")
        tag = getattr(event, "tag", None)  # set only when the text spells a tag out
        if tag is not None:
            raise MatterError(f"YAML tags are not allowed in the agentmail block ({tag})")
    body = [
        e
        for e in events
        if not isinstance(
            e, yaml.StreamStartEvent | yaml.StreamEndEvent | yaml.DocumentStartEvent | yaml.DocumentEndEvent
        )
    ]
    if (
        len(body) < 2
        or not isinstance(body[0], yaml.MappingStartEvent)
        or not isinstance(body[-1], yaml.MappingEndEvent)
    ):
        raise MatterError("the agentmail block must be 'key: value' lines")
    pairs = [e for e in body[1:-1] if isinstance(e, yaml.ScalarEvent)]
    if len(events) - len(body) > 4 or len(pairs) != len(body) - 2:
        raise MatterError("the agentmail block must hold plain 'key: value' lines")
    data: dict[str, str] = {}
    for key_event, value_event in zip(pairs[0::2], pairs[1::2], strict=True):
        key = str(key_event.value)
        if key not in KEYS:
            raise MatterError(f"unknown key {key!r} in the agentmail block")
        if key in data:
            raise MatterError(f"duplicate key {key!r} in the agentmail block")
        data[key] = str(value_event.value)
    return data


def has_block(body: str) -> bool:
    return bool(re.match(_START_RE, body))


def split(body: str) -> tuple[dict[str, str], str]:
    """(fields, the rest of the body) — raises MatterError when the block is bad."""
    _split_block(body)  # frontmatter.parse hides a bad split as "no metadata"; say why first
    # What frontmatter.parse splits: CRLF made LF (its util.u), then stripped. A body whose text
    # holds a CRLF (a quoted-printable =0D=0A) reads the same on either path.
    fm, content = _split_block(body.replace("\r\n", "\n").strip())
    plain = _plain_fields(fm)
    if plain is not None:  # what the YAML path returns for these lines, without loading it
        return plain, content.strip()
    import frontmatter

    metadata, content = frontmatter.parse(body, handler=_handler())
    if not metadata:
        raise MatterError("the agentmail block is empty")
    return {k: str(v) for k, v in metadata.items()}, content


def join(fields: dict[str, str], content: str) -> str:
    """The body text: the block with ``fields`` in KEYS order, a blank line, then ``content``."""
    ordered = {k: fields[k] for k in KEYS if fields.get(k) is not None}
    plain = _plain_lines(ordered) if ordered else None
    if plain is not None:  # frontmatter.dumps' template, without PyYAML
        return f"{START}\n{plain}\n{END}\n\n{content}\n".strip() + "\n"
    import frontmatter

    post = frontmatter.Post(content, handler=_handler(), **ordered)
    return frontmatter.dumps(post, handler=_handler()) + "\n"
