"""``verify``'s answer for each letter, exactly (mutation run 12): the Message-ID, date and sender
read from the signed letter, and the reason word for word, whether it verified or not and why."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import time
import tomllib
from email import message_from_bytes
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import pytest

from agentmail.archive import proof
from agentmail.archive.proof import Checked
from agentmail.client.facade import AgentMail
from agentmail.config.registry import Registry, parse_platform
from agentmail.errors import BadInput, ConfigError
from agentmail.letter import wire
from agentmail.text import one_line

from .test_attacks import _forged
from .test_proof import _bundle_with_previous, _commit, _git, _one_letter_bundle


def _raw(bundle: dict[str, Any]) -> bytes:
    return base64.b64decode(bundle["letters"][0]["raw"])


def _with_raw(bundle: dict[str, Any], raw: bytes) -> bytes:
    bundle["letters"][0]["raw"] = base64.b64encode(raw).decode()
    return json.dumps(bundle).encode()


def _head(raw: bytes) -> tuple[str, str]:
    msg = message_from_bytes(raw)
    return str(msg["Message-ID"]).strip(), str(msg["Date"])


def _date_changed(raw: bytes, dates: list[bytes]) -> bytes:
    """``raw`` with its Date header replaced by ``dates`` (none, one or several)."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"date:")]
    return b"\r\n".join(lines + [b"Date: " + d for d in dates]) + sep + body


def test_a_verified_letter_says_its_own_message_id_date_and_sender(alpha: AgentMail, registry: Registry) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    message_id, date = _head(_raw(bundle))
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    assert checked == Checked(True, message_id, date, "alpha@bus.test", checked.detail, "current registry", "")
    assert checked.detail.startswith("dkim=pass")


def test_with_an_anchor_the_verifiers_registry_is_named(alpha: AgentMail, registry: Registry) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    (checked,) = proof.verify(json.dumps(bundle).encode(), proof.Anchor(registry)).letters
    assert checked.ok and checked.checked == str(registry.root)


def test_a_letter_its_anchor_refuses_still_names_what_it_signed(alpha: AgentMail, registry: Registry) -> None:
    forged = _forged(alpha, registry)
    raw = base64.b64decode(json.loads(forged)["letters"][0]["raw"])
    message_id, date = _head(raw)
    (checked,) = proof.verify(forged, proof.Anchor(registry)).letters
    assert (checked.ok, checked.message_id, checked.date, checked.sender) == (False, message_id, date, "alpha@bus.test")
    assert checked.detail == (
        f"the bundle's key is not alpha's key at the letter's date in your registry at {registry.root} "
        "(the current file): the bundle vouches only for itself"
    )


def test_a_letter_without_a_date_or_with_two_is_not_proved_and_says_so(alpha: AgentMail, registry: Registry) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    message_id, date = _head(_raw(bundle))
    for dates in ([], [date.encode(), date.encode()], [b"not a date"]):
        (checked,) = proof.verify(_with_raw(bundle, _date_changed(_raw(bundle), dates))).letters
        said = "not a date" if dates == [b"not a date"] else ""
        expected = Checked(False, message_id, said, "alpha@bus.test",
                           "the letter carries no single readable Date", "current registry")  # fmt: skip
        assert checked == expected


def test_the_date_shown_is_cut_at_64_characters(alpha: AgentMail, registry: Registry) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    _, date = _head(_raw(bundle))
    long = date + " (" + "x" * 80 + ")"
    (checked,) = proof.verify(_with_raw(bundle, _date_changed(_raw(bundle), [long.encode()]))).letters
    assert checked.date == long[:64] and len(checked.date) == 64


def test_a_letter_without_an_entry_names_what_it_signed(alpha: AgentMail, registry: Registry) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    message_id, date = _head(_raw(bundle))
    bundle["letters"][0]["entry"] = ""
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    reason = "no registry entry for its sender (a person's letter, or not a platform's)"
    assert checked == Checked(False, message_id, date, "alpha@bus.test", reason, "no entry")


def test_a_letter_that_does_not_parse_says_why_in_160_characters(alpha: AgentMail, registry: Registry) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    raw = re.sub(rb"(?m)^From: .*$", b"From: " + b"x" * 200 + b"@bus", _raw(bundle))
    try:
        wire.sender_of(wire.parse_message(raw, proof.MAX_LETTER))
    except wire.Malformed as exc:
        why = one_line(str(exc))
    assert len(why) > 160
    (checked,) = proof.verify(_with_raw(bundle, raw)).letters
    assert checked == Checked(False, "", "", "", f"the letter does not parse ({why[:160]})", "current registry")


def _entry_toml(bundle: dict[str, Any], old: str, new: str) -> None:
    for entry in bundle["entries"].values():
        entry["toml"] = entry["toml"].replace(old, new)


def test_a_letter_from_another_address_than_its_entrys_names_what_it_signed(
    alpha: AgentMail, registry: Registry
) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    message_id, date = _head(_raw(bundle))
    _entry_toml(bundle, "alpha@bus.test", "gamma@bus.test")
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    reason = "From alpha@bus.test is not alpha's address gamma@bus.test"
    assert checked == Checked(False, message_id, date, "alpha@bus.test", reason, "current registry")


