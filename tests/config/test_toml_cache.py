"""Registry and marker files read as tomllib reads them, through a cache that is never trusted
over the file (issue 11, start-up: a command whose files did not change imports no tomllib)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.config import _toml
from agentmail.config._toml import CACHE, BadToml, read_toml
from agentmail.config.registry import Registry, load
from agentmail.errors import ConfigError

from ..depth import examples, suppressed


@pytest.fixture(autouse=True)
def fresh_process_view() -> None:
    """Each test starts as a new process would: the cache as the home holds it, nothing in memory."""
    _toml._loaded.clear()


def _cached(home: Path) -> dict[str, Any]:
    files: dict[str, Any] = json.loads((home / CACHE).read_text())["files"]
    return files


def test_a_file_reads_as_tomllib_reads_it_then_from_the_cache(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "bus.toml"
    path.write_text('name = "bus"\nmax_size = 4096\npoll_interval = 0.5\nhold = ["a.test"]\n[smtp]\ntls = "none"\n')
    first = read_toml(path)
    assert first == tomllib.loads(path.read_text())
    assert _cached(home)[str(path)][0] == path.read_text()
    _toml._loaded.clear()
    again = read_toml(path)
    assert again == first and again is not first
    again["name"] = "changed by a caller"
    assert read_toml(path)["name"] == "bus"  # a fresh dict every call


def test_a_changed_file_is_read_again_even_with_its_old_size_and_times(home: Path, tmp_path: Path) -> None:
    """The cache is keyed by the file's whole text, never by its stat: a same-size edit with its
    modification time put back is still seen."""
    path = tmp_path / "alpha.toml"
    path.write_text('name = "alpha"\n')
    before = path.stat()
    assert read_toml(path) == {"name": "alpha"}
    path.write_text('name = "omega"\n')
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert read_toml(path) == {"name": "omega"}
    _toml._loaded.clear()
    assert read_toml(path) == {"name": "omega"} and _cached(home)[str(path)][0] == 'name = "omega"\n'


@pytest.mark.parametrize(
    "garbage",
    [b"", b"{not json", b"[]", b'{"format": "other", "files": {}}', b"\xff\xfe", None],
    ids=["empty", "torn", "a list", "another format", "not utf-8", "a forged entry"],
)
def test_a_torn_or_foreign_cache_is_a_miss(home: Path, tmp_path: Path, garbage: bytes | None) -> None:
    path = tmp_path / "bus.toml"
    path.write_text('name = "bus"\n')
    (home / CACHE).parent.mkdir(parents=True)
    if garbage is None:  # the right text with other data: shows a cache is believed only for its text
        entry = ['name = "other"\n', json.dumps({"name": "other"})]
        garbage = json.dumps({"format": _toml._FORMAT, "files": {str(path): entry}}).encode()
    (home / CACHE).write_bytes(garbage)
    assert read_toml(path) == {"name": "bus"}
    assert _cached(home)[str(path)] == ['name = "bus"\n', '{"name": "bus"}']


@pytest.mark.parametrize("how", ["group-writable", "world-writable", "a symlink"])
def test_a_cache_another_user_could_have_written_is_never_believed(home: Path, tmp_path: Path, how: str) -> None:
    """The entry stands in for the registry's parse (its pinned keys): only a private file of
    this user is read, so a forged parse planted by someone else is a miss."""
    path = tmp_path / "bus.toml"
    path.write_text('name = "bus"\n')
    forged = json.dumps({"format": _toml._FORMAT, "files": {str(path): ['name = "bus"\n', '{"name": "forged"}']}})
    (home / CACHE).parent.mkdir(parents=True)
    if how == "a symlink":
        planted = tmp_path / "planted.json"
        planted.write_text(forged)
        (home / CACHE).symlink_to(planted)
    else:
        (home / CACHE).write_text(forged)
        os.chmod(home / CACHE, 0o620 if how == "group-writable" else 0o602)
    assert read_toml(path) == {"name": "bus"}
    _toml._loaded.clear()
    (home / CACHE).unlink()
    (home / CACHE).write_text(forged)
    os.chmod(home / CACHE, 0o600)
    assert read_toml(path) == {"name": "forged"}  # the same file, private: believed (the test's premise)


@pytest.mark.parametrize("data", ["{not json", "[1, 2]"], ids=["garbled", "not a table"])
def test_an_entry_with_the_right_text_but_unusable_data_is_a_miss(home: Path, tmp_path: Path, data: str) -> None:
    path = tmp_path / "bus.toml"
    path.write_text('name = "bus"\n')
    (home / CACHE).parent.mkdir(parents=True)
    entry = {str(path): ['name = "bus"\n', data]}
    (home / CACHE).write_text(json.dumps({"format": _toml._FORMAT, "files": entry}))
    assert read_toml(path) == {"name": "bus"}
    assert _cached(home)[str(path)] == ['name = "bus"\n', '{"name": "bus"}']


def test_a_value_json_cannot_give_back_is_never_cached(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "odd.toml"
    path.write_text("x = nan\n")
    (value,) = read_toml(path).values()
    assert value != value and not (home / CACHE).exists()  # NaN: read, never cached


def test_the_entry_of_a_removed_file_goes_with_the_next_write(home: Path, tmp_path: Path) -> None:
    gone, kept = tmp_path / "gone.toml", tmp_path / "kept.toml"
    gone.write_text('name = "gone"\n')
    kept.write_text('name = "kept"\n')
    read_toml(gone)
    gone.unlink()
    read_toml(kept)
    assert list(_cached(home)) == [str(kept)]


def test_bad_toml_and_bad_utf8_say_what_tomllib_and_the_decoder_say(home: Path, tmp_path: Path) -> None:
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
    assert not (home / CACHE).exists()  # nothing is cached for a file that does not parse


def test_a_toml_date_is_read_but_never_cached(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "dated.toml"
    path.write_text("when = 2026-12-01\n")
    assert read_toml(path) == tomllib.loads("when = 2026-12-01\n")
    assert not (home / CACHE).exists()


def test_a_home_that_cannot_hold_the_cache_only_loses_the_shortcut(home: Path, tmp_path: Path) -> None:
    (home / "cache").write_text("a file where the folder would be")
    path = tmp_path / "bus.toml"
    path.write_text('name = "bus"\n')
    assert read_toml(path) == read_toml(path) == {"name": "bus"}
    assert [p.name for p in home.iterdir()] == ["cache"]  # no temp file left behind


def test_a_registry_edit_is_seen_by_the_next_load(registry: Registry) -> None:
    root = registry.root
    assert load(root).bus.policy == "pinned"
    bus_toml = root / "bus.toml"
    bus_toml.write_text(bus_toml.read_text().replace('policy = "pinned"', 'policy = "aligned"'))
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


def test_a_command_with_unchanged_files_imports_no_tomllib(registry: Registry, home: Path) -> None:
    bus_toml = registry.root / "bus.toml"
    bus_toml.write_text(bus_toml.read_text() + "# edited by hand\n")  # not what the cache holds
    code = "import sys\nfrom agentmail.cli.app import main\nmain(sys.argv[1:])\nprint('tomllib' in sys.modules)\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL_", "COVERAGE_"))}
    env["AGENTMAIL_HOME"] = str(home)
    runs = [
        subprocess.run(
            [sys.executable, "-c", code, "--as", "beta", "inbox", "--no-sync"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        for _ in range(2)
    ]
    assert [run.returncode for run in runs] == [0, 0], runs[-1].stderr
    assert [run.stdout.splitlines()[-1] for run in runs] == ["True", "False"]  # the first parses and caches it


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
def test_what_the_cache_returns_is_what_tomllib_returns(
    home: Path, tmp_path: Path, data: dict[str, Any], garbage: bytes
) -> None:
    """Any TOML file, read on a miss, on a hit, and under a garbled cache: always tomllib's answer."""
    path = tmp_path / "any.toml"
    text = _dump(data)
    path.write_text(text)
    want = tomllib.loads(text)
    _toml._loaded.clear()
    assert read_toml(path) == want  # a miss (or a stale entry from the last example)
    _toml._loaded.clear()
    assert read_toml(path) == want  # a hit
    (home / CACHE).write_bytes(garbage)
    _toml._loaded.clear()
    assert read_toml(path) == want
