"""The registry's answers exactly (agentmail/registry.py, issue 23's mutation bar): each refusal
of bus.toml, a platform file and a [[people]] entry whole, each limit at its boundary, each
default, the lookups' misses. A registry file is outside input: what a wrong one is told must
name the key and where it belongs, and one value past a limit must be refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentmail.config import registry
from agentmail.config.registry import Bus, Endpoint, Person, Platform, Registry
from agentmail.errors import BadInput, ConfigError
from agentmail.model import NAME_RE

KEY = "A" * 40  # the shortest public key a pinned platform may have
PLATFORM = {"address": "alpha@bus.test", "dkim": {"selector": "s1", "public_key": KEY}}


def bus_refusal(**data: Any) -> str:
    with pytest.raises(ConfigError) as refused:
        registry.parse_bus({"domain": "bus.test", **data})
    return str(refused.value)


def platform(**changes: Any) -> Platform:
    return registry.parse_platform({**PLATFORM, **changes}, "alpha")


def platform_refusal(data: dict[str, Any], stem: str = "alpha") -> str:
    with pytest.raises(ConfigError) as refused:
        registry.parse_platform(data, stem)
    return str(refused.value)


def people_refusal(data: Any) -> str:
    with pytest.raises(ConfigError) as refused:
        registry.parse_people(data)
    return str(refused.value)


# --- bus.toml: keys in their places ---------------------------------------------------------


@pytest.mark.parametrize(
    "data,sentence",
    [
        ({"smtp": 5}, "bus.toml: [smtp] must be a table"),
        ({"imap": [1]}, "bus.toml: [imap] must be a table"),
        (
            {"smtp": {"host": "h", "port": 25, "poll_interval": 5}},
            "bus.toml: unknown key 'poll_interval' in [smtp]; it belongs under [imap]",
        ),
        (
            {"imap": {"host": "h", "port": 993, "domain": "x.test"}},
            "bus.toml: unknown key 'domain' in [imap]; it belongs at the top of bus.toml, before any [table]",
        ),
        ({"smtp": {"host": "h", "bogus": 1}}, "bus.toml: unknown key 'bogus' in [smtp] (known: host, port, tls)"),
        (
            {"imap": {"bogus": 1}},
            "bus.toml: unknown key 'bogus' in [imap] (known: host, port, tls, poll_interval)",
        ),
        ({"host": "h"}, "bus.toml: unknown key 'host'; it belongs under [smtp] or [imap]"),
        ({"poll_interval": 5}, "bus.toml: unknown key 'poll_interval'; it belongs under [imap]"),
        (
            {"groups": {}, "bogus": 1},  # a free table first: the keys after it are still checked
            "bus.toml: unknown key 'bogus' (known: name, domain, transport, policy, trusted_authserv_ids, ca_file, "
            "sent_folder, max_size, hold, new_threads_per_hour, attach_max_bytes, attach_max_total, "
            "attach_max_count, attach_types, auth, stale_after, [smtp], [imap], [groups])",
        ),
    ],
)
def test_a_key_in_the_wrong_place_is_told_where_it_belongs(data: dict[str, Any], sentence: str) -> None:
    assert bus_refusal(**data) == sentence


def test_every_key_of_a_table_is_checked_not_only_the_first() -> None:
    assert bus_refusal(smtp={"host": "h", "port": 25, "bogus": 1}).startswith("bus.toml: unknown key 'bogus' in [smtp]")
    assert bus_refusal(name="b", bogus=1).startswith("bus.toml: unknown key 'bogus' (known:")


def test_where_a_key_lives() -> None:
    assert registry._home_of("max_size") == "at the top of bus.toml, before any [table]"
    assert registry._home_of("port") == "under [smtp] or [imap]"
    assert registry._home_of("poll_interval") == "under [imap]"
    assert registry._home_of("bogus") == ""


# --- bus.toml: each value ------------------------------------------------------------------


def test_the_defaults_of_a_bus_of_only_a_domain() -> None:
    bus = registry.parse_bus({"domain": "bus.test"})
    assert bus == Bus(
        name="bus.test",
        domain="bus.test",
        transport="local",
        policy="pinned",
        trusted_authserv_ids=(),
        smtp=None,
        imap=None,
        ca_file=None,
        sent_folder=None,
        max_size=1_048_576,
        poll_interval=None,
        hold=(),
        new_threads_per_hour=20,
        attach_max_bytes=512 * 1024,
        attach_max_total=700 * 1024,
        attach_max_count=10,
        attach_types=registry.ATTACH_TYPES,
        groups=(),
        auth="password",
    )
    assert bus == Bus("bus.test", "bus.test")  # the constructor's defaults are the file's
    made = Bus("ops", "bus.test")  # read field by field: Bus == Bus cannot see a field lost on both sides
    assert (made.name, made.domain, made.transport, made.policy, made.auth) == (
        "ops", "bus.test", "local", "pinned", "password",
    )  # fmt: skip


@pytest.mark.parametrize(
    "domain,sentence",
    [
        (None, "bus.toml: domain None is not a valid domain"),
        (5, "bus.toml: domain 5 is not a valid domain"),
        ("Bus.Test", "bus.toml: domain 'Bus.Test' is not a valid domain"),
        ("bus", "bus.toml: domain 'bus' is not a valid domain"),
    ],
)
def test_a_bus_without_a_valid_domain_is_refused(domain: object, sentence: str) -> None:
    with pytest.raises(ConfigError) as refused:
        registry.parse_bus({} if domain is None else {"domain": domain})
    assert str(refused.value) == sentence


@pytest.mark.parametrize(
    "data,sentence",
    [
        ({"transport": "carrier-pigeon"}, "bus.toml: transport must be 'local' or 'smtp+imap', not 'carrier-pigeon'"),
        ({"policy": "trusting"}, "bus.toml: policy must be one of pinned, aligned"),
        ({"sent_folder": 5}, 'bus.toml: sent_folder must be a folder name ("" for none)'),
        ({"ca_file": 5}, "bus.toml: ca_file must be a path (relative to the registry directory)"),
        ({"trusted_authserv_ids": "mail.bus.test"}, "bus.toml: trusted_authserv_ids must be a list of names"),
        ({"trusted_authserv_ids": ["mail.bus.test", ""]}, "bus.toml: trusted_authserv_ids must be a list of names"),
        ({"trusted_authserv_ids": [5]}, "bus.toml: trusted_authserv_ids must be a list of names"),
        ({"max_size": 4095}, "bus.toml: max_size must be a number of bytes >= 4096"),
        ({"max_size": "1M"}, "bus.toml: max_size must be a number of bytes >= 4096"),
        ({"new_threads_per_hour": -1}, "bus.toml: new_threads_per_hour must be a whole number >= 0"),
        ({"new_threads_per_hour": True}, "bus.toml: new_threads_per_hour must be a whole number >= 0"),
        ({"new_threads_per_hour": "5"}, "bus.toml: new_threads_per_hour must be a whole number >= 0"),
        ({"auth": "kerberos"}, "bus.toml: auth must be one of password, xoauth2, oauthbearer, not 'kerberos'"),
        (
            {"transport": "smtp+imap", "smtp": {"host": "h", "port": 587}},
            "bus.toml: the smtp+imap transport needs [smtp] and [imap] endpoints",
        ),
        (
            {"transport": "smtp+imap", "imap": {"host": "h", "port": 993}},
            "bus.toml: the smtp+imap transport needs [smtp] and [imap] endpoints",
        ),
    ],
)
def test_each_bad_value_is_refused_in_its_own_sentence(data: dict[str, Any], sentence: str) -> None:
    assert bus_refusal(**data) == sentence


HOLD = 'bus.toml: hold must be a list of lowercase domains or addresses (e.g. ["partner.example"])'
TYPES = 'bus.toml: attach_types must be a list of lowercase MIME types (e.g. ["text/x-diff"])'


@pytest.mark.parametrize("hold", ["partner.example", ["Partner.example"], [5], ["partner.example", "not a domain"]])
def test_a_bad_hold_is_refused(hold: object) -> None:
    assert bus_refusal(hold=hold) == HOLD


@pytest.mark.parametrize("types", ["text/plain", ["Text/Plain"], [5], ["text/plain", "plain"]])
def test_bad_attach_types_are_refused(types: object) -> None:
    assert bus_refusal(attach_types=types) == TYPES


@pytest.mark.parametrize("key", ["attach_max_bytes", "attach_max_total", "attach_max_count"])
@pytest.mark.parametrize("value", [-1, True, "10", 1.5])
def test_each_attachment_limit_is_a_whole_number_from_zero(key: str, value: object) -> None:
    assert bus_refusal(**{key: value}) == f"bus.toml: {key} must be a whole number >= 0"


def test_the_values_at_their_limits_are_taken() -> None:
    bus = registry.parse_bus(
        {
            "domain": "bus.test",
            "name": "ops",
            "transport": "local",
            "policy": "aligned",
            "sent_folder": "",
            "ca_file": "",
            "trusted_authserv_ids": ["mail.bus.test", "mx.bus.test"],
            "max_size": 4096,
            "hold": ["partner.example", "carol+x@people.test", "partner.example"],
            "new_threads_per_hour": 0,
            "attach_max_bytes": 0,
            "attach_max_total": 1,
            "attach_max_count": 2,
            "attach_types": ["text/x-diff", "image/png", "text/x-diff"],
            "auth": "oauthbearer",
        }
    )
    assert (bus.name, bus.policy, bus.sent_folder, bus.ca_file, bus.trusted_authserv_ids) == (
        "ops",
        "aligned",
        "",  # "": no copy of sent letters, not the \Sent folder
        None,
        ("mail.bus.test", "mx.bus.test"),
    )
    assert (bus.max_size, bus.hold, bus.new_threads_per_hour) == (4096, ("partner.example", "carol+x@people.test"), 0)
    assert (bus.attach_max_bytes, bus.attach_max_total, bus.attach_max_count) == (0, 1, 2)
    assert (bus.attach_types, bus.auth) == (("text/x-diff", "image/png"), "oauthbearer")
    assert registry.parse_bus({"domain": "bus.test", "ca_file": "ca.pem"}).ca_file == "ca.pem"
    assert registry.parse_bus({"domain": "bus.test", "auth": "xoauth2"}).auth == "xoauth2"


# --- the endpoints -----------------------------------------------------------------------------

NEEDS = "bus.toml: [smtp] needs host (text) and port (1-65535)"


@pytest.mark.parametrize(
    "table",
    [{"port": 25}, {"host": "", "port": 25}, {"host": 5, "port": 25}, {"host": "h"}, {"host": "h", "port": "25"},
     {"host": "h", "port": 0}, {"host": "h", "port": 65536}, {"host": "h", "port": -25}],
)  # fmt: skip
def test_an_endpoint_needs_a_host_and_a_port_in_range(table: dict[str, Any]) -> None:
    assert bus_refusal(smtp=table) == NEEDS


def test_an_endpoint_not_a_table_and_a_bad_tls_mode() -> None:
    with pytest.raises(ConfigError) as refused:
        registry._endpoint("mail.bus.test:25", "imap")
    assert str(refused.value) == "bus.toml: [imap] must be a table"
    assert registry._endpoint(None, "imap") is None
    assert (
        bus_refusal(imap={"host": "h", "port": 993, "tls": "ssl"})
        == "bus.toml: [imap] tls must be one of implicit, starttls, none"
    )


@pytest.mark.parametrize(
    "port,tls",
    [(1, "implicit"), (25, "starttls"), (143, "starttls"), (465, "implicit"), (587, "starttls"), (993, "implicit"),
     (65535, "implicit")],
)  # fmt: skip
def test_an_endpoint_speaks_its_ports_tls_unless_told(port: int, tls: str) -> None:
    bus = registry.parse_bus({"domain": "bus.test", "smtp": {"host": "mail.bus.test", "port": port}})
    assert bus.smtp == Endpoint("mail.bus.test", port, tls)
    assert registry.default_tls(port) == tls
    told = registry.parse_bus({"domain": "bus.test", "imap": {"host": "h", "port": port, "tls": "none"}})
    assert told.imap == Endpoint("h", port, "none")


def test_both_endpoints_make_an_smtp_imap_bus() -> None:
    bus = registry.parse_bus(
        {"domain": "bus.test", "transport": "smtp+imap", "smtp": {"host": "s", "port": 587},
         "imap": {"host": "i", "port": 993, "tls": "starttls"}}
    )  # fmt: skip
    assert (bus.transport, bus.smtp, bus.imap) == (
        "smtp+imap",
        Endpoint("s", 587, "starttls"),
        Endpoint("i", 993, "starttls"),
    )


POLL = "bus.toml: [imap] poll_interval must be seconds between 0 and 3600"


@pytest.mark.parametrize("poll", [0, -1, 3600.5, 3601, "5", True])
def test_a_poll_interval_out_of_range_is_refused(poll: object) -> None:
    if poll is True:  # a bool is an int to isinstance: True is one second, as Python reads it
        assert registry.parse_bus({"domain": "bus.test", "imap": {"host": "h", "port": 993, "poll_interval": poll}})
        return
    assert bus_refusal(imap={"host": "h", "port": 993, "poll_interval": poll}) == POLL


@pytest.mark.parametrize("poll,seconds", [(0.01, 0.01), (1, 1.0), (3600, 3600.0)])
def test_a_poll_interval_in_range_is_seconds(poll: float, seconds: float) -> None:
    bus = registry.parse_bus({"domain": "bus.test", "imap": {"host": "h", "port": 993, "poll_interval": poll}})
    assert bus.poll_interval == seconds and isinstance(bus.poll_interval, float)
    assert registry.parse_bus({"domain": "bus.test", "imap": {"host": "h", "port": 993}}).poll_interval is None


# --- [groups] -----------------------------------------------------------------------------------


def test_groups_are_read_in_order_and_looked_up_by_name() -> None:
    bus = registry.parse_bus({"domain": "bus.test", "groups": {"ops": ["alpha", "beta"], "all": ["gamma"]}})
    assert bus.groups == (("ops", ("alpha", "beta")), ("all", ("gamma",)))
    assert (bus.group("ops"), bus.group("all"), bus.group("nobody")) == (("alpha", "beta"), ("gamma",), None)


@pytest.mark.parametrize(
    "groups,sentence",
    [
        ([], 'bus.toml: [groups] must be a table (name = ["platform", ...])'),
        ({"Ops": ["alpha"]}, f"bus.toml: group name 'Ops' must match {NAME_RE.pattern}"),
        ({5: ["alpha"]}, f"bus.toml: group name 5 must match {NAME_RE.pattern}"),
        ({"ops": "alpha"}, "bus.toml: group ops must be a non-empty list of platform names"),
        ({"ops": []}, "bus.toml: group ops must be a non-empty list of platform names"),
        ({"ops": ["alpha", 5]}, "bus.toml: group ops must be a non-empty list of platform names"),
        ({"ops": ["alpha", "Beta"]}, "bus.toml: group ops must be a non-empty list of platform names"),
        ({"ops": ["alpha", "beta", "alpha"]}, "bus.toml: group ops names a platform twice"),
        ({"ok": ["alpha"], "ops": ["beta", "beta"]}, "bus.toml: group ops names a platform twice"),
    ],
)
def test_a_bad_group_is_refused_naming_it(groups: Any, sentence: str) -> None:
    with pytest.raises(ConfigError) as refused:
        registry.parse_groups(groups)
    assert str(refused.value) == sentence


# --- a platform file ----------------------------------------------------------------------------


def test_a_platform_of_the_fewest_keys_and_its_defaults() -> None:
    assert platform() == Platform(
        name="alpha",
        address="alpha@bus.test",
        display_name="",
        remotes=(),
        paths=(),
        dkim_domain="bus.test",
        selector="s1",
        algorithm="ed25519",
        public_key=KEY,
        key_lookup="pinned",
        people=(),
        auth="",
    )
    assert Platform("alpha", "alpha@bus.test") == Platform(
        "alpha", "alpha@bus.test", "", (), (), "", "", "ed25519", "", "pinned", (), ""
    )


def test_a_platform_with_every_key() -> None:
    got = platform(
        name="alpha",
        display_name="Alpha (billing)",
        remotes=["git@example.com:org/alpha.git"],
        paths=["/srv/alpha"],
        dkim={
            "domain": "sign.bus.test",
            "selector": "s2",
            "algorithm": "rsa",
            "public_key": KEY + "=",
            "lookup": "pinned",
        },
        people=[{"address": "carol+ops@people.test", "follows": True, "writes": True}, {"address": "dave@people.test"}],
        auth="xoauth2",
    )
    assert (got.display_name, got.remotes, got.paths) == (
        "Alpha (billing)",
        ("git@example.com:org/alpha.git",),
        ("/srv/alpha",),
    )
    assert (got.dkim_domain, got.selector, got.algorithm, got.public_key, got.key_lookup) == (
        "sign.bus.test", "s2", "rsa", KEY + "=", "pinned",
    )  # fmt: skip
    assert got.people == (Person("carol+ops@people.test", True, True), Person("dave@people.test", False, False))
    assert (got.followers, got.domain, got.auth) == (("carol+ops@people.test",), "bus.test", "xoauth2")
    assert got.txt_record() == f"v=DKIM1; k=rsa; p={KEY}="


def test_a_platform_whose_key_is_in_dns_needs_no_pinned_key() -> None:
    got = platform(dkim={"selector": "s1", "lookup": "dns"})
    assert (got.key_lookup, got.public_key) == ("dns", "")
    assert platform(dkim={"selector": "s1", "lookup": "dns", "public_key": 5}).public_key == ""


@pytest.mark.parametrize(
    "data,sentence",
    [
        ({**PLATFORM, "selector": "s1"}, "unknown key 'selector'; it belongs under [dkim]"),
        (
            {**PLATFORM, "bogus": 1},
            "unknown key 'bogus' (known: name, address, display_name, remotes, paths, dkim, people, auth)",
        ),
        (
            {**PLATFORM, "dkim": {"selector": "s1", "name": "x"}},
            "unknown key 'name' in [dkim]; it belongs at the top, before [dkim]",
        ),
        (
            {**PLATFORM, "dkim": {"selector": "s1", "bogus": 1}},
            "unknown key 'bogus' in [dkim] (known: domain, selector, algorithm, public_key, lookup, previous)",
        ),
        ({**PLATFORM, "dkim": "s1"}, "[dkim] must be a table"),
        ({"address": "alpha@bus.test"}, "dkim.selector '' is missing or invalid"),  # no [dkim]: an empty one
        ({**PLATFORM, "name": "Alpha"}, f"name 'Alpha' must match {NAME_RE.pattern}"),
        ({**PLATFORM, "name": 5}, f"name 5 must match {NAME_RE.pattern}"),
        ({**PLATFORM, "name": "beta"}, "name 'beta' does not match its file name alpha.toml"),
        ({"dkim": PLATFORM["dkim"]}, "address None is not a plain lowercase ASCII address"),
        ({**PLATFORM, "address": "Alpha@bus.test"}, "address 'Alpha@bus.test' is not a plain lowercase ASCII address"),
        (
            {**PLATFORM, "address": "alpha+x@bus.test"},
            "address 'alpha+x@bus.test' is not a plain lowercase ASCII address",
        ),
        ({**PLATFORM, "dkim": {"selector": "s1", "lookup": "ldap"}}, "dkim.lookup must be 'pinned' or 'dns'"),
        ({**PLATFORM, "dkim": {"public_key": KEY}}, "dkim.selector '' is missing or invalid"),
        ({**PLATFORM, "dkim": {"selector": "S1", "public_key": KEY}}, "dkim.selector 'S1' is missing or invalid"),
        ({**PLATFORM, "dkim": {"selector": 1, "public_key": KEY}}, "dkim.selector 1 is missing or invalid"),
        (
            {**PLATFORM, "dkim": {"selector": "s1", "public_key": KEY, "algorithm": "dsa"}},
            "dkim.algorithm must be 'ed25519' or 'rsa'",
        ),
        ({**PLATFORM, "dkim": {"selector": "s1"}}, "dkim.public_key (base64) is required when the key is pinned"),
        (
            {**PLATFORM, "dkim": {"selector": "s1", "public_key": KEY[:-1]}},
            "dkim.public_key (base64) is required when the key is pinned",
        ),
        (
            {**PLATFORM, "dkim": {"selector": "s1", "public_key": KEY[:-1] + "!"}},
            "dkim.public_key (base64) is required when the key is pinned",
        ),
        (
            {**PLATFORM, "dkim": {"selector": "s1", "public_key": 5}},
            "dkim.public_key (base64) is required when the key is pinned",
        ),
        (
            {**PLATFORM, "dkim": {"selector": "s1", "public_key": KEY, "domain": "Bus.Test"}},
            "dkim.domain 'Bus.Test' is not a valid domain",
        ),
        (
            {**PLATFORM, "dkim": {"selector": "s1", "public_key": KEY, "domain": 5}},
            "dkim.domain 5 is not a valid domain",
        ),
        ({**PLATFORM, "remotes": "git@x"}, "remotes must be a list of strings"),
        ({**PLATFORM, "remotes": ["git@x", ""]}, "remotes must be a list of strings"),
        ({**PLATFORM, "paths": [5]}, "paths must be a list of strings"),
        ({**PLATFORM, "remotes": ["git@x"], "paths": "/srv"}, "paths must be a list of strings"),
        ({**PLATFORM, "auth": "kerberos"}, "auth must be one of password, xoauth2, oauthbearer, not 'kerberos'"),
    ],
)
def test_each_bad_platform_entry_is_refused_in_its_own_sentence(data: dict[str, Any], sentence: str) -> None:
    assert platform_refusal(data) == sentence


def test_every_key_of_a_platform_and_its_dkim_table_is_checked() -> None:
    assert platform_refusal({**PLATFORM, "auth": "password", "bogus": 1}).startswith("unknown key 'bogus' (known:")
    dkim = {"selector": "s1", "public_key": KEY, "bogus": 1}
    assert platform_refusal({**PLATFORM, "dkim": dkim}).startswith("unknown key 'bogus' in [dkim]")


def test_a_platform_name_defaults_to_its_file_name() -> None:
    assert registry.parse_platform(dict(PLATFORM), "alpha").name == "alpha"
    assert platform_refusal(dict(PLATFORM), stem="Alpha") == f"name 'Alpha' must match {NAME_RE.pattern}"


# --- [[people]] --------------------------------------------------------------------------------

PEOPLE = "people must be a list of tables ([[people]] address = ..., follows = ..., writes = ...)"


@pytest.mark.parametrize(
    "data,sentence",
    [
        ({"address": "carol@people.test"}, PEOPLE),
        ([{"address": "carol@people.test"}, "dave@people.test"], PEOPLE),
        (
            [{"address": "carol@people.test", "reads": True}],
            "unknown key 'reads' in [[people]] (known: address, follows, writes, approves)",
        ),
        (
            [{"follows": True, "bogus": 1}],
            "unknown key 'bogus' in [[people]] (known: address, follows, writes, approves)",
        ),
        ([{"follows": True}], "people: address None is not a plain lowercase ASCII address"),
        (
            [{"address": "Carol@people.test"}],
            "people: address 'Carol@people.test' is not a plain lowercase ASCII address",
        ),
        (
            [{"address": "carol@people.test"}, {"address": "carol@people.test"}],
            "people: carol@people.test is listed twice",
        ),
        (
            [{"address": "carol@people.test", "follows": "yes"}],
            "people: follows, writes and approves of carol@people.test must be true or false",
        ),
        (
            [{"address": "carol@people.test", "writes": 1}],
            "people: follows, writes and approves of carol@people.test must be true or false",
        ),
    ],
)
def test_each_bad_person_is_refused_in_its_own_sentence(data: Any, sentence: str) -> None:
    assert people_refusal(data) == sentence


def test_people_are_read_in_order_with_their_flags() -> None:
    got = registry.parse_people(
        [
            {"address": "a_b+c@people.test", "writes": True},
            {"address": "dave@people.test", "follows": True},
            {"address": "e@p.test"},
        ]
    )
    assert got == (
        Person("a_b+c@people.test", False, True),
        Person("dave@people.test", True, False),
        Person("e@p.test"),
    )
    assert Person("e@p.test") == Person("e@p.test", follows=False, writes=False)
    assert registry.parse_people([]) == ()


# --- loading a registry directory ---------------------------------------------------------------


def _write(root: Path, bus: str, platforms: dict[str, str]) -> None:
    (root / "platforms").mkdir(parents=True)
    (root / "bus.toml").write_text(bus)
    for name, text in platforms.items():
        (root / "platforms" / f"{name}.toml").write_text(text)


def _entry(name: str, address: str) -> str:
    return f'name = "{name}"\naddress = "{address}"\n[dkim]\nselector = "s1"\npublic_key = "{KEY}"\n'


def test_a_missing_bus_toml_says_where_to_point(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        registry.load(tmp_path)
    assert str(refused.value) == (
        f"no registry at {tmp_path} (bus.toml missing): point at your bus's registry with AGENTMAIL_REGISTRY=DIR "
        "or --registry DIR ('agentmail init' makes a NEW bus, with new keys)"
    )
    (tmp_path / "bus.toml").mkdir()  # a folder is not a bus.toml
    with pytest.raises(ConfigError, match="bus.toml missing"):
        registry.load(tmp_path)


def test_a_broken_bus_toml_names_the_file_and_tomllibs_reason(tmp_path: Path) -> None:
    (tmp_path / "bus.toml").write_text('domain = "bus.test"\nname = \n')
    with pytest.raises(ConfigError) as refused:
        registry.load(tmp_path)
    assert str(refused.value) == f"{tmp_path / 'bus.toml'}: Invalid value (at line 2, column 8)"


def test_the_bad_entries_are_skipped_each_with_its_reason_and_the_good_ones_all_kept(tmp_path: Path) -> None:
    _write(
        tmp_path,
        'domain = "bus.test"\n',
        {
            "a-bad": 'name = "a-bad"\naddress = "nope"\n',
            "b-torn": "this is [not toml",
            "c-good": _entry("c-good", "c@bus.test"),
            "e-good": _entry("e-good", "e@bus.test"),
        },
    )
    (tmp_path / "platforms" / "f-folder.toml").mkdir()  # reading it is an OSError
    (tmp_path / "platforms" / "g-good.toml").write_text(_entry("g-good", "g@bus.test"))
    (tmp_path / "platforms" / "notes.txt").write_text("not a platform")
    reg = registry.load(tmp_path)
    assert list(reg.platforms) == ["c-good", "e-good", "g-good"]
    folder = tmp_path / "platforms"
    assert reg.problems[0] == f"{folder / 'a-bad.toml'}: address 'nope' is not a plain lowercase ASCII address; skipped"
    assert (
        reg.problems[1]
        == f"{folder / 'b-torn.toml'}: Expected '=' after a key in a key/value pair (at line 1, column 6); skipped"
    )
    assert reg.problems[2].startswith(f"{folder / 'f-folder.toml'}: [Errno 21] Is a directory") and reg.problems[
        2
    ].endswith("; skipped")
    assert len(reg.problems) == 3


def test_a_registry_without_a_platforms_folder_is_empty(tmp_path: Path) -> None:
    (tmp_path / "bus.toml").write_text('domain = "bus.test"\n')
    reg = registry.load(tmp_path)
    assert (reg.root, reg.platforms, reg.problems) == (tmp_path, {}, [])
    (tmp_path / "platforms").write_text("a file, not a folder")
    assert registry.load(tmp_path).platforms == {}


def test_a_relative_ca_file_is_the_registrys_and_an_absolute_one_is_kept(tmp_path: Path) -> None:
    (tmp_path / "bus.toml").write_text('domain = "bus.test"\nca_file = "certs/ca.pem"\n')
    assert registry.load(tmp_path).bus.ca_file == str((tmp_path / "certs" / "ca.pem").resolve())
    (tmp_path / "bus.toml").write_text('domain = "bus.test"\nca_file = "/etc/ssl/ca.pem"\n')
    assert registry.load(tmp_path).bus.ca_file == "/etc/ssl/ca.pem"
    (tmp_path / "bus.toml").write_text('domain = "bus.test"\nca_file = "~/ca.pem"\n')  # a home path is absolute
    assert registry.load(tmp_path).bus.ca_file == "~/ca.pem"
    (tmp_path / "bus.toml").write_text('domain = "bus.test"\nca_file = ""\n')
    assert registry.load(tmp_path).bus.ca_file is None


# --- the lookups --------------------------------------------------------------------------------


def _registry() -> Registry:
    alpha = Platform("alpha", "alpha@bus.test", auth="oauthbearer")
    gamma = Platform("gamma", "gamma@partner.test")
    return Registry(Path("/r"), Bus("bus", "bus.test", auth="xoauth2"), {"alpha": alpha, "gamma": gamma})


def test_an_address_is_found_whole_and_without_case() -> None:
    reg = _registry()
    assert reg.by_address("GAMMA@Partner.Test") is reg.platforms["gamma"]
    assert reg.by_address("alpha@bus.test") is reg.platforms["alpha"]
    assert reg.by_address("beta@bus.test") is None and reg.by_address("") is None


def test_an_unknown_platform_is_named_with_a_hint_and_the_known_ones() -> None:
    reg = _registry()
    with pytest.raises(ConfigError) as refused:
        reg.get("gama")
    assert str(refused.value) == "no platform 'gama' in the registry at /r; did you mean gamma? (known: alpha, gamma)"
    with pytest.raises(ConfigError) as refused:
        reg.get("zzz")
    assert str(refused.value) == "no platform 'zzz' in the registry at /r (known: alpha, gamma)"
    with pytest.raises(ConfigError) as refused:
        Registry(Path("/r"), reg.bus).get("alpha")
    assert str(refused.value) == "no platform 'alpha' in the registry at /r (known: none)"
    with pytest.raises(BadInput) as typed:
        reg.named("gama")
    assert str(typed.value) == "no platform 'gama' in the registry at /r; did you mean gamma? (known: alpha, gamma)"
    assert reg.named("gamma") is reg.get("gamma") is reg.platforms["gamma"]


def test_a_platforms_login_is_its_own_else_the_buses() -> None:
    reg = _registry()
    assert (reg.auth_of("alpha"), reg.auth_of("gamma")) == ("oauthbearer", "xoauth2")


@pytest.mark.parametrize(
    "host,loopback",
    [("localhost", True), ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("10.0.0.1", False),
     ("mail.example.com", False), ("localhost.example.com", False), ("", False)],
)  # fmt: skip
def test_only_loopback_hosts_are_loopback(host: str, loopback: bool) -> None:
    assert registry.is_loopback(host) is loopback


def test_the_registry_folder_is_the_flag_else_the_environment_else_the_homes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTMAIL_REGISTRY", raising=False)
    assert registry.registry_dir(None, tmp_path) == tmp_path / "registry"
    assert registry.registry_dir("", tmp_path) == tmp_path / "registry"
    monkeypatch.setenv("AGENTMAIL_REGISTRY", "~/from-env")
    assert registry.registry_dir(None, tmp_path) == Path("~/from-env").expanduser()
    assert registry.registry_dir("/flag", tmp_path) == Path("/flag")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert registry.registry_dir("~/flag", tmp_path) == tmp_path / "flag"


def test_an_endpoint_keeps_each_field_as_given() -> None:
    # Compared field by field: Endpoint == Endpoint would hold with a field lost on both sides.
    bus = registry.parse_bus({"domain": "bus.test", "smtp": {"host": "mail.bus.test", "port": 587}})
    assert bus.smtp is not None
    assert (bus.smtp.host, bus.smtp.port, bus.smtp.tls) == ("mail.bus.test", 587, "starttls")
    made = Endpoint("h", 1, "none")
    assert (made.host, made.port, made.tls) == ("h", 1, "none")


def test_a_registry_keeps_the_problems_it_is_given(tmp_path: Path) -> None:
    bus = registry.parse_bus({"domain": "bus.test"})
    assert Registry(tmp_path, bus, problems=["alpha.toml: bad"]).problems == ["alpha.toml: bad"]
    assert Registry(tmp_path, bus).problems == []


# --- stale_after, approves, [dkim.previous] (the keys added since run 7) --------------------------

STALE = "bus.toml: stale_after must be a duration such as 3d, not "


@pytest.mark.parametrize(
    "value,seconds", [("1m", 60), ("3d", 3 * 86400), ("2w", 2 * 604800), ("999999h", 999999 * 3600)]
)
def test_stale_after_is_a_duration_in_seconds(value: str, seconds: int) -> None:
    assert registry.parse_bus({"domain": "bus.test", "stale_after": value}).stale_after == seconds
    assert registry.parse_bus({"domain": "bus.test"}).stale_after is None
    assert registry.parse_stale_after(None) is None


@pytest.mark.parametrize(
    "value,shown",
    [("3x", "'3x'"), ("", "''"), ("0d", "'0d'"), ("1000000h", "'1000000h'"), (3, "'3'"), (True, "'True'"),
     (["3d"], "\"['3d']\""), ("d" * 50, repr("d" * 40))],
)  # fmt: skip
def test_a_stale_after_that_is_no_duration_is_refused_showing_40_characters(value: object, shown: str) -> None:
    assert bus_refusal(stale_after=value) == STALE + shown
    with pytest.raises(ConfigError) as refused:
        registry.parse_stale_after(value)
    assert str(refused.value) == STALE + shown


def test_a_persons_approves_flag_is_read_and_defaults_to_false() -> None:
    got = registry.parse_people(
        [{"address": "carol@people.test", "approves": True}, {"address": "dave@people.test", "follows": True}]
    )
    assert [(p.address, p.follows, p.writes, p.approves) for p in got] == [
        ("carol@people.test", False, False, True),
        ("dave@people.test", True, False, False),
    ]
    assert people_refusal([{"address": "carol@people.test", "approves": "yes"}]) == (
        "people: follows, writes and approves of carol@people.test must be true or false"
    )
    made = Person("e@p.test")
    assert (made.address, made.follows, made.writes, made.approves) == ("e@p.test", False, False, False)
    made = Person("e@p.test", True, True, True)
    assert (made.follows, made.writes, made.approves) == (True, True, True)


UNTIL = "2026-12-09T14:00:00Z"
PREVIOUS = {"selector": "s0", "public_key": "B" * 40, "until": UNTIL}


def previous(lookup: str = "pinned", **changes: Any) -> registry.RetiringKey | None:
    dkim: dict[str, Any] = {"selector": "s1", "public_key": KEY, "lookup": lookup, "previous": {**PREVIOUS, **changes}}
    return platform(dkim=dkim).retiring


def previous_refusal(value: Any, lookup: str = "pinned") -> str:
    dkim: dict[str, Any] = {"selector": "s1", "public_key": KEY, "lookup": lookup, "previous": value}
    return platform_refusal({**PLATFORM, "dkim": dkim})


def test_a_previous_key_is_read_with_each_field() -> None:
    got = previous()
    assert got is not None
    assert (got.selector, got.algorithm, got.public_key, got.until) == ("s0", "ed25519", "B" * 40, UNTIL)
    got = previous(algorithm="rsa", public_key="C" * 41)
    assert got is not None and (got.selector, got.algorithm, got.public_key) == ("s0", "rsa", "C" * 41)
    assert platform().retiring is None
    got = previous(public_key="abc+/=" + "b" * 34)  # base64's lowercase letters are key characters too
    assert got is not None and got.public_key == "abc+/=" + "b" * 34


def test_a_previous_key_of_a_platform_whose_key_is_in_dns_keeps_no_key() -> None:
    got = previous("dns", public_key="")
    assert got is not None and (got.selector, got.public_key, got.until) == ("s0", "", UNTIL)
    got = previous("dns")  # a key written all the same is not kept: DNS is asked
    assert got is not None and got.public_key == ""
    assert registry.parse_previous({"selector": "s0", "until": UNTIL}, "s1", "dns") == registry.RetiringKey(
        "s0", "ed25519", "", UNTIL
    )


SELECTOR = "dkim.previous.selector {!r} is missing, invalid or the current selector"
KEY_NEEDED = "dkim.previous.public_key (base64) is required when the key is pinned"


@pytest.mark.parametrize(
    "value,sentence",
    [
        ("s0", "[dkim.previous] must be a table"),
        (["s0"], "[dkim.previous] must be a table"),
        (
            {**PREVIOUS, "lookup": "dns"},
            "unknown key 'lookup' in [dkim.previous] (known: selector, algorithm, public_key, until)",
        ),
        ({"until": UNTIL, "public_key": "B" * 40}, SELECTOR.format("")),
        ({**PREVIOUS, "selector": "s1"}, SELECTOR.format("s1")),
        ({**PREVIOUS, "selector": "S0"}, SELECTOR.format("S0")),
        ({**PREVIOUS, "selector": 5}, SELECTOR.format(5)),
        ({**PREVIOUS, "algorithm": "dsa"}, "dkim.previous.algorithm must be 'ed25519' or 'rsa'"),
        ({**PREVIOUS, "public_key": "B" * 39}, KEY_NEEDED),
        ({**PREVIOUS, "public_key": "B" * 39 + "!"}, KEY_NEEDED),
        ({"selector": "s0", "until": UNTIL}, KEY_NEEDED),
        ({**PREVIOUS, "public_key": 5}, KEY_NEEDED),
        ({"selector": "s0", "public_key": "B" * 40}, "dkim.previous.until '' must be a UTC time like " + UNTIL),
        (
            {**PREVIOUS, "until": "2026-12-09 14:00:00Z"},
            "dkim.previous.until '2026-12-09 14:00:00Z' must be a UTC time like " + UNTIL,
        ),  # fmt: skip
        ({**PREVIOUS, "until": 5}, "dkim.previous.until 5 must be a UTC time like " + UNTIL),
        (
            {**PREVIOUS, "until": "2026-13-09T14:00:00Z"},
            "dkim.previous.until '2026-13-09T14:00:00Z' is not a real time",
        ),
        (
            {**PREVIOUS, "until": "2026-12-09T24:00:00Z"},
            "dkim.previous.until '2026-12-09T24:00:00Z' is not a real time",
        ),
    ],
)
def test_each_bad_previous_key_is_refused_in_its_own_sentence(value: Any, sentence: str) -> None:
    assert previous_refusal(value) == sentence


def test_a_previous_key_in_dns_may_be_any_text_but_not_another_type() -> None:
    assert previous_refusal({**PREVIOUS, "public_key": 5}, lookup="dns") == KEY_NEEDED
    got = previous("dns", public_key="B" * 39)
    assert got is not None and got.public_key == ""


def test_a_retiring_key_is_valid_until_its_second_and_not_one_after() -> None:
    import calendar
    import time

    key = registry.RetiringKey("s0", "ed25519", "B" * 40, UNTIL)
    assert (key.selector, key.algorithm, key.public_key, key.until) == ("s0", "ed25519", "B" * 40, UNTIL)
    end = calendar.timegm(time.strptime(UNTIL, "%Y-%m-%dT%H:%M:%SZ"))
    assert end == 1796824800
    assert key.valid_at(end - 1) and key.valid_at(end) and key.valid_at(end + 0.5) is False
    assert key.valid_at(end + 1) is False
