"""People's letters exactly (agentmail/human.py, agentmail/readable.py; issue 23's mutation bar):
each refusal's sentence whole, each limit at its boundary, each field of the Letter a person's
letter becomes, and the MIME shapes where the part a mail client shows is not the first one."""

from __future__ import annotations

import re
from email import message_from_bytes
from email.message import EmailMessage, Message

import dkim
import pytest

from agentmail.config.registry import Registry
from agentmail.letter import mime, readable
from agentmail.trust import human

from .test_writing import CAROL, MTA_HEADERS, MTA_KEY, TRUSTED, _judge, client_letter, people, vouched  # noqa: F401


def _text(raw: bytes | str, **options: bool) -> str:
    return readable.person_text(message_from_bytes(raw if isinstance(raw, bytes) else raw.encode()), **options)


def _refusal(raw: bytes | str, **options: bool) -> str:
    with pytest.raises(mime.Refused) as refused:
        _text(raw, **options)
    return str(refused.value)


def _mixed(*parts: str) -> str:
    """A multipart/mixed letter of these parts (each its headers, a blank line, its body)."""
    body = "".join(f"--b\r\n{part}\r\n" for part in parts)
    return f"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n{body}--b--\r\n"


PLAIN = "Content-Type: text/plain\r\n\r\n"
HTML = "Content-Type: text/html\r\n\r\n"
PNG = "Content-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo="


def _alternative(*parts: str, boundary: str = "a") -> str:
    body = "".join(f"--{boundary}\r\n{part}\r\n" for part in parts)
    return f"Content-Type: multipart/alternative; boundary={boundary}\r\n\r\n{body}--{boundary}--"


# --- the Letter a person's letter is (human.to_letter) ------------------------------------------


def test_every_field_of_a_persons_letter(people: Registry) -> None:
    letter = client_letter("alpha+thr-abc123def0@bus.test", "Restored.")
    raw = letter.as_bytes(policy=EmailMessage().policy.clone(linesep="\r\n"))
    raw = re.sub(rb"\r\nDate: [^\r]*", b"\r\nDate: Tue,  1 Dec 2026\t05:00:00\r\n +0000", raw)
    got = _judge(people, vouched(raw)).letter
    assert got is not None
    assert (got.sender, got.sender_address, got.sender_name, got.to, got.to_address) == (
        "beta", CAROL, "Carol", "alpha", "alpha@bus.test",
    )  # fmt: skip
    assert (got.type, got.thread, got.body, got.extra) == ("human", "thr-abc123def0", "Restored.", {"person": CAROL})
    assert got.subject == "Re: Quota 500s"
    assert got.date == "Tue, 1 Dec 2026 05:00:00 +0000"  # its whitespace folded to single spaces


def test_a_person_letter_without_a_name_or_a_date(people: Registry) -> None:
    letter = client_letter("alpha@bus.test", "Hi")
    letter.replace_header("From", CAROL)
    del letter["Date"]
    got = _judge(people, vouched(letter)).letter
    assert got is not None and (got.sender_name, got.date) == (None, "")


def test_a_person_writing_to_no_platform_is_addressed_to_none(people: Registry) -> None:
    got = _judge(people, vouched(client_letter("nobody@bus.test", "Hi"))).letter
    assert got is not None and (got.to, got.to_address) == ("", "nobody@bus.test")


def test_unsigned_references_are_not_read_and_signed_ones_are(people: Registry) -> None:
    letter = client_letter("alpha@bus.test", "Hi", in_reply_to="<a@bus.test>", references="<r@bus.test> <a@bus.test>")
    headers = [h for h in MTA_HEADERS if h != b"references"]
    got = _judge(people, vouched(letter, headers=headers)).letter
    assert got is not None and (got.in_reply_to, got.references) == ("<a@bus.test>", ())
    got = _judge(people, vouched(letter)).letter
    assert got is not None and got.references == ("<r@bus.test>", "<a@bus.test>")


