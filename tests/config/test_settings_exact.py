"""The checks of bus.toml's top-level values (config/settings.py's rows), word for word: each
refusal is one ConfigError naming its key, a value of the wrong type refused as such (never a
TypeError), each edge of what a check lets through, and ``bus set``'s one-value sentence naming
the key it was given."""

from __future__ import annotations

from typing import Any

import pytest

from agentmail.admin import bus
from agentmail.config import registry as registry_mod
from agentmail.config import settings as settings_mod
from agentmail.config.registry import Registry
from agentmail.errors import BadInput, ConfigError


def _bus(**values: Any) -> registry_mod.Bus:
    return registry_mod.parse_bus({"domain": "bus.test", **values})


@pytest.mark.parametrize(
    ("values", "sentence"),
    [
        ({"domain": 5}, "bus.toml: domain 5 is not a valid domain"),
        ({"domain": ["bus.test"]}, "bus.toml: domain ['bus.test'] is not a valid domain"),
        ({"domain": "not a domain"}, "bus.toml: domain 'not a domain' is not a valid domain"),
        ({"trusted_authserv_ids": ""}, "bus.toml: trusted_authserv_ids must be a list of names"),
        ({"trusted_authserv_ids": 5}, "bus.toml: trusted_authserv_ids must be a list of names"),
        ({"trusted_authserv_ids": [""]}, "bus.toml: trusted_authserv_ids must be a list of names"),
        ({"trusted_authserv_ids": ["mx.test", 5]}, "bus.toml: trusted_authserv_ids must be a list of names"),
        ({"ca_file": 5}, "bus.toml: ca_file must be a path (relative to the registry directory)"),
        ({"new_threads_per_hour": True}, "bus.toml: new_threads_per_hour must be a whole number >= 0"),
        ({"attach_max_count": False}, "bus.toml: attach_max_count must be a whole number >= 0"),
        ({"attach_max_bytes": -1}, "bus.toml: attach_max_bytes must be a whole number >= 0"),
        ({"attach_max_total": "1"}, "bus.toml: attach_max_total must be a whole number >= 0"),
        ({"attach_types": ""}, 'bus.toml: attach_types must be a list of lowercase MIME types (e.g. ["text/x-diff"])'),
        ({"attach_types": 5}, 'bus.toml: attach_types must be a list of lowercase MIME types (e.g. ["text/x-diff"])'),
        (
            {"attach_types": ["TEXT/PLAIN"]},
            'bus.toml: attach_types must be a list of lowercase MIME types (e.g. ["text/x-diff"])',
        ),
    ],
)
def test_each_check_refuses_in_its_own_sentence(values: dict[str, Any], sentence: str) -> None:
    with pytest.raises(ConfigError) as refused:
        _bus(**values)
    assert str(refused.value) == sentence


def test_each_check_lets_through_what_it_should_as_the_bus_field() -> None:
    loaded = _bus(
        trusted_authserv_ids=["mx.test", "mx2.test"],
        ca_file="ca.pem",
        new_threads_per_hour=0,
        attach_max_count=0,
        attach_types=["text/plain", "text/x-diff", "text/plain"],
    )
    assert loaded.domain == "bus.test"
    assert loaded.trusted_authserv_ids == ("mx.test", "mx2.test")
    assert loaded.ca_file == "ca.pem"
    assert (loaded.new_threads_per_hour, loaded.attach_max_count) == (0, 0)
    assert loaded.attach_types == ("text/plain", "text/x-diff")
    assert _bus(ca_file="").ca_file is None
    assert _bus(ca_file=None).ca_file is None
    assert _bus(trusted_authserv_ids=[]).trusted_authserv_ids == ()


@pytest.mark.parametrize("key", ["auth", "stale_after", "name", "transport", "max_size", "new_threads_per_hour"])
def test_bus_set_names_its_key_when_given_two_values(registry: Registry, key: str) -> None:
    before = (registry.root / "bus.toml").read_bytes()
    with pytest.raises(BadInput) as refused:
        bus.set_setting(registry.root, key, ["a", "b"])
    assert str(refused.value) == f"'bus set {key}' takes one value"
    assert (registry.root / "bus.toml").read_bytes() == before


