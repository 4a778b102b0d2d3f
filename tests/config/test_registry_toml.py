"""Registry and marker files are read with tomllib, whole, every time: the file that pins keys is
the one truth, and no parse of it is kept beside it (an earlier cache of parses was a second one)."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.config.identity import resolve
from agentmail.config.registry import BadToml, Registry, load, read_toml
from agentmail.errors import ConfigError

from ..depth import examples, suppressed


def test_a_file_reads_as_tomllib_reads_it_a_fresh_dict_each_time(tmp_path: Path) -> None:
    path = tmp_path / "bus.toml"
    path.write_text('name = "bus"\nmax_size = 4096\npoll_interval = 0.5\nhold = ["a.test"]\n[smtp]\ntls = "none"\n')
    first = read_toml(path)
    assert first == tomllib.loads(path.read_text())
    first["name"] = "changed by a caller"
    assert read_toml(path)["name"] == "bus"


def test_bad_toml_and_bad_utf8_say_what_tomllib_and_the_decoder_say(tmp_path: Path) -> None:
    path = tmp_path / "bus.toml"
    path.write_text("name = \n")
    with pytest.raises(tomllib.TOMLDecodeError) as real:
        tomllib.loads(path.read_text())
    with pytest.raises(BadToml) as ours:
        read_toml(path)
    assert str(ours.value) == str(real.value)
    path.write_bytes(b'name = "\xff"\n')
    with pytest.raises(BadToml, match="utf-8"):
        read_toml(path)
    with pytest.raises(FileNotFoundError):
        read_toml(tmp_path / "missing.toml")


def test_loading_the_registry_keeps_no_parse_of_it_in_the_home(registry: Registry, home: Path) -> None:
    """Nothing is written beside the registry's truth: a load leaves the home as it found it."""
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    load(registry.root)
    resolve(registry, "alpha", None, home)
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before
    assert not (home / "cache" / "toml.json").exists()


def test_a_parse_left_by_an_older_version_is_never_believed(registry: Registry, home: Path) -> None:
    """An older agentmail kept tomllib's parses in ``cache/toml.json`` beside each file's text; a
    forged one, private and matching the text, once stood in for the file. It is only a file now."""
    bus_toml = registry.root / "bus.toml"
    text = bus_toml.read_text()
    forged = dict(tomllib.loads(text), policy="aligned")
    cache = home / "cache" / "toml.json"
    cache.parent.mkdir(mode=0o700, exist_ok=True)
    files = {str(bus_toml.absolute()): [text, json.dumps(forged)]}
    cache.write_text(json.dumps({"format": "agentmail-toml-1 py3.11", "files": files}))
    os.chmod(cache, 0o600)
    assert load(registry.root).bus.policy == "pinned"


def test_a_registry_edit_is_seen_by_the_next_load(registry: Registry) -> None:
    root = registry.root
    assert load(root).bus.policy == "pinned"
    bus_toml = root / "bus.toml"
    before = bus_toml.stat()
    bus_toml.write_text(bus_toml.read_text().replace('policy = "pinned"', 'policy = "aligned"'))
    assert load(root).bus.policy == "aligned"
    os.utime(bus_toml, ns=(before.st_atime_ns, before.st_mtime_ns))  # times put back: still the new text
    assert load(root).bus.policy == "aligned"
    bus_toml.write_text("name = \n")
    with pytest.raises(ConfigError, match="bus.toml: Invalid value"):
        load(root)


def test_a_bad_platform_file_is_skipped_with_tomllibs_reason(registry: Registry) -> None:
    (registry.root / "platforms" / "beta.toml").write_text("address = \n")
    loaded = load(registry.root)
    assert "beta" not in loaded.platforms and "alpha" in loaded.platforms
    (problem,) = loaded.problems
    assert problem.startswith(f"{registry.root / 'platforms' / 'beta.toml'}: Invalid value") and "skipped" in problem


_SCALARS = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
)
_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789", min_size=1, max_size=8)
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=4), st.dictionaries(_KEYS, _SCALARS, max_size=4))


def _dump(data: dict[str, Any]) -> str:
    import tomli_w

    return tomli_w.dumps(data)


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(data=st.dictionaries(_KEYS, _VALUES, max_size=6), garbage=st.binary(max_size=40))
def test_any_file_reads_as_tomllib_reads_it_or_is_bad_toml(
    tmp_path: Path, data: dict[str, Any], garbage: bytes
) -> None:
    """Any TOML file is tomllib's answer; any bytes at all are that or BadToml, nothing else."""
    path = tmp_path / "any.toml"
    text = _dump(data)
    path.write_text(text)
    assert read_toml(path) == tomllib.loads(text)
    path.write_bytes(text.encode() + garbage)
    try:
        assert isinstance(read_toml(path), dict)
    except BadToml as exc:
        assert str(exc)