def test_a_signed_top_level_attachment_disposition_is_refused(people: Registry) -> None:
    letter = client_letter("alpha@bus.test", "Restored.")
    letter["Content-Disposition"] = "attachment; filename=note.txt"
    got = _judge(people, vouched(letter, headers=[*MTA_HEADERS, b"content-disposition"]))
    assert (got.route, got.reason, got.detail) == (
        "quarantine",
        "malformed",
        "the person's letter is disposed as an attachment: a mail client shows no text, only a file",
    )


def test_the_platform_a_person_writes_for_is_none_when_they_write_for_none(people: Registry) -> None:
    assert human.writes_for(people, "dave@people.test", "alpha@bus.test") is None  # listed, writes = false
    assert human.writes_for(people, "mallory@people.test", "alpha@bus.test") is None  # not listed
    chosen = human.writes_for(people, CAROL, "beta@bus.test")  # her only platform, though addressed
    assert chosen is not None and chosen.name == "beta"


# --- whether the bus's mail server vouches for it (human.vouched) ------------------------------


def _vouch(people: Registry, raw: bytes) -> tuple[str | None, tuple[str, ...]]:
    return human.vouched(raw, message_from_bytes(raw), people, CAROL)


def _vouch_refusal(people: Registry, raw: bytes) -> tuple[str, str]:
    from agentmail.letter import wire

    with pytest.raises(wire.Malformed) as refused:
        _vouch(people, raw)
    return refused.value.reason, refused.value.detail


def test_what_a_signature_and_a_dmarc_pass_alone_vouch_for(people: Registry) -> None:
    signer, covered = _vouch(people, vouched(client_letter("alpha@bus.test", "Hi")))
    assert signer == "people.test" and "to" in covered and "cc" not in covered
    dmarc = b"Authentication-Results: mail.bus.test; dmarc=pass header.from=people.test\r\n"
    assert _vouch(people, vouched(client_letter("alpha@bus.test", "Hi"), verdict=dmarc)) == ("", human.PLACEMENT)


def test_the_refusals_of_vouched_whole(people: Registry) -> None:
    letter = client_letter("alpha@bus.test", "Hi")
    untrusting = Registry(people.root, people.bus.replace(trusted_authserv_ids=()), people.platforms)
    with pytest.raises(Exception) as refused:
        human.vouched(vouched(letter), letter, untrusting, CAROL)
    assert str(getattr(refused.value, "detail", "")) == (
        "a person's letter (carol@people.test) needs the bus's mail server to vouch for it, and this bus "
        "names no trusted_authserv_ids"
    )
    two = Registry(
        people.root, people.bus.replace(trusted_authserv_ids=("mail.bus.test", "mx.bus.test")), people.platforms
    )
    raw = vouched(letter, verdict=b"")
    assert human.vouched.__name__ and _vouch_refusal(two, raw) == (
        "unauthenticated",
        "a person's letter from carol@people.test carries no dkim=pass aligned with people.test nor dmarc=pass "
        "from the bus's mail server (mail.bus.test, mx.bus.test)",
    )
    fails = (
        b"Authentication-Results: mail.bus.test; dkim=fail header.d=people.test; dmarc=fail header.from=people.test\r\n"
    )
    assert _vouch_refusal(people, vouched(letter, verdict=fails)) == (
        "verdict-fail",
        "the bus's mail server reported dkim=fail, dmarc=fail",
    )
    # A signature that leaves the MIME headers out is weighed by partly_signed (issue 24), pinned
    # cell by cell in tests/trust/test_signed_partly.py.


