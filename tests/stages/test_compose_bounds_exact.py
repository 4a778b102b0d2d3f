"""Exact answers of the send-side bounds in stages/compose.py:compose (bounds.py applied before a
letter leaves, BadInput: exit 2) and send_limit: each bound refused one past its edge, word for
word, and let through at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail import bounds
from agentmail.admin import bus
from agentmail.config.registry import Registry
from agentmail.errors import BadInput
from agentmail.letter.attach import Attachment
from agentmail.stages import compose
from agentmail.stages.compose import NEW_THREAD, Draft
from agentmail.trust import signing

from ..conftest import OPENER


def draft(**changes: object) -> Draft:
    fields: dict[str, object] = {
        "to": "beta",
        "type": "report",
        "thread": NEW_THREAD,
        "subject": "Quota",
        "body": OPENER,
    }
    fields.update(changes)
    return Draft(**fields)  # type: ignore[arg-type]


def refused(registry: Registry, home: Path, made: Draft) -> str:
    with pytest.raises(BadInput) as caught:
        compose.compose(registry, home, "alpha", made)
    return str(caught.value)


@pytest.fixture
def three(home: Path) -> Registry:
    return bus.init(
        home, home / "registry", ["alpha", "beta", "gamma"], domain="bus.test", endpoints={"new_threads_per_hour": 0}
    )


def test_a_subject_one_past_its_bound_is_refused_word_for_word(registry: Registry, home: Path) -> None:
    compose.compose(registry, home, "alpha", draft(subject="s" * bounds.SUBJECT))
    said = refused(registry, home, draft(subject="s" * (bounds.SUBJECT + 1)))
    assert said == (
        "refused: the Subject's length (characters, without Re:/Fwd: prefixes) is 201; "
        "a letter holds at most 200 (bounds.SUBJECT)"
    )


def test_references_one_past_their_bound_are_refused_word_for_word(registry: Registry, home: Path) -> None:
    ids = tuple(f"<r{n}@bus.test>" for n in range(bounds.REFERENCES + 1))
    compose.compose(registry, home, "alpha", draft(references=ids[:-1], in_reply_to=ids[-2]))
    said = refused(registry, home, draft(references=ids, in_reply_to=ids[-1]))
    assert (
        said
        == "refused: the number of Message-IDs in References is 101; a letter holds at most 100 (bounds.REFERENCES)"
    )


def test_quoted_lines_one_past_their_bound_are_refused_word_for_word(registry: Registry, home: Path) -> None:
    compose.compose(registry, home, "alpha", draft(body=OPENER + "> q\n" * bounds.QUOTED_LINES))
    said = refused(registry, home, draft(body=OPENER + "> q\n" * (bounds.QUOTED_LINES + 1)))
    assert (
        said == "refused: the number of quoted lines ('>') is 10001; a letter holds at most 10000 (bounds.QUOTED_LINES)"
    )


def test_multipart_declarations_in_a_body_are_counted_in_the_rendered_letter(registry: Registry, home: Path) -> None:
    line = "Content-Type: multipart/mixed\n"
    compose.compose(registry, home, "alpha", draft(body=OPENER + line * bounds.MULTIPARTS))
    said = refused(registry, home, draft(body=OPENER + line * (bounds.MULTIPARTS + 1)))
    assert said == "refused: the number of multipart entities is 17; a letter holds at most 16 (bounds.MULTIPARTS)"


def test_the_cc_header_is_measured_as_written(registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cc = ("p1@people.test", "p2@people.test", "p3@people.test")
    monkeypatch.setattr(bounds, "ADDRESS_CHARS", len(", ".join(cc)))  # the header at exactly its bound
    letter, _ = compose.compose(registry, home, "alpha", draft(cc=cc))
    assert letter.cc == cc
    monkeypatch.setattr(bounds, "ADDRESS_CHARS", len(", ".join(cc)) - 1)
    said = refused(registry, home, draft(cc=cc))
    size = len(", ".join(cc))
    assert (
        said == f"refused: the Cc header's length is {size}; a letter holds at most {size - 1} (bounds.ADDRESS_CHARS)"
    )


def test_the_to_header_of_a_fan_out_is_measured_as_written(
    three: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fan = draft(also_to=("gamma",))
    to = ", ".join(("beta@bus.test", "gamma@bus.test"))
    monkeypatch.setattr(bounds, "ADDRESS_CHARS", len(to))
    letter, _ = compose.compose(three, home, "alpha", fan)
    assert ", ".join(letter.recipients) == to
    monkeypatch.setattr(bounds, "ADDRESS_CHARS", len(to) - 1)
    said = refused(three, home, fan)
    assert (
        said
        == f"refused: the To header's length is {len(to)}; a letter holds at most {len(to) - 1} (bounds.ADDRESS_CHARS)"
    )


def test_the_cc_header_is_checked_before_the_to_header(
    three: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bounds, "ADDRESS_CHARS", 1)
    said = refused(three, home, draft(also_to=("gamma",), cc=("p1@people.test",)))
    assert said == "refused: the Cc header's length is 14; a letter holds at most 1 (bounds.ADDRESS_CHARS)"


def limited(monkeypatch: pytest.MonkeyPatch, under: int) -> list[bytes]:
    """The send limit set to the signed letter's own length less ``under`` bytes."""
    signed: list[bytes] = []
    sign_as = signing.sign_as

    def recording(*args: object) -> bytes:
        raw = sign_as(*args)  # type: ignore[arg-type]
        signed.append(raw)
        return raw

    def limit(max_size: int) -> int:
        assert max_size == 1_048_576
        return len(signed[-1]) - under

    monkeypatch.setattr(signing, "sign_as", recording)
    monkeypatch.setattr(compose, "send_limit", limit)
    return signed


def test_a_letter_at_the_send_limit_leaves(registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    signed = limited(monkeypatch, 0)
    _, raw = compose.compose(registry, home, "alpha", draft())
    assert raw == signed[-1]


def test_a_letter_one_byte_over_the_send_limit_is_refused_word_for_word(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signed = limited(monkeypatch, 1)
    said = refused(registry, home, draft())
    size = len(signed[-1])
    assert said == (
        f"the letter is {size} bytes; this bus takes at most 1048576 (bus set max_size), "
        f"{size - 1} as sent, leaving room for the headers mail servers add"
    )


def test_a_letter_with_attachments_over_the_send_limit_says_so(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signed = limited(monkeypatch, 1)
    log = Attachment(name="burst.log", type="text/plain", data=b"the burst\n" * 10)
    said = refused(registry, home, draft(attachments=(log,)))
    assert said.startswith(f"the letter with its attachments is {len(signed[-1])} bytes; ")


@pytest.mark.parametrize(
    ("max_size", "limit"), [(1_048_576, 1_040_384), (32_768, 24_576), (32_772, 24_580), (4096, 3072), (4099, 3075)]
)
def test_the_send_limit_keeps_the_smaller_of_the_headroom_and_a_quarter(max_size: int, limit: int) -> None:
    assert compose.send_limit(max_size) == limit
