"""What a person approves, exactly (mutation run 12): the digest's bytes, each line of a patch the
announcement reads a commit or a path from, and where ``init --approval-key`` may pin the first key."""

from __future__ import annotations

import hashlib
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from agentmail.config import bound
from agentmail.config.bound import PIN_FILE
from agentmail.errors import BadInput, ConfigError, Refused
from agentmail.frame import body as framed
from agentmail.frame import quoted
from agentmail.model import Letter
from agentmail.people import approval, for_people

SHA = "0123456789abcdef0123456789abcdef01234567"
FROM = f"From {SHA} Mon Sep 17 00:00:00 2001"


def _commits(*lines: str) -> list[tuple[str, tuple[str, ...]]]:
    return approval.commits_of("\n".join(lines).encode())


def test_the_digest_is_the_envelope_length_prefixed_then_the_bytes() -> None:
    expected = hashlib.sha256(b"agentmail approval 1\n2\n5:a@b.c\n9:\xc3\xa9@b.test\nRAW").hexdigest()
    assert approval.digest_of(b"RAW", ("a@b.c", "é@b.test")) == expected
    surrogate = hashlib.sha256(b"agentmail approval 1\n1\n3:a\xffb\n").hexdigest()
    assert approval.digest_of(b"", ("a\udcffb",)) == surrogate


def test_a_commit_starts_at_a_from_line_of_forty_hex_digits_and_more() -> None:
    assert _commits(FROM, "Subject: [PATCH 1/2] one", FROM, "Subject: [PATCH 2/2] two") == [
        ("one", ()),
        ("two", ()),
    ]
    assert _commits(f"From {SHA}", "Subject: alone") == [("alone", ())]  # 45 characters: no commit line
    upper = f"From {SHA.upper()} Mon"
    assert _commits(FROM, "Subject: one", upper, "Subject: two") == [("one", ())]
    assert _commits(FROM, f"From {SHA[:-1]}g Mon") == [("(no subject)", ())]


def test_a_subject_is_read_once_per_commit_its_patch_prefix_dropped() -> None:
    assert _commits(FROM, "Subject: [PATCH] fix: it ", "Subject: not this one") == [("fix: it", ())]
    assert _commits(FROM, "Subject: [PATCH no bracket") == [("[PATCH no bracket", ())]
    assert _commits(FROM, "Subject: [RFC] kept") == [("[RFC] kept", ())]
    assert _commits(FROM, "Subject: [PATCH]") == [("(no subject)", ())]
    assert _commits("Subject: before any From") == [("before any From", ())]


def test_a_subject_after_a_path_is_not_the_commits_subject() -> None:
    assert _commits(FROM, "diff --git a/x b/x", "Subject: later") == [("(no subject)", ("x",))]


def test_both_sides_of_a_diff_git_line_and_each_path_once() -> None:
    assert _commits(FROM, "Subject: s", "diff --git a/old.py b/new.py", "--- a/old.py", "+++ b/new.py") == [
        ("s", ("old.py", "new.py"))
    ]
    assert _commits("diff --git a/dir b/x b/dir b/x") == [("(no subject)", ("dir b/x b/dir", "x"))]
    assert _commits("diff --git whole") == [("(no subject)", ("diff --git whole"[len("diff --git ") :],))]


def test_the_headers_of_a_diff_without_git_name_their_paths_up_to_a_tab() -> None:
    assert _commits("--- a/one.txt\t2020-01-01", "+++ b/two.txt") == [("(no subject)", ("one.txt", "two.txt"))]
    assert _commits("--- /dev/null", "+++ b/new.txt") == [("(no subject)", ("new.txt",))]


@pytest.mark.parametrize("verb", ["rename from ", "rename to ", "copy from ", "copy to "])
def test_a_rename_or_copy_names_its_path(verb: str) -> None:
    assert _commits(FROM, "Subject: s", verb + "a dir/file") == [("s", ("a dir/file",))]


def test_a_path_that_shows_as_nothing_is_left_out_and_paths_go_to_their_own_commit() -> None:
    assert _commits(FROM, "Subject: one", "rename to ", FROM, "Subject: two", "copy to b") == [
        ("one", ()),
        ("two", ("b",)),
    ]


