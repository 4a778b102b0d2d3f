"""``stages/guards``' credential refusal exactly (issue 37's mutation run 11): each refusal's
sentence word for word, a secret file's name however many dots lead it (and only then), and the
case-insensitive forms found whatever the case or the script around them."""

from __future__ import annotations

import pytest

from agentmail.letter.attach import Attachment
from agentmail.stages import guards

from .test_guards_exact import _parent


def _file(name: str, data: bytes = b"nothing secret\n") -> Attachment:
    return Attachment(name, "text/plain", data)


@pytest.mark.parametrize("name", [".env", "..env", "id_rsa", ".id_ed25519", "server.key", ".netrc"])
def test_a_secret_files_name_is_refused_word_for_word_whatever_dots_lead_it(name: str) -> None:
    assert guards.attachment_refusal((_file(name),)) == (
        f"attachment {name} is named like a secret file (a key, a .env, a login file); "
        "attach something else (or pass --force if it is not a secret)"
    )


@pytest.mark.parametrize("name", ["Xenv", "Xid_rsa", "notes.txt", "id_rsa.pub"])
def test_a_name_that_only_resembles_a_secret_files_is_let_through(name: str) -> None:
    assert guards.attachment_refusal((_file(name),)) is None


def test_an_attachment_holding_a_credential_is_refused_word_for_word() -> None:
    leaked = _file("notes.txt", b"DB_PASSWORD=hunter2hunter2\n")
    assert guards.attachment_refusal((_file("a.txt"), leaked)) == (
        "attachment notes.txt looks like it contains a password or token assignment; remove it "
        "(or pass --force if it is not a secret)"
    )


@pytest.mark.parametrize("body", ["", "   ", "\n\t \n"])
def test_an_empty_body_is_refused_word_for_word(body: str) -> None:
    assert guards.body_refusal(body) == "the body is empty"


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "an Authorization header"),
        ("AUTHORIZATION: Basic abcdefghijklmnopqrstuvwxyz", "an Authorization header"),
        ("PWD: hunter2hunter2", "a password assignment"),
        # not ASCII: the literals are not looked for (str.lower spells the dotted capital I as two
        # characters; re's case-insensitive match takes it for an "i")
        ("Authorİzation: Bearer abcdefghijklmnopqrstuvwxyz", "an Authorization header"),
    ],
)
def test_a_case_insensitive_form_is_found_whatever_its_case_or_script(text: str, what: str) -> None:
    assert guards.credential_in(text) == what


def test_a_note_in_answer_to_a_letter_is_refused_word_for_word() -> None:
    # the one refusal of the answer path that is not the parent's: a note never answers
    def answer(kind: str) -> str | None:
        return guards.refusal(guards.Outbound(type=kind, body="The quota endpoint fails.", me="alpha",
                                              parent=_parent(), depth=1))  # fmt: skip

    assert answer("note") == "a note is not an answer; use note()"
    assert answer("reply") is None
