"""The front-matter block: strings only, no YAML tricks, no unknown or duplicate keys."""

from __future__ import annotations

import pytest

from agentmail import matter


def block(*lines: str, body: str = "the body") -> str:
    return "\n".join([matter.START, *lines, matter.END, "", body])


def test_every_value_stays_a_string() -> None:
    fields, body = matter.split(block("type: yes", "ref: 0123", "severity: 2026-11-29", "thread: on"))
    assert fields == {"type": "yes", "ref": "0123", "severity": "2026-11-29", "thread": "on"}
    assert body == "the body"


@pytest.mark.parametrize(
    "lines,words",
    [
        (("type: report", "type: ack"), "duplicate key"),
        (("type: report", "priority: 1"), "unknown key"),
        (("type: &x report", "ref: *x"), "anchors and aliases"),
        (("type: !!python/name:os.system report",), "tags are not allowed"),
        (("type: !custom report",), "tags are not allowed"),
        (("type: [report, ack]",), "plain 'key: value'"),
        (("type: {a: b}",), "plain 'key: value'"),
        (("- report",), "'key: value' lines"),
        (("type: 'unterminated",), "not valid YAML"),
    ],
)
def test_hostile_blocks_are_refused(lines: tuple[str, ...], words: str) -> None:
    with pytest.raises(matter.MatterError, match=words):
        matter.split(block(*lines))


def test_an_unterminated_block_is_an_error_not_silence() -> None:
    with pytest.raises(matter.MatterError, match="not terminated"):
        matter.split(f"{matter.START}\ntype: report\n\nno end line")


def test_the_block_is_size_capped() -> None:
    with pytest.raises(matter.MatterError, match="larger than"):
        matter.split(block("ref: " + "x" * 5000))


def test_join_writes_keys_in_a_fixed_order_and_quotes_what_needs_it() -> None:
    text = matter.join({"ref": "a: b #c", "type": "report", "thread": "thr-abcdef"}, "body")
    assert text.splitlines()[:4] == [matter.START, "type: report", "thread: thr-abcdef", "ref: 'a: b #c'"]
    assert matter.split(text)[0]["ref"] == "a: b #c"
