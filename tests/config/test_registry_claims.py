"""The registry is hostile input (issue 37): one address per platform, a previous key that is
only ever the platform's own and lasts a bounded window, shown by ``platforms`` and ``doctor``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.admin.doctor import run_checks
from agentmail.config import registry
from agentmail.config.registry import MAX_OVERLAP, Registry, parse_previous
from agentmail.errors import BadInput, ConfigError

from ..conftest import Cli
from ..depth import examples, suppressed


def _until(seconds_from_now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds_from_now))


def _add_previous(home: Path, name: str, key: str, until: str, selector: str = "old-1") -> None:
    path = home / "registry" / "platforms" / f"{name}.toml"
    path.write_text(
        path.read_text() + f'\n[dkim.previous]\nselector = "{selector}"\npublic_key = "{key}"\nuntil = "{until}"\n'
    )


def test_two_entries_claiming_one_address_stop_every_command_naming_both(registry: Registry, home: Path,
                                                                          cli: Cli) -> None:  # fmt: skip
    folder = home / "registry" / "platforms"
    # "aaa" sorts before alpha: it used to win alpha's address, its key then verifying alpha's letters
    forged = (folder / "beta.toml").read_text().replace('name = "beta"', 'name = "aaa"')
    (folder / "aaa.toml").write_text(forged.replace("beta@bus.test", "alpha@bus.test"))
    for args in (("--as", "alpha", "inbox"), ("platforms",), ("--as", "beta", "send", "alpha", "-s", "x", "-b", "y")):
        code, out, err = cli(*args)
        assert code == 6 and out == "" and err.count("\n") == 1, (args, err)
        assert f"{folder / 'aaa.toml'} and {folder / 'alpha.toml'} both claim the address alpha@bus.test" in err


def test_a_previous_key_that_is_another_platforms_key_is_refused(registry: Registry, home: Path, cli: Cli) -> None:
    beta_key = registry.platforms["beta"].public_key
    _add_previous(home, "alpha", beta_key, _until(86400))  # beta could then sign as alpha
    with pytest.raises(ConfigError) as refused:
        registry_mod_load(home)
    folder = home / "registry" / "platforms"
    assert str(refused.value) == (
        f"{folder / 'alpha.toml'}: the previous key (s=old-1) of alpha is the current key "
        f"(s={registry.platforms['beta'].selector}) of beta ({folder / 'beta.toml'}): beta could sign as alpha; "
        "a previous key is only ever the platform's own ('keygen --retire' drops it)"
    )
    code, out, _ = cli("--as", "alpha", "doctor")
    assert code == 6 and "beta could sign as alpha" in out  # doctor's registry line


def test_a_previous_key_shared_by_two_platforms_is_refused(registry: Registry, home: Path) -> None:
    shared = "Q" * 43 + "="
    _add_previous(home, "alpha", shared, _until(3600))
    _add_previous(home, "beta", shared, _until(3600), selector="old-2")
    with pytest.raises(ConfigError, match=r"previous key \(s=old-1\) of alpha is the previous key \(s=old-2\) of beta"):
        registry_mod_load(home)


def test_a_previous_key_kept_longer_than_the_maximum_skips_the_entry_saying_why(registry: Registry,
                                                                                home: Path) -> None:  # fmt: skip
    _add_previous(home, "alpha", "Z" * 43 + "=", _until(MAX_OVERLAP + 3600))
    reg = registry_mod_load(home)
    assert list(reg.platforms) == ["beta"]
    assert "is more than 90 days away: a previous key is for letters in flight" in reg.problems[0]


def test_keygen_rotate_keeps_the_old_key_at_most_the_maximum(registry: Registry, home: Path, cli: Cli) -> None:
    with pytest.raises(BadInput, match="at most 90 days"):
        bus.keygen(home, registry, "alpha", overlap=MAX_OVERLAP + 60)
    assert registry_mod_load(home).platforms["alpha"] == registry.platforms["alpha"]  # nothing written
    code, _, err = cli("--as", "alpha", "keygen", "--rotate", "13w")
    assert code == 2 and "at most 90 days" in err
    code, out, err = cli("--as", "alpha", "keygen", "--rotate", "90d")
    assert code == 0, err
    assert registry_mod_load(home).platforms["alpha"].retiring is not None


def test_platforms_and_doctor_show_every_previous_key(registry: Registry, home: Path, cli: Cli) -> None:
    rotated = bus.keygen(home, registry, "alpha", overlap=7 * 86400)
    old = rotated.retiring
    assert old is not None
    code, out, _ = cli("--json", "platforms")
    rows = {row["name"]: row for row in json.loads(out)["platforms"]}
    assert code == 0 and rows["alpha"]["previous"] == {"selector": old.selector, "until": old.until, "valid": True}
    assert rows["beta"]["previous"] is None
    code, out, _ = cli("platforms")
    assert f"previous key s={old.selector} until {old.until} (still valid)" in out
    checks = {c.name: c for c in run_checks(home, home / "registry", "alpha", None)}
    assert checks["previous keys"].ok
    assert checks["previous keys"].detail == f"alpha: s={old.selector} until {old.until} (still valid)"
    bus.retire(registry_mod_load(home), "alpha", force=True)
    checks = {c.name: c for c in run_checks(home, home / "registry", "alpha", None)}
    assert checks["previous keys"].detail == "none kept"


def registry_mod_load(home: Path) -> Registry:
    return registry.load(home / "registry")


NOW = 1_800_000_000.0  # a fixed clock: the property never reads the time


@settings(max_examples=examples(300), deadline=None, suppress_health_check=suppressed(HealthCheck.too_slow))
@given(offset=st.integers(min_value=-20 * 365 * 86400, max_value=20 * 365 * 86400))
def test_a_previous_keys_window_is_taken_exactly_up_to_the_maximum(offset: int) -> None:
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW + offset))
    value = {"selector": "s0", "public_key": "B" * 40, "until": until}
    if offset <= MAX_OVERLAP:
        got = parse_previous(value, "s1", "pinned", now=NOW)
        assert got is not None and got.until == until and got.valid_at(NOW) == (offset >= 0)
    else:
        with pytest.raises(ConfigError, match="more than 90 days away"):
            parse_previous(value, "s1", "pinned", now=NOW)


KEYS = ["A" * 40, "B" * 40, "C" * 40, "D" * 40]


@settings(max_examples=examples(200), deadline=None, suppress_health_check=suppressed(HealthCheck.too_slow))
@given(
    entries=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(KEYS), st.none() | st.sampled_from(KEYS)),
        min_size=1,
        max_size=4,
    ),
)
def test_a_registry_loads_only_when_no_entry_claims_what_another_owns(
    tmp_path_factory: pytest.TempPathFactory, entries: list[tuple[str, str, str | None]]
) -> None:
    root = tmp_path_factory.mktemp("reg")
    (root / "platforms").mkdir()
    (root / "bus.toml").write_text('domain = "bus.test"\n')
    until = _until(3600)
    for number, (local, key, old) in enumerate(entries):
        text = f'address = "{local}@bus.test"\n[dkim]\nselector = "s1"\npublic_key = "{key}"\n'
        if old is not None:
            text += f'[dkim.previous]\nselector = "s0"\npublic_key = "{old}"\nuntil = "{until}"\n'
        (root / "platforms" / f"p{number}.toml").write_text(text)
    addresses = [local for local, _, _ in entries]
    current = [key for _, key, _ in entries]
    stolen = any(
        old is not None and any(j != i and old in (entries[j][1], entries[j][2]) for j in range(len(entries)))
        for i, (_, _, old) in enumerate(entries)
    )
    if len(set(addresses)) < len(addresses) or stolen:
        with pytest.raises(ConfigError, match="both claim the address|could sign as"):
            registry.load(root)
    else:
        reg = registry.load(root)
        assert [p.public_key for p in reg.platforms.values()] == current and not reg.problems


def test_an_mcp_server_on_such_a_registry_answers_each_tool_with_the_one_line(registry: Registry, home: Path) -> None:
    from agentmail.cli import mcp_server
    from agentmail.client.facade import AgentMail
    from agentmail.config.identity import Identity

    folder = home / "registry" / "platforms"
    forged = (folder / "beta.toml").read_text().replace('name = "beta"', 'name = "aaa"')
    (folder / "aaa.toml").write_text(forged.replace("beta@bus.test", "alpha@bus.test"))
    tools = mcp_server.Tools(lambda: AgentMail(registry_mod_load(home), Identity("alpha"), home))
    text, failed = tools.run("inbox", {})
    assert failed and "both claim the address alpha@bus.test" in text and "\n" not in text