def test_a_signature_that_limits_the_body_length_is_refused(people: Registry) -> None:
    raw = client_letter("alpha@bus.test", "Hi").as_bytes(policy=EmailMessage().policy.clone(linesep="\r\n"))
    signed = dkim.sign(raw, b"mail", b"people.test", MTA_KEY.encode(), signature_algorithm=b"ed25519-sha256",
                       include_headers=MTA_HEADERS, length=True, linesep=b"\r\n")  # fmt: skip
    assert _vouch_refusal(people, TRUSTED + signed + raw) == (
        "unauthenticated",
        "people.test's signature limits the body length (l=), so what follows it is unsigned (a relay may have "
        "added it); refused for people as for agents",
    )


# --- the text a person's letter shows (readable.person_text) ------------------------------------


def test_a_top_level_attachment_is_refused_by_default_and_read_only_when_signed() -> None:
    raw = "Content-Disposition: attachment\r\nContent-Type: text/plain\r\n\r\nhello\r\n"
    sentence = "the person's letter is disposed as an attachment: a mail client shows no text, only a file"
    assert _refusal(raw) == sentence
    assert _text(raw, disposition_signed=False) == "hello\n"
    assert _refusal(raw.replace("attachment", "ATTACHMENT; filename=x")) == sentence


def test_a_first_text_part_disposed_as_an_attachment_is_refused() -> None:
    raw = _mixed("Content-Type: text/plain\r\nContent-Disposition: Attachment; filename=a.txt\r\n\r\nfile")
    assert _refusal(raw) == (
        "the person's letter's first text part is disposed as an attachment: a mail client shows it as a file, "
        "not as the letter"
    )
    inline = _mixed("Content-Type: text/plain\r\nContent-Disposition: inline\r\n\r\nmine")
    assert _text(inline) == "mine"


def test_a_letter_without_text_names_what_it_holds() -> None:
    long = "application/x-" + "a" * 40
    raw = _mixed(PNG, f"Content-Type: {long}\r\n\r\nx", PNG)
    assert _refusal(raw) == f"the person's letter holds no text or HTML part ({long[:40]}, image/png)"
    inner = "Content-Type: message/rfc822\r\n\r\nFrom: x@y.test\r\n\r\nhi"
    assert _refusal(_mixed(inner)) == "the person's letter holds no text or HTML part (nothing)"


def test_the_first_text_part_after_other_parts_is_the_letter() -> None:
    assert _text(_mixed(PNG, PLAIN + "mine")) == "mine"
    inner = "Content-Type: message/rfc822\r\n\r\nFrom: x@y.test\r\nContent-Type: text/plain\r\n\r\ntheirs"
    assert _text(_mixed(inner, PLAIN + "mine")) == "mine"  # a forwarded letter skipped, not the end


def test_parts_are_read_depth_first_in_order() -> None:
    nested = _alternative(PLAIN + "one", HTML + "<p>one</p>")
    assert _text(_mixed(nested, PLAIN + "two")) == "one"
    inner = "Content-Type: multipart/mixed; boundary=i\r\n\r\n--i\r\n" + PNG + "\r\n--i--"
    assert _text(_mixed(inner, PLAIN + "two")) == "two"


def test_only_an_alternative_makes_a_text_and_an_html_one_letter() -> None:
    assert _text(_mixed(PLAIN + "a plain note", HTML + "<p>other words</p>")) == "a plain note"
    differ = _mixed(PNG, _alternative(PLAIN + "plain words", HTML + "<p>other words</p>"))
    assert _refusal(differ).startswith("the person's letter says different things")


def test_an_alternative_of_one_version() -> None:
    assert _text(_mixed(_alternative(HTML + "<p>only html</p>"))) == "only html"
    assert _text(_mixed(_alternative(PLAIN + "only plain", PNG))) == "only plain"


def test_a_letter_of_many_forwarded_letters_is_refused_though_it_has_one_leaf() -> None:
    forwarded = "Content-Type: message/rfc822\r\n\r\nFrom: x@y.test\r\n\r\nhi"
    raw = _mixed(PLAIN + "mine", *[forwarded] * (readable.MAX_PARTS + 1))
    assert _refusal(raw) == f"the person's letter has more than {readable.MAX_PARTS} MIME parts"


