"""Key rotation with overlap (issue 26): ``keygen --rotate WINDOW`` pins the new key beside the
old one, so a letter signed with the old key and still in flight is accepted; after the window
it is refused saying so; ``keygen --retire`` drops the old key. End to end on the local post
office with real dkimpy signatures; the window's end is written into the registry, so nothing
waits on a clock."""

from __future__ import annotations

import json
import re
import time
import tomllib
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import BadInput, NotFound

from ..conftest import OPENER, Cli


def _client(home: Path, platform: str) -> AgentMail:
    return AgentMail(registry_mod.load(home / "registry"), Identity(platform), home)


def _entry(home: Path, name: str = "alpha") -> dict[str, object]:
    return tomllib.loads((home / "registry" / "platforms" / f"{name}.toml").read_text())


def _set_until(home: Path, until: str) -> None:
    path = home / "registry" / "platforms" / "alpha.toml"
    path.write_text(re.sub(r'until = "[^"]*"', f'until = "{until}"', path.read_text()))


def test_letters_in_flight_during_a_rotation_are_accepted_and_both_selectors_are_valid(
    registry: Registry, home: Path
) -> None:
    old = registry.platforms["alpha"]
    in_flight = _client(home, "alpha").send("beta", "Signed before", OPENER)  # not read by beta yet
    rotated = bus.keygen(home, registry, "alpha", overlap=7 * 86400)
    assert rotated.selector != old.selector and rotated.retiring is not None
    dkim = _entry(home)["dkim"]
    assert isinstance(dkim, dict) and dkim["selector"] == rotated.selector
    assert dkim["previous"]["selector"] == old.selector and dkim["previous"]["public_key"] == old.public_key
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", dkim["previous"]["until"])
    after = _client(home, "alpha").send("beta", "Signed after", OPENER)
    beta = _client(home, "beta")
    letters = beta.inbox()
    assert [x.message_id for x in letters] == [in_flight.message_id, after.message_id]
    assert beta.quarantined() == []
    raws = [beta.spool.read.raw(x.id) for x in letters]
    assert f"s={old.selector};".encode() in raws[0] and f"s={rotated.selector};".encode() in raws[1]


def test_after_the_window_an_old_key_letter_is_refused_with_a_reason_that_says_so(
    registry: Registry, home: Path
) -> None:
    old = registry.platforms["alpha"]
    _client(home, "alpha").send("beta", "Signed before", OPENER)
    bus.keygen(home, registry, "alpha", overlap=3600)
    _set_until(home, "2000-01-01T00:00:00Z")  # the window is over
    beta = _client(home, "beta")
    assert beta.inbox() == []
    (held,) = beta.quarantined()
    assert held.reason == "unauthenticated"
    assert f"previous key (s={old.selector}), whose overlap ended at 2000-01-01T00:00:00Z" in (held.detail or "")
    # the registry fixed (a longer window, within the 90 days a previous key may last): the review files it
    _set_until(home, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86400)))
    (result,) = _client(home, "beta").recheck_quarantine()
    assert result["outcome"] == "filed"


def test_retire_drops_the_old_key_and_a_plain_keygen_keeps_none(registry: Registry, home: Path) -> None:
    _client(home, "alpha").send("beta", "Signed before", OPENER)
    bus.keygen(home, registry, "alpha", overlap=3600)
    _set_until(home, "2000-01-01T00:00:00Z")  # the window is over: retiring loses nothing in flight
    retired = bus.retire(registry_mod.load(home / "registry"), "alpha")
    assert retired.retiring is None and "previous" not in _entry(home)["dkim"]  # type: ignore[operator]
    with pytest.raises(NotFound, match="no previous key to retire"):
        bus.retire(registry_mod.load(home / "registry"), "alpha")
    beta = _client(home, "beta")
    (held,) = beta.quarantined()
    assert held.reason == "unauthenticated" and "no valid signature by alpha's pinned key" in (held.detail or "")
    bus.keygen(home, registry_mod.load(home / "registry"), "alpha")  # as before: the old key gone at once
    assert "previous" not in _entry(home)["dkim"]  # type: ignore[operator]


