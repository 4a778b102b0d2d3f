"""The front-matter block: strings only, no YAML tricks, no unknown or duplicate keys."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentmail.letter import matter

from ..depth import examples


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


# --- the plain-value fast paths (issue 11): the same answers as the YAML path, no PyYAML loaded

_VALUE = st.one_of(
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,20}", fullmatch=True),
    st.sampled_from(["yes", "No", "on", "null", "y", "n", "0123", "2026-11-29", "1.5", "a: b #c", "-x", "~"]),
    st.text(max_size=30),
)


def _through_yaml_split(text: str) -> tuple[dict[str, str], str] | str:
    import frontmatter

    try:
        matter._split_block(text)
        metadata, content = frontmatter.parse(text, handler=matter._handler())
    except matter.MatterError as exc:
        return str(exc)
    if not metadata:
        return "the agentmail block is empty"
    return {k: str(v) for k, v in metadata.items()}, content


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(st.sampled_from(matter.KEYS), _VALUE, min_size=1), st.text(max_size=60))
@example({"type": "report"}, "0\r\n0")  # a CRLF in the text: frontmatter makes it LF, so must split
def test_join_and_split_write_and_read_what_yaml_does(fields: dict[str, str], content: str) -> None:
    import frontmatter

    ordered = {k: fields[k] for k in matter.KEYS if k in fields}
    post = frontmatter.Post(content, handler=matter._handler(), **ordered)
    try:
        expected = frontmatter.dumps(post, handler=matter._handler()) + "\n"
    except Exception as exc:  # what YAML cannot write, the fast path must not write either
        with pytest.raises(type(exc)):
            matter.join(fields, content)
        return
    assert matter.join(fields, content) == expected
    try:
        got: tuple[dict[str, str], str] | str = matter.split(expected)
    except matter.MatterError as exc:
        got = str(exc)
    assert got == _through_yaml_split(expected)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from([*(f"{k}: v1" for k in matter.KEYS), "type: yes", "ref: a #b", "x: y", "", " ",
                                 "type: report", "thread: thr-abcdef", "ref: 'q'", "ref: &a x", "ref: *a", "- a"]),
                min_size=0, max_size=6))  # fmt: skip
def test_split_of_any_block_agrees_with_the_yaml_path(lines: list[str]) -> None:
    text = "\n".join([matter.START, *lines, matter.END, "", "the body"])
    try:
        got: tuple[dict[str, str], str] | str = matter.split(text)
    except matter.MatterError as exc:
        got = str(exc)
    assert got == _through_yaml_split(text)


def test_a_plain_block_is_read_and_written_without_yaml() -> None:
    code = (
        "import sys; from agentmail.letter import matter; "
        "t = matter.join({'type': 'report', 'thread': 'thr-abcdef1234', 'severity': 'high'}, 'body'); "
        "assert matter.split(t)[0]['severity'] == 'high'; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('yaml', 'frontmatter')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
