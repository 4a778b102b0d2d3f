"""The character policy's helpers, each held to its exact output (mutation runs 16 and 17)."""

from __future__ import annotations

import re

import pytest

from agentmail import text


def test_a_class_body_is_read_as_single_characters_and_ranges() -> None:
    assert text._codepoints("a-cx") == [0x61, 0x62, 0x63, 0x78]
    assert text._codepoints("x-") == [0x78, 0x2D]
    assert text._codepoints("-") == [0x2D]
    assert text._codepoints("ab-d") == [0x61, 0x62, 0x63, 0x64]
    # a range after a range, and a single after a range that starts past the first character
    assert text._codepoints("a-cB-D") == [0x61, 0x62, 0x63, 0x42, 0x43, 0x44]
    assert text._codepoints("xa-cd") == [0x78, 0x61, 0x62, 0x63, 0x64]


def test_a_pattern_is_compiled_once_and_each_name_is_its_own() -> None:
    assert text._pattern("any") is text._pattern("any")
    assert text._pattern("loose").search("a\u200b") is None
    assert text._pattern("any").search("a\u200b") is not None
    assert text._pattern("loose").search("\ufe0f") is not None


def test_a_compiled_pattern_is_taken_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    cached = re.compile("x")
    monkeypatch.setattr(text, "_patterns", {"any": cached})
    assert text._pattern("any") is cached
    assert text.forbidden_in_header("é x") == "x"  # the cached pattern is the one searched


def test_each_pattern_is_compiled_from_its_own_source_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text, "_patterns", {})
    assert text._pattern("loose").pattern == text._LOOSE_SELECTOR
    assert text._pattern("any").pattern == f"[{text.FORBIDDEN}]|{text._LOOSE_SELECTOR}"
    assert text._patterns == {"loose": text._pattern("loose"), "any": text._pattern("any")}


def test_printable_ascii_with_tabs_compiles_no_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text, "_patterns", {})
    assert text.forbidden_in_header("a\tb c") is None
    assert text.forbidden_in_text("a\tb\r\nc\nd") is None
    assert text._patterns == {}
    assert text.forbidden_in_header("a\x07") == "\x07"
    assert list(text._patterns) == ["any"]


def test_for_terminal_drops_forbidden_and_loose_selectors_keeps_tab_and_lf() -> None:
    assert text.for_terminal(None) == ""
    assert text.for_terminal(42) == "42"
    assert text.for_terminal("a\tb\nc\x1b[2Jd\u202e") == "a\tb\nc[2Jd"
    assert text.for_terminal("\ufe0fé\u2764\ufe0f") == "é\u2764\ufe0f"


def test_one_line_makes_tab_forbidden_and_loose_selectors_spaces() -> None:
    assert text.one_line("a\tb\nc\u200bd") == "a b c d"
    assert text.one_line("\ufe0fé") == " é"


def test_visible_writes_out_each_hidden_character_and_reads_crlf_as_a_line_end() -> None:
    assert text.visible("a\r\nb\tc\u200bd") == "a\nb\tc<U+200B>d"
    assert text.visible("\ufe0fé") == "<U+FE0F>é"
    assert text.visible("a\rb") == "a<U+000D>b"


def test_visible_line_makes_cr_lf_and_tab_spaces() -> None:
    assert text.visible_line("a\rb\nc\td\u2028") == "a b c d<U+2028>"


def test_text_may_carry_tab_lf_and_crlf_but_not_a_lone_cr() -> None:
    assert text.forbidden_in_text("a\tb\r\nc\nd") is None
    assert text.forbidden_in_text("a\rb") == "\r"
    assert text.forbidden_in_text("a\u200bb\u202e") == "\u200b"
    assert text.forbidden_in_header("a\tb") is None
    assert text.forbidden_in_header("a\nb") == "\n"
    assert text.forbidden_in_header("é\u200b") == "\u200b"
    assert text.forbidden_in_header("é") is None


def test_a_selector_after_a_line_end_in_text_modifies_nothing() -> None:
    """LF and CRLF are read as white space: a variation selector after one is loose."""
    assert text.forbidden_in_text("a\n\ufe0f") == "\ufe0f"
    assert text.forbidden_in_text("a\r\n\ufe0f") == "\ufe0f"
    assert text.forbidden_in_text("\u2764\ufe0f\r\n\u2764\ufe0f") is None


def test_a_forbidden_character_is_named_by_its_code_point() -> None:
    assert text.describe("\u202e") == "U+202E"
    assert text.describe("\x07") == "U+0007"
    assert text.describe("\U000e0069") == "U+E0069"