def test_a_key_looked_up_in_dns_names_what_it_signed(alpha: AgentMail, registry: Registry) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    message_id, date = _head(_raw(bundle))
    _entry_toml(bundle, 'lookup = "pinned"', 'lookup = "dns"')
    _entry_toml(bundle, "[dkim]", '[dkim]\nlookup = "dns"')
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    reason = "alpha's key was looked up in DNS, not pinned: nothing to check offline"
    assert checked == Checked(False, message_id, date, "alpha@bus.test", reason, "current registry")


def test_a_letter_whose_signature_fails_names_what_it_signed(alpha: AgentMail, registry: Registry) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    raw = _raw(bundle)
    message_id, date = _head(raw)
    (checked,) = proof.verify(_with_raw(bundle, raw.replace(b"Subject: Quota", b"Subject: Quote"))).letters
    assert (checked.ok, checked.message_id, checked.date, checked.sender) == (False, message_id, date, "alpha@bus.test")
    assert checked.detail == "the signature does not verify against the pinned key"


def _previous_until(alpha: AgentMail, registry: Registry, home: Path, shift: int) -> tuple[dict[str, Any], str]:
    """A bundle whose letter was signed by the previous key, that key's window ending ``shift``
    seconds after the letter's Date; and that date."""
    bundle = json.loads(_bundle_with_previous(alpha, registry, home, None))
    _, date = _head(_raw(bundle))
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(parsedate_to_datetime(date).timestamp() + shift))
    for entry in bundle["entries"].values():
        entry["toml"] = re.sub(r'until = "[^"]*"', f'until = "{until}"', entry["toml"])
    return bundle, until


def test_the_previous_key_verifies_a_letter_dated_the_last_second_of_its_window(
    alpha: AgentMail, registry: Registry, home: Path
) -> None:
    bundle, until = _previous_until(alpha, registry, home, 0)
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    assert checked.ok and checked.detail.endswith(f"(the previous key, in force until {until})")


def test_a_letter_by_the_previous_key_a_second_after_its_window_names_what_it_signed(
    alpha: AgentMail, registry: Registry, home: Path
) -> None:
    bundle, until = _previous_until(alpha, registry, home, -1)
    message_id, date = _head(_raw(bundle))
    selector = re.search(
        r'selector = "([^"]*)"', list(bundle["entries"].values())[0]["toml"].split("[dkim.previous]")[1]
    )
    assert selector is not None
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    reason = f"signed by the previous key s={selector[1]} after its window ended at {until}"
    assert checked == Checked(False, message_id, date, "alpha@bus.test", reason, "current registry")


def test_the_previous_key_is_checked_for_the_entrys_dkim_domain_not_its_address(
    alpha: AgentMail, registry: Registry, home: Path
) -> None:
    """The letter was signed d=bus.test; an entry whose [dkim] domain is another never lets it
    verify by the address's domain."""
    bundle, _ = _previous_until(alpha, registry, home, 3600)
    _entry_toml(bundle, '[dkim]\ndomain = "bus.test"', '[dkim]\ndomain = "other.test"')
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    assert not checked.ok and "not the pinned d=other.test" in checked.detail


def test_an_entry_that_does_not_read_says_why_cut_to_its_bounds(alpha: AgentMail, registry: Registry) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    (entry,) = bundle["entries"].values()
    toml = entry["toml"]
    entry.update(platform="p" * 50, toml="name = [")
    try:
        tomllib.loads("name = [")
    except tomllib.TOMLDecodeError as exc:
        why = one_line(str(exc))
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    assert checked.detail == f"the registry entry of {'p' * 40!r} does not read ({why})"
    entry.update(platform="alpha", toml=re.sub(r'(?m)^selector = "[^"]*"', f'selector = "{"s" * 200}"', toml, count=1))
    try:
        parse_platform(tomllib.loads(entry["toml"]), "alpha")
    except ConfigError as exc:
        why = one_line(str(exc))
    assert len(why) > 160
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    assert checked.detail == f"the registry entry of 'alpha' does not read ({why[:160]})"


def test_a_key_is_said_to_come_from_git_only_with_a_git_source_and_a_commit(
    alpha: AgentMail, registry: Registry
) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    (entry,) = bundle["entries"].values()
    for source, commit, where in (
        ("git", "", "current registry"),
        ("current", "abc", "current registry"),
        ("git", "0123456789abcdef", "git 0123456789ab 2020-01-01T00:00:00Z"),
    ):
        entry.update(source=source, commit=commit, committed="2020-01-01T00:00:00Z")
        (checked,) = proof.verify(json.dumps(bundle).encode()).letters
        assert checked.entry == where


def _doc(**fields: Any) -> bytes:
    return json.dumps({"format": proof.FORMAT, "thread": "thr-abcdef", "entries": {}, **fields}).encode()


