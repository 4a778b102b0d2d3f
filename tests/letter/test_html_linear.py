"""A person's HTML is read in time linear in its size: a style value of many digits or spaces
(``width:000…0x``, ``opacity:000…01`` in a style sheet, ``transform:scale(000…``, a background
of many words) made html_text's searches quadratic or worse (16,000 digits took 28 s, under the
mailbox lock). The searches are now possessive or one pass; each reads as it did (the
properties below compare them with the old expressions on short values)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.letter import html_text

from ..depth import examples

# The expressions as they were (each backtracked over a run of digits, zeros or spaces).
OLD_LENGTH = r"^(-?\d*\.?\d+)\s*(px|pt|em|rem|%|cm|mm|in|pc|ex|ch|vw|vh)?$"
OLD_SCALED = r"scale[xy]?\(\s*0*\.?0*\s*[,)]"
OLD_OPACITY = r"(?i)opacity\s*:\s*(?:0+\.?0*|\.0+)(?![.\d])"
# The opacity alternative of the style-sheet pattern, whole (it holds a "|" of its own).
_AT = html_text._SHEET_HIDES.index("opacity")
NEW_OPACITY = html_text._SHEET_HIDES[_AT : html_text._SHEET_HIDES.index(r"(?![.\d])", _AT) + len(r"(?![.\d])")]


def _old_words(value: str) -> list[str]:
    return re.split(r"\s+(?![^(]*\))", value.strip())


_FRAGMENTS = ["opacity", "OPACITY", ":", " ", "\t", "0", "00", ".", "1", "scale(", "scalex(", ",", ")", "(", "px",
              "em", "%", "-", "rgb(", "#fff", "red"]  # fmt: skip
_CSS = st.one_of(
    st.text(alphabet="0123456789.- \t%pxem(),#f", max_size=30),
    st.lists(st.sampled_from(_FRAGMENTS), max_size=14).map("".join),
)


@settings(max_examples=examples(400), deadline=None)
@given(_CSS)
def test_the_linear_searches_read_as_the_old_ones(value: str) -> None:
    assert bool(re.match(html_text._LENGTH, value)) == bool(re.match(OLD_LENGTH, value))
    if re.match(OLD_LENGTH, value):
        assert re.match(html_text._LENGTH, value).groups() == re.match(OLD_LENGTH, value).groups()  # type: ignore[union-attr]
    assert bool(re.search(html_text._SCALED_TO_NOTHING, value)) == bool(re.search(OLD_SCALED, value))
    assert bool(re.search("(?i)" + NEW_OPACITY, value)) == bool(re.search(OLD_OPACITY, value))
    assert [w for w in html_text._words(value) if w] == [w for w in _old_words(value) if w]


RUN = 200_000  # characters: the old searches would take hours on each of these


@pytest.mark.parametrize(
    "style",
    [
        "width:" + "0" * RUN + "x",
        "font-size:" + "0" * RUN + "x",
        "text-indent:" + "1" * RUN + "q",
        "transform:scale(" + "0" * RUN + "x",
        "background:" + "a " * (RUN // 2),
    ],
)
def test_a_long_inline_style_value_is_read_in_linear_time_and_shown(style: str) -> None:
    html = f'<html><body><p>Visible words</p><p style="{style}">also shown</p></body></html>'
    assert html_text.render(html, cut=True).split() == ["Visible", "words", "also", "shown"]


def test_a_long_value_in_a_style_sheet_is_read_in_linear_time() -> None:
    sheet = "p { opacity: " + "0" * RUN + "1 }"
    html = f"<html><head><style>{sheet}</style></head><body><p>Visible words</p></body></html>"
    assert html_text.render(html, cut=False).split() == ["Visible", "words"]


# --- dropping many elements: each place's text joined once --------------------------------

_PIECES = st.lists(
    st.sampled_from(["<b>k</b>", "<i class='x'>d</i>", "t", "<p class='x'>a<b class='x'>n</b>b</p>", "<!--c-->", "<p>q<i class='x'>z</i>r</p>"]),
    max_size=12,
)  # fmt: skip


@settings(max_examples=examples(200), deadline=None)
@given(_PIECES, st.booleans())
def test_dropping_many_elements_at_once_reads_as_dropping_each(pieces: list[str], reverse: bool) -> None:
    from lxml.html import document_fromstring, tostring

    html = "<html><body><div>lead" + "".join(pieces) + "</div></body></html>"
    one_by_one, at_once = document_fromstring(html), document_fromstring(html)
    doomed = [e for e in one_by_one.iter() if e.get("class") == "x"]
    for element in reversed(doomed) if reverse else doomed:
        if element.getparent() is not None:
            element.drop_tree()
    html_text.drop_all([e for e in at_once.iter() if e.get("class") == "x"])
    assert tostring(at_once) == tostring(one_by_one)


def test_many_hidden_elements_side_by_side_are_dropped_and_their_text_kept() -> None:
    # drop_tree copied the parent's text again for every hidden sibling: 40,000 took 2.6 s
    html = "<html><body><div>" + "<span hidden>x</span>y" * 40_000 + "</div></body></html>"
    assert html_text.render(html, cut=True).split() == ["y" * 40_000]
