"""The DKIM key a process signs with: read from its owner-only file once, not once a letter,
and read again (with every check) as soon as the file is another one (issue 11, the send path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail import credentials
from agentmail.errors import ConfigError, SecretError
from agentmail.signing import generate_keypair


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The key files actually opened from now on (the real read still runs)."""
    seen: list[Path] = []
    real = credentials.read_owner_only

    def counting(path: Path) -> str:
        seen.append(path)
        return real(path)

    monkeypatch.setattr(credentials, "read_owner_only", counting)
    monkeypatch.setattr(credentials, "_KEYS", {})
    return seen


def test_a_settled_key_file_is_read_once_per_process(
    home: Path, reads: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(credentials, "_SETTLED_NS", -1)  # as if written long ago
    key, _ = generate_keypair()
    path = credentials.write_private_key(home, "gamma", key)
    assert [credentials.read_private_key(home, "gamma") for _ in range(3)] == [key] * 3
    assert reads == [path]


def test_a_key_changed_in_place_within_the_same_clock_tick_is_read_again(home: Path, reads: list[Path]) -> None:
    """Same inode, same size, and maybe the same coarse mtime: a file changed moments ago is not
    kept, so the second key is the one used."""
    first, _ = generate_keypair()
    second, _ = generate_keypair()
    path = credentials.write_private_key(home, "gamma", first)
    assert credentials.read_private_key(home, "gamma") == first
    path.write_text(second + "\n")  # in place: the inode and the size stay
    assert credentials.read_private_key(home, "gamma") == second
    assert len(reads) == 2


def test_a_rotated_key_takes_effect_and_a_loosened_mode_is_refused(
    home: Path, reads: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(credentials, "_SETTLED_NS", -1)
    first, _ = generate_keypair()
    second, _ = generate_keypair()
    path = credentials.write_private_key(home, "gamma", first)
    assert credentials.read_private_key(home, "gamma") == first
    credentials.write_private_key(home, "gamma", second)  # keygen: a new file renamed into place
    assert credentials.read_private_key(home, "gamma") == second
    os.chmod(path, 0o644)
    with pytest.raises(SecretError, match="readable by others"):
        credentials.read_private_key(home, "gamma")
    path.unlink()
    with pytest.raises(ConfigError, match="is missing"):
        credentials.read_private_key(home, "gamma")