def test_the_words_the_text_and_the_html_differ_in_exactly() -> None:
    plain = "alpha bravo charlie delta echo foxtrot shared"
    html = "<p>shared golf hotel</p>"
    sentence = _refusal(_alternative(PLAIN + plain, HTML + html))
    assert sentence == (
        "the person's letter says different things in its text and HTML versions (a mail client shows one, the "
        "agent would be shown the other): only the text says alpha, bravo, charlie, delta, echo; only the HTML "
        "shows golf, hotel"
    )
    assert _refusal(_alternative(PLAIN + "shared extra", HTML + "<p>shared</p>")).endswith(": only the text says extra")
    assert _refusal(_alternative(PLAIN + "shared", HTML + "<p>shared extra</p>")).endswith(
        ": only the HTML shows extra"
    )
    assert readable._words_differ("a b", "b a", set()) is None
    long = [w * 50 for w in "abcdefghij"]
    cut = readable._words_differ(" ".join(long[:5]), " ".join(long[5:]), set())
    assert cut is not None and len(cut) == 300 and cut.startswith("only the text says " + "a" * 50 + ", " + "b" * 50)


def test_a_link_address_the_text_version_spells_out_is_the_same_words() -> None:
    raw = _alternative(
        PLAIN + "See https://docs.example/quota", HTML + '<p><a href="https://docs.example/quota">See</a></p>'
    )
    assert _text(raw) == "See https://docs.example/quota"


def test_a_quote_in_both_versions_is_the_same_words_and_is_cut_only_when_asked() -> None:
    plain = "Yes.\n\nOn Monday, alpha wrote:\n> old words\n"
    html = "<p>Yes.</p><p>On Monday, alpha wrote:</p><blockquote>old words</blockquote>"
    raw = _alternative(PLAIN + plain.replace("\n", "\r\n"), HTML + html)
    assert _text(raw, cut=True) == "Yes."
    assert _text(raw) == plain  # not cut: as the client wrote it


def test_an_html_only_letter_is_cut_only_when_asked() -> None:
    html = "<p>Yes.</p><blockquote>old words</blockquote>"
    assert _text(HTML + html, cut=True) == "Yes."
    assert "old words" in _text(HTML + html)
    assert _text(HTML + "<p>Yes.</p><p>&gt; not a quote to cut</p>") == "Yes.\n\n> not a quote to cut"
    assert _text(HTML + "<p>Yes.</p><blockquote>kept</blockquote>").endswith("kept")


# --- decoding a text part (readable._decode) ----------------------------------------------------


def _part(charset: str | None, body: bytes, cte: str = "8bit") -> Message:
    ctype = "text/plain" + (f"; charset={charset}" if charset is not None else "")
    return message_from_bytes(f"Content-Type: {ctype}\r\nContent-Transfer-Encoding: {cte}\r\n\r\n".encode() + body)


def test_a_charset_is_named_in_its_refusal_cut_at_40() -> None:
    name = "x-" + "k" * 50
    with pytest.raises(mime.Refused) as refused:
        readable._decode(_part(name.upper(), b"hi"))
    assert str(refused.value) == f"the letter uses an unknown charset {name[:40]!r}"
    with pytest.raises(mime.Refused) as refused:
        readable._decode(_part("UTF-7", b"hi"))
    assert str(refused.value) == (
        "the letter's charset 'utf-7' is refused (not a plain text encoding: it changes meaning by escapes, or is not text)"
    )


def test_an_escaping_charset_name_is_cut_at_40_in_its_refusal() -> None:
    name = "utf-7" + " " * 0
    assert name  # utf_7's aliases are short: the cut is checked on the transfer encoding below
    cte = "x-" + "q" * 50
    with pytest.raises(mime.Refused) as refused:
        readable._decode(_part("utf-8", b"hi", cte=cte.upper()))
    assert str(refused.value) == f"the Content-Transfer-Encoding {cte[:40]!r} is not one agentmail decodes"


