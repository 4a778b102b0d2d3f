"""The home's bound registry (config/bound.py) on its own: exact answers for a hostile or stale
``bound-registry`` file (mutants the end-to-end approval tests let live: tests/MUTATION.md run 10)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentmail.config import bound
from agentmail.config.registry import Registry
from agentmail.errors import ConfigError


def _guarding(registry: Registry) -> Registry:
    (registry.root / bound.PIN_FILE).write_text("0" * 64 + "\n")
    return registry


def test_a_home_bound_to_another_registry_that_exists_refuses_this_one_word_for_word(
    registry: Registry, home: Path, tmp_path: Path
) -> None:
    other = tmp_path / "elsewhere"
    shutil.copytree(registry.root, other)
    (home / bound.BOUND_FILE).write_text(f"  {other.resolve()}\n")
    with pytest.raises(ConfigError) as refused:
        bound.refuse_another(home, registry.root)
    assert str(refused.value) == (
        f"the keys in {home} are guarded by the registry at {other.resolve()} (its approvers and approval key); "
        f"the registry {registry.root.resolve()} cannot stand in for it (an operator who moved the bus removes "
        f"{home / bound.BOUND_FILE} by hand)"
    )
    bound.refuse_another(home, other)  # the registry it names stands


def test_a_bound_file_that_is_not_utf8_is_read_with_replacements_and_refuses_nothing(
    registry: Registry, home: Path
) -> None:
    (home / bound.BOUND_FILE).write_bytes(b"/gone/\xff\xfe/registry\n")
    bound.refuse_another(home, registry.root)  # no such registry: nothing to defer to
    bound.check(home, _guarding(registry))  # read, not matched: bound to this one now
    assert (home / bound.BOUND_FILE).read_text() == f"{registry.root.resolve()}\n"


def test_a_home_bound_to_a_registry_that_is_gone_is_bound_to_the_guarding_one(registry: Registry, home: Path) -> None:
    (home / bound.BOUND_FILE).write_text("/no/such/registry\n")
    bound.check(home, _guarding(registry))
    assert (home / bound.BOUND_FILE).read_text() == f"{registry.root.resolve()}\n"


def test_a_registry_that_guards_nothing_binds_nothing(registry: Registry, home: Path) -> None:
    bound.check(home, registry)
    assert not (home / bound.BOUND_FILE).exists()
    bound.check(home / "no-home-yet", _guarding(registry))  # no home folder: nothing written
    assert not (home / "no-home-yet").exists()


def test_a_home_bound_to_this_registry_already_is_not_written_again(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / bound.BOUND_FILE).write_text(f"{registry.root.resolve()}  \n")
    written: list[Path] = []
    monkeypatch.setattr(bound, "write_atomic", lambda path, data: written.append(path))
    bound.check(home, _guarding(registry))
    assert written == []
