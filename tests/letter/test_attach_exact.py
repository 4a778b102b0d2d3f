"""Attachment names, types and limits, exact (written for mutation testing's survivors,
tests/MUTATION.md run 7): each rule of ``safe_name`` on its own input, a long name cut at its
edge, every limit at exactly its value and one past it, and each refusal's whole sentence."""

from __future__ import annotations

import pytest

from agentmail.letter.attach import Attachment, Limits, check, limit_problem, safe_name, unique_names
from agentmail.letter.mime import Refused


@pytest.mark.parametrize(
    ("given", "saved"),
    [
        ("dir/sub\\run.log", "run.log"),  # the last component, either slash
        ("ｆｉｌｅ.txt", "file.txt"),  # NFKC: full-width letters are their ASCII selves
        ("README.Md", "README.Md"),  # both cases kept
        ("a b&c.txt", "a_b_c.txt"),  # anything else is one _
        ("a  b__c.txt", "a_b_c.txt"),  # runs of _ are one
        ("..-_hidden", "hidden"),  # no leading dot, dash or _
        ("name._-", "name._-"),  # trailing ones stay
        ("Xfile", "Xfile"),
        ("a." + "b" * 98, "a." + "b" * 98),  # exactly MAX_NAME (100): whole, even with a long extension
        ("a" * 150 + ".txt", "a" * 96 + ".txt"),  # cut to 100, the extension kept
        ("X" * 150 + ".txt", "X" * 96 + ".txt"),
        ("a" * 150, "a" * 100),  # no extension: cut to 100
        ("x" * 120 + ".tar.gz", "x" * 97 + ".gz"),  # the last extension
        ("a" * 95 + "." + "c" * 20 + ".txt", "a" * 95 + ".txt"),  # no dot left before the extension
        ("a" * 120 + "." + "e" * 25, "a" * 79 + "." + "e" * 20),  # an extension kept to 20 characters
    ],
)
def test_safe_name_rule_by_rule(given: str, saved: str) -> None:
    assert safe_name(given) == saved
    assert len(saved) <= 100


def test_nothing_left_is_the_fallback() -> None:
    assert safe_name("") == "attachment"
    assert safe_name("../..", "attachment-3") == "attachment-3"
    assert safe_name("///") == "attachment"
    assert safe_name("._-") == "attachment"
    assert safe_name("\u200b") == "attachment"  # one _ and nothing else


def test_a_name_without_an_extension_gets_its_number_at_the_end() -> None:
    items = [
        Attachment("notes", "text/plain", b""),
        Attachment("NOTES", "text/plain", b""),
        Attachment("", "text/plain", b""),
    ]
    assert unique_names(items) == ["notes", "NOTES-2", "attachment-3"]


LIMITS = Limits(max_bytes=10, max_total=15, max_count=2, types=("text/plain", "text/x-log"))


def _item(name: str, size: int, type_: str = "text/plain") -> Attachment:
    return Attachment(name, type_, b"x" * size)


def test_each_limit_takes_exactly_its_value() -> None:
    assert limit_problem([_item("a", 10), _item("b", 5, "text/x-log")], LIMITS) is None  # count 2, size 10, total 15
    assert limit_problem([], LIMITS) is None


def test_each_limit_refuses_one_past_it_with_its_sentence() -> None:
    assert limit_problem([_item("a", 1)] * 3, LIMITS) == (
        "3 attachments; this bus takes at most 2 (bus set attach_max_count)"
    )
    assert limit_problem([_item("a.bin", 1, "application/octet-stream")], LIMITS) == (
        "a.bin: type application/octet-stream is not in this bus's allow-list (text/plain, text/x-log; "
        "bus set attach_types)"
    )
    assert (
        limit_problem([_item("a", 11)], LIMITS) == "a is 11 bytes; an attachment may be 10 (bus set attach_max_bytes)"
    )
    assert limit_problem([_item("a", 10), _item("b", 6)], LIMITS) == (
        "the attachments are 16 bytes together; a letter may carry 15 (bus set attach_max_total)"
    )


def test_check_returns_the_attachment_with_a_safe_name_and_one_line_description() -> None:
    item = Attachment("dir/run log.txt", "text/plain", b"data", " two\n  lines\t" + "d" * 300)
    assert check(item) == Attachment("run_log.txt", "text/plain", b"data", ("two lines " + "d" * 300)[:200])
    assert check(Attachment("a.log", "text/x-log", b"")) == Attachment("a.log", "text/x-log", b"", "")


@pytest.mark.parametrize("type_", ["bad type", "text", "multipart/mixed", "message/rfc822", "Text/Plain"])
def test_check_refuses_a_type_that_is_not_one_single_part_type(type_: str) -> None:
    with pytest.raises(Refused) as caught:
        check(Attachment("a.log", type_, b""))
    assert str(caught.value) == f"a.log: {type_!r} is not a single-part MIME type"


def test_check_cuts_a_long_type_to_60_characters_in_its_refusal() -> None:
    with pytest.raises(Refused) as caught:
        check(Attachment("a.log", "x/" + "y" * 70, b""))
    assert str(caught.value) == f"a.log: {('x/' + 'y' * 70)[:60]!r} is not a single-part MIME type"


def test_check_refuses_an_invisible_character_in_the_name_or_the_description() -> None:
    with pytest.raises(Refused) as caught:
        check(Attachment("dir/a\u200bb.log", "text/plain", b""))
    assert str(caught.value) == "a_b.log: the file name contains an invisible or control character (U+200B)"
    with pytest.raises(Refused) as caught:
        check(Attachment("a.log", "text/plain", b"", "x\u200by"))
    assert str(caught.value) == "a.log: the description contains an invisible or control character (U+200B)"