ROW = {"raw": "", "entry": ""}
KEY = "k" * 70


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"\xff{}", "not a proof bundle: not UTF-8 JSON"),
        (b"{", "not a proof bundle: not UTF-8 JSON"),
        (b"[" * 100_000, "not a proof bundle: not UTF-8 JSON"),
        (b'{"format": "agentmail-proof/2"}', f"not a proof bundle: its format is not {proof.FORMAT}"),
        (b"[]", f"not a proof bundle: its format is not {proof.FORMAT}"),
        (json.dumps({"format": proof.FORMAT}).encode(), "not a proof bundle: thread is missing or not a str"),
        (_doc(entries=[]), "not a proof bundle: entries is missing or not a dict"),
        (_doc(entries={KEY: 1}), f"not a proof bundle: entry {'k' * 60!r} is not a table"),
        (_doc(entries={"e": {}}), "not a proof bundle: entry 'e': platform is missing or not a str"),
        (_doc(entries={KEY: {}}), f"not a proof bundle: entry {'k' * 60!r}: platform is missing or not a str"),
        (
            _doc(entries={"e": {"platform": "", "toml": "", "source": "", "commit": "", "committed": 1}}),
            "not a proof bundle: entry 'e': committed is missing or not a str",
        ),
        (_doc(), "not a proof bundle: letters is missing or not a list"),
        (_doc(letters=[]), f"not a proof bundle: it must hold 1 to {proof.MAX_LETTERS} letters"),
        (_doc(letters=[ROW, 1]), "not a proof bundle: letter 2 is not a table"),
        (_doc(letters=[ROW, {"entry": ""}]), "not a proof bundle: letter 2: raw is missing or not a str"),
        (_doc(letters=[{"raw": ""}]), "not a proof bundle: letter 1: entry is missing or not a str"),
    ],
)
def test_a_bundle_of_the_wrong_shape_is_refused_naming_the_first_thing_wrong(data: bytes, said: str) -> None:
    with pytest.raises(BadInput) as refused:
        proof.load(data)
    assert str(refused.value) == said


def test_a_bundle_is_read_up_to_its_size_and_letter_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _doc(letters=[ROW, ROW])
    monkeypatch.setattr(proof, "MAX_BUNDLE", len(data))
    monkeypatch.setattr(proof, "MAX_LETTERS", 2)
    assert proof.load(data) == ("thr-abcdef", {}, [ROW, ROW])
    with pytest.raises(BadInput) as refused:
        proof.load(data + b" ")
    assert str(refused.value) == f"the bundle is {len(data) + 1} bytes; at most {len(data)} are read"
    monkeypatch.setattr(proof, "MAX_BUNDLE", 1000)
    with pytest.raises(BadInput, match="it must hold 1 to 2 letters"):
        proof.load(_doc(letters=[ROW, ROW, ROW]))


def test_a_git_entry_is_shown_by_12_characters_of_its_commit_and_20_of_its_time(
    alpha: AgentMail, registry: Registry
) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    (entry,) = bundle["entries"].values()
    entry.update(source="git", commit="0123456789abcdef", committed="2020-01-01T00:00:00Z and more")
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    assert checked.entry == "git 0123456789ab 2020-01-01T00:00:00Z"


def test_a_letter_not_in_base64_is_said_so_and_the_next_letter_is_still_checked(
    alpha: AgentMail, registry: Registry
) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    good = dict(bundle["letters"][0])
    encoded = good["raw"]
    junk = {**good, "raw": encoded[:8] + "!" + encoded[8:]}  # base64 with a stray byte: never skipped over
    bundle["letters"] = [junk, good]
    result = proof.verify(json.dumps(bundle).encode())
    assert result.thread == bundle["thread"]
    bad, checked = result.letters
    assert bad == Checked(False, "", "", "", "the letter's bytes are not base64", "current registry")
    assert checked.ok


def test_a_letter_naming_no_entry_never_takes_an_entry_filed_under_no_name(
    alpha: AgentMail, registry: Registry
) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    (entry,) = bundle["entries"].values()
    bundle["entries"] = {"": entry}
    bundle["letters"][0]["entry"] = ""
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    assert not checked.ok and checked.entry == "no entry" and checked.detail.startswith("no registry entry")


def test_the_verifiers_previous_key_window_holds_to_its_last_second(
    alpha: AgentMail, registry: Registry, home: Path
) -> None:
    bundle, until = _previous_until(alpha, registry, home, 0)
    mine = registry.root / "platforms" / "alpha.toml"
    mine.write_text(re.sub(r'until = "[^"]*"', f'until = "{until}"', mine.read_text()))
    (checked,) = proof.verify(json.dumps(bundle).encode(), proof.Anchor(registry)).letters
    assert checked.ok and checked.checked == str(registry.root)


def test_a_refusal_names_the_commit_of_the_verifiers_registry_it_was_read_from(
    alpha: AgentMail, registry: Registry
) -> None:
    root = registry.root
    _git(root, "init", "-q")
    _commit(root, "the bus", time.time() - 60)
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    (checked,) = proof.verify(_forged(alpha, registry), proof.Anchor(registry)).letters
    assert checked.detail == (
        f"the bundle's key is not alpha's key at the letter's date in your registry at {root} "
        f"(git {commit.stdout.strip()[:12]}): the bundle vouches only for itself"
    )