def test_the_first_key_is_never_pinned_twice(tmp_path: Path) -> None:
    root, home = tmp_path / "registry", tmp_path / "home"
    root.mkdir()
    home.mkdir(exist_ok=True)
    approval.may_pin_first(root, str(tmp_path / "key"), home)  # nothing pinned, a place outside both
    (root / PIN_FILE).write_text("0" * 64)
    with pytest.raises(Refused) as refused:
        approval.may_pin_first(root, str(tmp_path / "key"), home)
    assert (
        str(refused.value)
        == "an approval key is pinned already: replace it with 'approve --new-key FILE --key-file OLD'"
    )


@pytest.mark.parametrize("inside", ["home", "registry"])
def test_the_key_is_never_kept_where_the_agent_reads(tmp_path: Path, inside: str) -> None:
    root, home = tmp_path / "registry", tmp_path / "home"
    root.mkdir()
    home.mkdir(exist_ok=True)
    target = (tmp_path / inside / "key").resolve()
    with pytest.raises(BadInput) as refused:
        approval.may_pin_first(root, str(tmp_path / inside / "key"), home)
    assert str(refused.value) == (
        f"{target} is inside AGENTMAIL_HOME or the registry: keep the approval key where the agent cannot read it"
    )


def test_the_key_path_is_resolved_before_it_is_judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, home = tmp_path / "registry", tmp_path / "home"
    root.mkdir()
    home.mkdir(exist_ok=True)
    (tmp_path / "link").symlink_to(home)
    with pytest.raises(BadInput):
        approval.may_pin_first(root, str(tmp_path / "link" / "key"), home)
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(BadInput):
        approval.may_pin_first(root, "~/key", home)
    assert approval._target(root, "~/../key", tmp_path / "elsewhere") == (tmp_path / "key").resolve()


def test_a_home_bound_to_another_registry_pins_nothing(tmp_path: Path) -> None:
    root, other, home = tmp_path / "registry", tmp_path / "theirs", tmp_path / "home"
    for folder in (root, other, home):
        folder.mkdir(exist_ok=True)
    (other / "bus.toml").write_text("")
    (home / bound.BOUND_FILE).write_text(str(other.resolve()) + "\n")
    with pytest.raises(ConfigError, match="cannot stand in for it"):
        approval.may_pin_first(root, str(tmp_path / "key"), home)


PATCH_TEXT = f"{FROM}\nSubject: [PATCH] plan\n\ndiff --git a/plan.py b/plan.py\n".encode()


