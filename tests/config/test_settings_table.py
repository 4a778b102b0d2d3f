"""The bus's settings as one table (config/settings.py): loading, ``bus set``, its list of
settings and its help all read the rows, so a row is the whole of a setting (with its field in
``registry.Bus``, which these tests hold equal to the rows). A VALUE given to ``bus set`` is
outside input: it is stored and loads back, or refused with one line, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.config import registry as registry_mod
from agentmail.config.registry import Bus, Registry
from agentmail.config.settings import NAMES, SETTINGS, TOP_KEYS, help_text, setting
from agentmail.errors import BadInput

from ..conftest import Cli
from ..depth import examples, suppressed
from ..system.test_lean_paths import _after_main

# The Bus fields no top-level row makes: the tables' (registry reads them with its own parsers).
TABLE_FIELDS = {"smtp", "imap", "poll_interval", "groups"}


def test_every_top_level_row_is_a_bus_field_and_every_field_a_row_or_a_table() -> None:
    assert set(Bus._fields) == set(TOP_KEYS) | TABLE_FIELDS
    assert tuple(s.name for s in SETTINGS if s.check is not None) == TOP_KEYS


def test_a_row_s_default_is_the_bus_field_s_default() -> None:
    made = Bus("bus.test", "bus.test")
    loaded = registry_mod.parse_bus({"domain": "bus.test"})
    assert loaded == made
    for row in SETTINGS:
        if row.check is not None and row.name not in ("name", "domain"):
            assert row.check(row.name, row.default) == getattr(made, row.name), row.name


def test_every_row_bus_set_does_not_read_itself_has_its_own_code_in_admin_bus() -> None:
    assert {s.name for s in SETTINGS if s.read is None} == set(bus._SPECIAL)


def test_bus_set_s_help_names_every_setting_in_the_table_s_order(cli: Cli) -> None:
    code, out, _ = cli("bus", "set", "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert " ".join(help_text().split()) in flat
    assert [flat.index(f"{name} ") for name in NAMES] == sorted(flat.index(f"{name} ") for name in NAMES)


def test_setting_finds_a_group_by_either_prefix() -> None:
    row = setting("groups.ops")
    assert row is not None and row.name == "groups.NAME"
    assert setting("group.ops") is row
    assert setting("groups") is None and setting("bogus") is None


def test_an_unknown_setting_lists_every_one_and_the_likeliest_meant(registry: Registry, cli: Cli) -> None:
    listing = ", ".join(NAMES)
    code, out, err = cli("bus", "set", "max_sise", "5")
    assert (code, out) == (2, "")
    assert err.strip() == f"agentmail: unknown setting 'max_sise'; did you mean max_size? (one of: {listing})"
    code, _, err = cli("bus", "set", "zzz", "5")
    assert code == 2 and err.strip() == f"agentmail: unknown setting 'zzz'; one of: {listing}"


def test_an_unknown_setting_is_refused_before_anything_is_written(registry: Registry) -> None:
    before = (registry.root / "bus.toml").read_bytes()
    with pytest.raises(BadInput, match="did you mean stale_after"):
        bus.set_setting(registry.root, "stale_aftr", ["3d"])
    assert (registry.root / "bus.toml").read_bytes() == before


@pytest.mark.parametrize(
    "key,values,stored,loaded",
    [
        ("name", ["ops"], "ops", "ops"),
        ("max_size", ["8192"], 8192, 8192),
        ("attach_max_count", ["3"], 3, 3),
        ("new_threads_per_hour", ["0"], 0, 0),
        ("hold", [" Partner.Example ", ""], ["partner.example"], ("partner.example",)),
        ("trusted_authserv_ids", ["mx.test", ""], ["mx.test"], ("mx.test",)),
        ("attach_types", ["TEXT/PLAIN"], ["text/plain"], ("text/plain",)),
        ("auth", ["xoauth2"], "xoauth2", "xoauth2"),
        ("stale_after", ["3d"], "3d", 3 * 86400),
        ("sent_folder", [""], "", ""),
    ],
)
def test_each_reader_stores_what_loads_back(
    registry: Registry, key: str, values: list[str], stored: object, loaded: object
) -> None:
    assert bus.set_setting(registry.root, key, values) == stored
    assert getattr(registry_mod.load(registry.root).bus, key) == loaded


def test_an_empty_stale_after_takes_the_key_off(registry: Registry) -> None:
    bus.set_setting(registry.root, "stale_after", ["3d"])
    assert bus.set_setting(registry.root, "stale_after", [" "]) == ""
    assert "stale_after" not in (registry.root / "bus.toml").read_text()
    assert registry_mod.load(registry.root).bus.stale_after is None


@pytest.mark.parametrize(
    "key,values,sentence",
    [
        ("max_size", ["big"], "max_size is a number of bytes"),
        ("attach_max_bytes", ["1.5"], "attach_max_bytes is a whole number"),
        ("new_threads_per_hour", ["x"], "new_threads_per_hour is a whole number"),
        ("policy", ["a", "b"], "'bus set policy' takes one value"),
        ("auth", ["kerberos"], "auth must be one of password, xoauth2, oauthbearer, not 'kerberos'"),
        ("max_size", ["100"], "bus.toml: max_size must be a number of bytes >= 4096"),
    ],
)
def test_a_reader_s_refusal_is_one_sentence(registry: Registry, key: str, values: list[str], sentence: str) -> None:
    before = (registry.root / "bus.toml").read_bytes()
    with pytest.raises(BadInput) as refused:
        bus.set_setting(registry.root, key, values)
    assert str(refused.value) == sentence
    assert (registry.root / "bus.toml").read_bytes() == before


_PLAIN = [s.name for s in SETTINGS if s.read is not None]


@settings(
    max_examples=examples(200), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(key=st.sampled_from(_PLAIN), values=st.lists(st.text(max_size=30), min_size=1, max_size=3))
def test_any_value_bus_set_takes_loads_back_or_is_refused_in_one_line(
    registry: Registry, key: str, values: list[str]
) -> None:
    path: Path = registry.root / "bus.toml"
    before = path.read_bytes()
    try:
        bus.set_setting(registry.root, key, values)
    except BadInput as exc:
        assert str(exc) and "\n" not in str(exc)
        assert path.read_bytes() == before
        return
    registry_mod.load(registry.root)  # what was written loads
    path.write_bytes(before)  # the next example starts from the same bus


def test_a_start_loads_the_settings_table_only_to_show_bus_set_s_help(home: Path) -> None:
    loaded = "[m for m in sys.modules if m == 'agentmail.config.settings']"
    assert _after_main(home, loaded, "--help") == []
    assert _after_main(home, loaded, "bus", "--help") == ["agentmail.config.settings"]