@pytest.mark.parametrize(
    ("previous", "why"),
    [
        ('previous = "old"', r"\[dkim.previous\] must be a table"),
        ('[dkim.previous]\nselector = "a-1"\nuntil = "2026-12-09T14:00:00Z"\nextra = 1', "unknown key 'extra'"),
        ('[dkim.previous]\nselector = "{current}"\npublic_key = "{key}"\nuntil = "2026-12-09T14:00:00Z"', "current"),
        ('[dkim.previous]\nselector = "a-1"\npublic_key = "short"\nuntil = "2026-12-09T14:00:00Z"', "base64"),
        ('[dkim.previous]\nselector = "a-1"\npublic_key = "{key}"\nuntil = "next week"', "must be a UTC time"),
        ('[dkim.previous]\nselector = "a-1"\npublic_key = "{key}"\nuntil = "2026-13-45T00:00:00Z"', "not a real time"),
        ('[dkim.previous]\nselector = "a-1"\npublic_key = "{key}"\nuntil = 2026-12-09T14:00:00Z', "UTC time"),
        ('[dkim.previous]\nselector = "a 1"\npublic_key = "{key}"\nuntil = "2026-12-09T14:00:00Z"', "invalid"),
        ('[dkim.previous]\nselector = "a-1"\nalgorithm = "dsa"\npublic_key = "{key}"\nuntil = "2026-12-09T14:00:00Z"',
         "algorithm"),
    ],
)  # fmt: skip
def test_hostile_previous_key_entries_are_skipped_naming_the_problem(
    registry: Registry, home: Path, previous: str, why: str
) -> None:
    alpha = registry.platforms["alpha"]
    path = home / "registry" / "platforms" / "alpha.toml"
    text = path.read_text()
    if previous.startswith("previous ="):
        text = text.replace("[dkim]\n", f"[dkim]\n{previous}\n")
    else:
        text += "\n" + previous.format(current=alpha.selector, key=alpha.public_key) + "\n"
    path.write_text(text)
    loaded = registry_mod.load(home / "registry")  # a bad entry is skipped, naming why; the bus still loads
    assert "alpha" not in loaded.platforms and "beta" in loaded.platforms
    (problem,) = loaded.problems
    assert re.search(why, problem), problem


def test_the_cli_rotates_with_a_window_and_retires(registry: Registry, home: Path, cli: Cli) -> None:
    old = registry.platforms["alpha"].selector
    code, _, err = cli("--as", "alpha", "keygen", "--rotate", "forever")
    assert code == 2 and "duration" in err and len(err.splitlines()) == 1
    code, _, err = cli("--as", "alpha", "keygen", "--rotate", "7d", "--retire")
    assert code == 2 and "one at a time" in err
    code, out, _ = cli("--as", "alpha", "--json", "keygen", "--rotate", "7d")
    entry = json.loads(out)
    assert code == 0 and entry["dkim"]["previous"]["selector"] == old and entry["dkim"]["selector"] != old
    code, _, err = cli("--as", "alpha", "keygen", "--force")
    assert code == 2 and "--force goes with --retire" in err
    code, _, err = cli("--as", "alpha", "keygen", "--retire")  # the window has not ended
    assert code == 2 and "is valid until" in err and len(err.splitlines()) == 1
    code, out, _ = cli("--as", "alpha", "--json", "keygen", "--retire", "--force")
    assert code == 0 and "previous" not in json.loads(out)["dkim"]
    code, _, err = cli("--as", "alpha", "keygen", "--retire")
    assert code == 1 and "no previous key" in err


def test_retiring_before_the_window_ends_is_refused_naming_until_and_recheck_still_works(
    registry: Registry, home: Path
) -> None:
    """``keygen --retire`` straight after ``--rotate`` would quarantine the letters signed before
    the rotation for good (no recheck brings them back): refused, naming ``until``, unless forced."""
    _client(home, "alpha").send("beta", "Signed before", OPENER)  # in flight: beta has not synced
    rotated = bus.keygen(home, registry, "alpha", overlap=3600)
    assert rotated.retiring is not None
    with pytest.raises(BadInput, match=f"valid until {rotated.retiring.until}.*--force"):
        bus.retire(registry_mod.load(home / "registry"), "alpha")
    assert "previous" in _entry(home)["dkim"]  # type: ignore[operator]  (the registry untouched)
    (letter,) = _client(home, "beta").inbox()  # the letter in flight still verifies
    assert letter.subject == "Signed before"
    forced = bus.retire(registry_mod.load(home / "registry"), "alpha", force=True)
    assert forced.retiring is None and "previous" not in _entry(home)["dkim"]  # type: ignore[operator]