@pytest.mark.parametrize(
    ("values", "sentence"),
    [
        ({"policy": "dns"}, "bus.toml: policy must be one of pinned, aligned"),
        ({"sent_folder": 5}, 'bus.toml: sent_folder must be a folder name ("" for none)'),
        ({"max_size": 4095}, "bus.toml: max_size must be a number of bytes >= 4096"),
        ({"max_size": "8192"}, "bus.toml: max_size must be a number of bytes >= 4096"),
        (
            {"hold": ["Partner.Example"]},
            'bus.toml: hold must be a list of lowercase domains or addresses (e.g. ["partner.example"])',
        ),
    ],
)
def test_the_other_checks_refuse_in_their_own_sentence(values: dict[str, Any], sentence: str) -> None:
    with pytest.raises(ConfigError) as refused:
        _bus(**values)
    assert str(refused.value) == sentence


def test_the_smallest_letter_size_allowed_is_4096_bytes() -> None:
    assert _bus(max_size=4096).max_size == 4096
    assert _bus(sent_folder="").sent_folder == ""
    assert _bus(sent_folder=None).sent_folder is None


def test_a_duration_bus_set_refuses_names_its_key(registry: Registry) -> None:
    with pytest.raises(BadInput) as refused:
        bus.set_setting(registry.root, "stale_after", ["soon"])
    assert str(refused.value).startswith("stale_after 'soon' is not a duration: give ")


def test_a_number_reader_stores_the_whole_number_or_says_what_the_key_is() -> None:
    # The readers are made when the table is (at import): called here, each call is the code under test.
    read = settings_mod._number("a number of bytes")
    data: dict[str, Any] = {}
    assert read(data, "max_size", [" 8192 "]) == 8192
    assert data == {"max_size": 8192}
    with pytest.raises(BadInput) as refused:
        read(data, "max_size", ["big"])
    assert str(refused.value) == "max_size is a number of bytes"
    with pytest.raises(BadInput) as refused:
        read(data, "max_size", ["1", "2"])
    assert str(refused.value) == "'bus set max_size' takes one value"
    assert data == {"max_size": 8192}


@pytest.mark.parametrize(
    ("values", "sentence"),
    [
        ({"transport": "uucp"}, "bus.toml: transport must be 'local' or 'smtp+imap', not 'uucp'"),
        ({"auth": "kerberos"}, "bus.toml: auth must be one of password, xoauth2, oauthbearer, not 'kerberos'"),
        ({"stale_after": "soon"}, "bus.toml: stale_after must be a duration such as 3d, not 'soon'"),
        ({"stale_after": 3}, "bus.toml: stale_after must be a duration such as 3d, not '3'"),
        ({"stale_after": "x" * 50}, f"bus.toml: stale_after must be a duration such as 3d, not {'x' * 40!r}"),
    ],
)
def test_the_named_values_refuse_in_their_own_sentence(values: dict[str, Any], sentence: str) -> None:
    with pytest.raises(ConfigError) as refused:
        _bus(**values)
    assert str(refused.value) == sentence


def test_bus_set_s_help_is_one_sentence_of_every_row_s_words() -> None:
    text = settings_mod.help_text()
    assert text.startswith("Set KEY in bus.toml: name NAME (the domain unless given), domain DOMAIN, transport ")
    assert text.endswith(", groups.NAME PLATFORM... (for 'send @NAME'; \"\" removes it).")
    assert text == "Set KEY in bus.toml: " + ", ".join(row.help for row in settings_mod.SETTINGS) + "."


def test_a_row_changes_the_bus_field_of_its_name_unless_it_names_another() -> None:
    # The rows are made at import: made here, the constructor is the code under test.
    row = settings_mod.Setting("max_size", None, 1, None, "max_size BYTES", loosens=settings_mod.never)
    assert (row.name, row.read, row.default, row.check, row.help) == ("max_size", None, 1, None, "max_size BYTES")
    assert (row.loosens, row.field) == (settings_mod.never, "max_size")
    other = settings_mod.Setting(
        "smtp.tls", None, None, None, "smtp.tls MODE", loosens=settings_mod.never, field="smtp"
    )
    assert other.field == "smtp"
