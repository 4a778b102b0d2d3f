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

import re
from typing import Any

import frontmatter
import yaml
from frontmatter.default_handlers import BaseHandler

START = "--- agentmail v1 ---"
END = "--- end agentmail ---"
KEYS = ("type", "thread", "severity", "ref", "to-agent")
MAX_BLOCK = 4096


class MatterError(ValueError):
    """The block is present but not acceptable; the message says why."""


class AgentmailHandler(BaseHandler):
    """python-frontmatter handler for the two distinct agentmail delimiter lines."""

    START_DELIMITER = START
    END_DELIMITER = END
    FM_BOUNDARY = re.compile(r"^--- (?:end )?agentmail(?: v1)? ---[ \t]*$", re.MULTILINE)
    _START_RE = re.compile(r"\A--- agentmail v1 ---[ \t]*\r?\n")
    _END_RE = re.compile(r"^--- end agentmail ---[ \t]*$", re.MULTILINE)

    def detect(self, text: str) -> bool:
        return bool(self._START_RE.match(text))

    def split(self, text: str) -> tuple[str, str]:
        start = self._START_RE.match(text)
        if not start:
            raise MatterError("the body does not start with the agentmail block")
        end = self._END_RE.search(text, start.end())
        if not end:
            raise MatterError("the agentmail block is not terminated")
        return text[start.end() : end.start()], text[end.end() :]

    def load(self, fm: str) -> dict[str, Any]:
        return _load_strict(fm)

    def export(self, metadata: dict[str, object], **kwargs: object) -> str:
        lines = yaml.safe_dump(
            metadata, default_flow_style=False, sort_keys=False, allow_unicode=True, width=10_000
        )
        return str(lines).rstrip("\n")


_HANDLER = AgentmailHandler()


def _load_strict(fm: str) -> dict[str, str]:
    if len(fm.encode()) > MAX_BLOCK:
        raise MatterError(f"the agentmail block is larger than {MAX_BLOCK} bytes")
    try:
        events = list(yaml.parse(fm, Loader=yaml.BaseLoader))
        root = yaml.compose(fm, Loader=yaml.BaseLoader)
    except yaml.YAMLError as exc:
        raise MatterError(f"the agentmail block is not valid YAML ({exc.__class__.__name__})") from exc
    for event in events:
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise MatterError("anchors and aliases are not allowed in the agentmail block")
        tag = getattr(event, "tag", None)  # set only when the text spells a tag out
        if tag is not None:
            raise MatterError(f"YAML tags are not allowed in the agentmail block ({tag})")
    if not isinstance(root, yaml.MappingNode):
        raise MatterError("the agentmail block must be 'key: value' lines")
    data: dict[str, str] = {}
    for key_node, value_node in root.value:
        if not isinstance(key_node, yaml.ScalarNode) or not isinstance(value_node, yaml.ScalarNode):
            raise MatterError("the agentmail block must hold plain 'key: value' lines")
        key = str(key_node.value)
        if key not in KEYS:
            raise MatterError(f"unknown key {key!r} in the agentmail block")
        if key in data:
            raise MatterError(f"duplicate key {key!r} in the agentmail block")
        data[key] = str(value_node.value)
    return data


def has_block(body: str) -> bool:
    return _HANDLER.detect(body)


def split(body: str) -> tuple[dict[str, str], str]:
    """(fields, the rest of the body) — raises MatterError when the block is bad."""
    _HANDLER.split(body)  # frontmatter.parse hides a bad split as "no metadata"; say why first
    metadata, content = frontmatter.parse(body, handler=_HANDLER)
    if not metadata:
        raise MatterError("the agentmail block is empty")
    return {k: str(v) for k, v in metadata.items()}, content


def join(fields: dict[str, str], content: str) -> str:
    """The body text: the block with ``fields`` in KEYS order, a blank line, then ``content``."""
    ordered = {k: fields[k] for k in KEYS if fields.get(k) is not None}
    post = frontmatter.Post(content, handler=_HANDLER, **ordered)
    return frontmatter.dumps(post, handler=_HANDLER) + "\n"
