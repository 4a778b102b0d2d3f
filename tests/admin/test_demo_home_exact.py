"""``demo --home`` on a used home, exactly (admin/demo.py ``_refuse_used``): the refusal word for
word, and a home that cannot be looked into refused with the system's word, exit 6 (tests/MUTATION.md,
run 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.admin.demo import _refuse_used
from agentmail.errors import ConfigError

from ..conftest import Cli

TAIL = "the demo makes a new bus and never rewrites one: give a new or empty folder, or leave --home out for a temporary one"


def test_the_refusals_word_for_word(home: Path, tmp_path: Path) -> None:
    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    with pytest.raises(ConfigError) as refused:
        _refuse_used(home)
    assert str(refused.value) == f"demo --home {home}: refused, it holds a bus (registry/bus.toml); {TAIL}"
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    with pytest.raises(ConfigError) as refused:
        _refuse_used(a_file)
    assert str(refused.value) == f"demo --home {a_file}: refused, it is not an empty folder; {TAIL}"
    (tmp_path / "new").mkdir()
    _refuse_used(tmp_path / "new")  # an empty folder, or none yet: the demo's
    _refuse_used(tmp_path / "none-yet")


@pytest.mark.parametrize(
    ("error", "word"), [(PermissionError(13, "Permission denied"), "Permission denied"), (OSError(), "OSError")]
)
def test_a_home_that_cannot_be_looked_into_is_refused_with_the_systems_word_exit_6(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError, word: str
) -> None:
    """Its listing fails (no permission, an I/O error): the demo says so in one line, exit 6, and
    builds nothing (the strerror, else the error's name)."""
    used = tmp_path / "project"
    used.mkdir()

    def unreadable(self: Path) -> object:
        raise error

    monkeypatch.setattr(Path, "iterdir", unreadable)
    with pytest.raises(ConfigError) as refused:
        _refuse_used(used)
    assert str(refused.value) == f"demo --home {used}: {word}"
    code, out, err = cli("demo", "--home", str(used))
    assert (code, out) == (6, "") and err.count("\n") == 1 and f"demo --home {used}: {word}" in err
    monkeypatch.undo()
    assert list(used.iterdir()) == []