def _held(*attached: tuple[str, str, bytes]) -> tuple[Letter, bytes]:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"], msg["Message-ID"] = "a@bus.test", "b@bus.test", "s", "<m@bus.test>"
    msg["Date"] = "Mon, 01 Jan 2024 00:00:00 +0000"
    msg.set_content("the body\n")
    for name, kind, data in attached:
        maintype, _, subtype = kind.partition("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    for part in msg.iter_parts():
        del part["MIME-Version"]  # a part's own MIME-Version is refused as malformed
    letter = Letter(message_id="<m@bus.test>", sender="alpha", sender_address="a@bus.test", to="beta",
                    to_address="b@bus.test", type="report", thread="thr-abcdef", subject="s", body="the body",
                    date=str(msg["Date"]), id="L1", recipients=("b@bus.test", "c@bus.test"), cc=("p@people.test",))  # fmt: skip
    return letter, msg.as_bytes()


def test_the_listing_names_every_recipient_and_each_attachment() -> None:
    letter, raw = _held(("a.log", "text/plain", b"log\n"), ("b.bin", "application/octet-stream", b"\x00\x01"))
    shown = approval._listed(letter, ("b@bus.test", "x@bus.test"), raw, "DIGEST")
    a, b = approval.attachments_of(raw)
    assert shown == [
        "To: b@bus.test",
        "To: c@bus.test",
        "Cc: p@people.test",
        "Delivered to: b@bus.test, x@bus.test",
        "Attachments: 2",
        f"  a.log (text/plain, {a.size} bytes)",
        f"    SHA-256 {a.sha256}",
        f"  b.bin (application/octet-stream, {b.size} bytes)",
        f"    SHA-256 {b.sha256}",
        "Digest: DIGEST",
    ]
    bare, raw = _held()
    assert approval._listed(bare.replace(recipients=(), cc=()), (), raw, "D") == [
        "To: b@bus.test",
        "Delivered to: ",
        "Attachments: none",
        "Digest: D",
    ]


@pytest.mark.parametrize(
    ("name", "kind", "read"),
    [
        ("fix.patch", "application/octet-stream", True),
        ("fix.diff", "application/octet-stream", True),
        ("changes.txt", "text/x-diff", True),
        ("notes.txt", "text/plain", False),
        ("fix.PATCH", "text/plain", False),
    ],
)
def test_a_patch_is_read_for_its_commits_by_its_type_or_its_name(name: str, kind: str, read: bool) -> None:
    letter, raw = _held((name, kind, PATCH_TEXT))
    shown = approval._listed(letter, (), raw, "D")
    assert (["    commit: plan", "      plan.py"] if read else []) == [
        x for x in shown if x.startswith("    c") or x.startswith("      ")
    ]


def test_the_announcement_says_why_and_what_in_its_first_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    said: dict[str, Any] = {}

    def compose(
        registry: Any, home: Any, platform: str, to: Any, subject: str, body: str, **kw: Any
    ) -> tuple[str, bytes]:
        said.update(platform=platform, subject=subject, body=body, **kw)
        return "<id@bus.test>", b"raw"

    monkeypatch.setattr(for_people, "compose_for_people", compose)
    monkeypatch.setattr(approval, "approvers", lambda registry, platform: ("carol@people.test",))
    letter, raw = _held()
    assert approval.announcement(None, Path("."), "alpha", letter, "held: a person", raw, ("b@bus.test",)) == (  # type: ignore[arg-type]
        "<id@bus.test>",
        b"raw",
    )
    lines = said["body"].split("\n")
    assert lines[:7] == [
        "A letter from alpha waits for your approval before it is sent.",
        "Why it waits: held: a person",
        "",
        "Letter: L1 (thread thr-abcdef)",
        f"Subject: {quoted('s')}",
        "Type: report",
        "To: b@bus.test",
    ]
    assert said["subject"] == f"Approve? {quoted('s')} (L1)" and said["as_written"] is True
    assert "Any change to this letter or its recipients needs a new approval." in lines
    assert lines[-2:] == ["-- ", approval.HOW_TO_ANSWER]


def test_a_from_line_is_a_commit_from_46_characters_and_only_with_hex_in_all_40_places() -> None:
    one = [FROM, "Subject: one"]
    assert _commits(*one, f"From {SHA}", "Subject: two") == [("one", ())]  # 45 characters
    assert _commits(*one, f"From {SHA} ", "Subject: two") == [("one", ()), ("two", ())]  # 46
    assert _commits(*one, f"From {SHA[:-1]}X Mon", "Subject: two") == [("one", ())]
    assert _commits(*one, f"From g{SHA[1:]} Mon", "Subject: two") == [("one", ())]


def test_a_subject_loses_only_its_first_bracket() -> None:
    assert _commits(FROM, "Subject: [PATCH v2] fix [ci] it") == [("fix [ci] it", ())]


def _announced(monkeypatch: pytest.MonkeyPatch, letter: Letter, raw: bytes, envelope: tuple[str, ...]) -> str:
    said: dict[str, Any] = {}

    def compose(*args: Any, **kw: Any) -> tuple[str, bytes]:
        said["body"] = args[5]
        return "<id@bus.test>", b"raw"

    monkeypatch.setattr(for_people, "compose_for_people", compose)
    monkeypatch.setattr(approval, "approvers", lambda registry, platform: ("carol@people.test",))
    approval.announcement(None, Path("."), "alpha", letter, "why", raw, envelope)  # type: ignore[arg-type]
    body: str = said["body"]
    return body


def test_a_long_envelope_is_wrapped_and_the_body_stands_between_blank_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    letter, raw = _held()
    envelope = tuple(f"person{n}@people.test" for n in range(12))
    body = _announced(monkeypatch, letter, raw, envelope)
    delivered = "Delivered to: " + ", ".join(envelope)
    assert for_people.wrap(delivered) != delivered and for_people.wrap(delivered) in body
    assert delivered not in body
    digest = approval.digest_of(raw, envelope)
    tail = f"Digest: {digest}\nAny change to this letter or its recipients needs a new approval.\n\n"
    assert body.endswith(tail + framed(letter.body) + "\n\n-- \n" + approval.HOW_TO_ANSWER)