def test_an_empty_or_missing_charset_is_ascii() -> None:
    assert readable._decode(_part('""', b"plain")) == "plain"
    assert readable._decode(_part(None, b"plain")) == "plain"
    assert readable._decode(_part("US-ASCII", b"plain", cte="7BIT")) == "plain"


def test_bytes_that_do_not_decode_are_replaced_and_line_ends_and_nuls_normalised() -> None:
    assert readable._decode(_part("utf-8", b"caf\xe9 ok")) == "caf\ufffd ok"
    assert readable._decode(_part("utf-8", b"one\r\ntwo\rthree\nfour\x00five")) == "one\ntwo\nthree\nfourfive"


# --- the quoted history (readable.cut_quotes) ---------------------------------------------------


def test_a_bare_double_dash_starts_a_signature_only_within_eight_lines_of_the_end() -> None:
    within = "a\nb\nc\nd\ne\n--\nCarol"  # index 5 of 7 lines: 2 from the end
    assert readable.cut_quotes(within) == "a\nb\nc\nd\ne"
    eight = "Hi\n--\n" + "\n".join(f"line {i}" for i in range(7))  # the "--" and 7 lines: 8 from the end
    assert readable.cut_quotes(eight) == "Hi"
    nine = "Hi\n--\n" + "\n".join(f"line {i}" for i in range(8))
    assert readable.cut_quotes(nine) == nine


def test_outlooks_rule_needs_a_from_line_after_it() -> None:
    assert readable.cut_quotes("A table:\n____________") == "A table:\n____________"
    assert readable.cut_quotes("A table:\n____________\n\n") == "A table:\n____________"
    assert readable.cut_quotes("Done.\n____________\n   From: alpha\nold") == "Done."


def test_carriage_returns_end_lines_too() -> None:
    assert readable.cut_quotes("Yes.\r\n> old\r\nNo.\r> older\rMaybe.") == "Yes.\nNo.\nMaybe."


def test_every_allowed_charset_is_a_text_encoding_under_its_own_name() -> None:
    """Why _decode checks only the name: each name in TEXT_CODECS is codecs' own name of a text
    encoding (a bytes-to-bytes codec such as rot13 or base64 is not in it)."""
    import codecs

    for name in readable.TEXT_CODECS:
        info = codecs.lookup(name)
        assert info._is_text_encoding and (info.name in readable.TEXT_CODECS), name  # type: ignore[attr-defined]
    for name in ("rot13", "base64", "zlib", "hex", "unicode_escape", "utf-7", "hz"):
        assert codecs.lookup(name).name not in readable.TEXT_CODECS


def test_a_long_spelling_of_an_escaping_charset_is_cut_at_40_in_its_refusal() -> None:
    name = "utf" + "-" * 40 + "7"  # codecs reads it as utf-7 (runs of punctuation are one "_")
    with pytest.raises(mime.Refused) as refused:
        readable._decode(_part(name, b"hi"))
    assert str(refused.value).startswith(f"the letter's charset {name[:40]!r} is refused")


def test_an_html_only_letters_quoted_lines_are_cut_when_asked() -> None:
    html = "<p>Yes.</p><p>&gt; old words</p>"
    assert _text(HTML + html, cut=True) == "Yes."
    assert _text(HTML + html) == "Yes.\n\n> old words"


def test_the_html_only_words_are_named_five_at_most() -> None:
    sentence = _refusal(_alternative(PLAIN + "x", HTML + "<p>x a b c d e f</p>"))
    assert sentence.endswith(": only the HTML shows a, b, c, d, e")


def test_the_text_after_an_attribution_and_its_quote_is_kept() -> None:
    assert readable.cut_quotes("Yes.\nOn Mon, alpha wrote:\n> q\nAnd more.") == "Yes.\nAnd more."
