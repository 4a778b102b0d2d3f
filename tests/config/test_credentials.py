"""The DKIM key a process signs with: read from its owner-only file once, not once a letter,
and read again (with every check) as soon as the file is another one (issue 11, the send path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.config import credentials
from agentmail.errors import ConfigError, SecretError
from agentmail.trust.signing import generate_keypair


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


# --- the mailbox secret from a command (AGENTMAIL_PASSWORD_CMD) -----------------------------

import subprocess  # noqa: E402
import sys  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ..depth import examples, suppressed  # noqa: E402

WHERE = "the command of AGENTMAIL_PASSWORD_CMD in the environment (program 'helper')"
# What printed bytes can turn into: the secret, or one of these sentences after WHERE.
REFUSALS = {f"{WHERE} {reason}" for reason in credentials.OUTPUT_PROBLEMS.values()}


def printing(data: bytes) -> tuple[str, ...]:
    """A command (no shell) whose standard output is exactly ``data``."""
    code = "import sys; sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]))"
    return (sys.executable, "-c", code, data.hex())


def test_the_trailing_newline_is_stripped_and_nothing_else() -> None:
    for printed, secret in ((b"tok\n", "tok"), (b"tok\r\n", "tok"), (b"tok", "tok"), (b" p w \n", " p w ")):
        assert credentials.run_secret_command(printing(printed), WHERE) == secret


def test_the_command_runs_without_a_shell() -> None:
    argv = credentials.command_line("printf '%s' '$HOME;`id`|x'", "AGENTMAIL_PASSWORD_CMD")
    assert argv == ("printf", "%s", "$HOME;`id`|x")
    assert credentials.run_secret_command(argv, WHERE) == "$HOME;`id`|x"  # no expansion, no pipe


def test_a_command_line_that_cannot_be_split_or_is_empty_is_refused() -> None:
    with pytest.raises(ConfigError, match="is not a command line \\(a quote is not closed\\)"):
        credentials.command_line("pass show 'mail", "AGENTMAIL_PASSWORD_CMD in x")
    with pytest.raises(ConfigError, match="is empty"):
        credentials.command_line("   ", "AGENTMAIL_PASSWORD_CMD in x")
    assert credentials.command_line("~/bin/tok a", "x")[0] == os.path.expanduser("~/bin/tok")


def test_a_failing_command_says_how_in_one_line_and_never_shows_its_error_output(
    capfd: pytest.CaptureFixture[str],
) -> None:
    noisy = (sys.executable, "-c", "import sys; print('S3CRET'); sys.stderr.write('S3CRET-err'); sys.exit(4)")
    cases = [
        (noisy, "exited with status 4 (its error output is not shown"),
        ((sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"), "killed by signal 15"),
        (("/nonexistent/helper",), "cannot be run: there is no such program"),
        ((str(Path(__file__)),), "cannot be run: it is not executable"),
        ((sys.executable, "-c", "print('S3CRET', end='')", "-"), None),
    ]
    for argv, why in cases:
        if why is None:
            assert credentials.run_secret_command(argv, WHERE) == "S3CRET"
            continue
        with pytest.raises(ConfigError) as caught:
            credentials.run_secret_command(argv, WHERE)
        message = str(caught.value)
        assert message.startswith(WHERE) and why in message and "\n" not in message and "S3CRET" not in message
        # no library exception chained to it (a traceback that could carry the bytes)
        assert caught.value.__cause__ is None
        assert caught.value.__context__ is None or caught.value.__suppress_context__
    out, err = capfd.readouterr()
    assert "S3CRET" not in out + err  # its standard error never reaches ours


def test_a_command_that_hangs_or_never_stops_printing_is_stopped() -> None:
    with pytest.raises(ConfigError, match="did not finish within 0.5s"):
        credentials.run_secret_command((sys.executable, "-c", "import time; time.sleep(60)"), WHERE, timeout=0.5)
    # it closes its output and goes on: stopped all the same
    late = "import os, time; os.close(1); time.sleep(60)"
    with pytest.raises(ConfigError, match="did not finish"):
        credentials.run_secret_command((sys.executable, "-c", late), WHERE, timeout=0.5)
    endless = (sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('y' * 65536)")
    with pytest.raises(ConfigError, match="gave more than 64 KiB"):
        credentials.run_secret_command(endless, WHERE)


def test_each_call_runs_the_command_again(tmp_path: Path) -> None:
    """Run for each connection: nothing is cached, so a renewed token is the one used."""
    counter = tmp_path / "n"
    code = "import pathlib, sys; p = pathlib.Path(sys.argv[1]); n = int(p.read_text() or 0) + 1 if p.exists() else 1; p.write_text(str(n)); print(f'tok{n}')"
    login = credentials.Login("a@b.test", "", WHERE, command=(sys.executable, "-c", code, str(counter)))
    assert [login.secret() for _ in range(3)] == ["tok1", "tok2", "tok3"]
    assert "tok" not in repr(login) and "command='python" in repr(login)


@given(st.binary(max_size=300))
@settings(max_examples=examples(400), suppress_health_check=suppressed(HealthCheck.too_slow))
def test_any_output_is_the_secret_or_one_clear_refusal_never_echoed(data: bytes) -> None:
    try:
        secret = credentials.secret_from_output(data, WHERE)
    except ConfigError as exc:
        assert str(exc) in REFUSALS  # a fixed sentence: no byte of the output is in it
        return
    line = data[:-1] if data.endswith(b"\n") else data
    line = line[:-1] if data.endswith(b"\r\n") else line
    assert secret.encode() == line and secret
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in secret)


@given(
    st.one_of(
        st.binary(max_size=64),
        st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=64).map(
            lambda t: (t + "\n").encode()
        ),
    )
)
@settings(max_examples=examples(25), deadline=None, suppress_health_check=suppressed(HealthCheck.too_slow))
def test_a_real_command_printing_any_bytes_gives_the_secret_or_one_line(data: bytes) -> None:
    """Through a real process: whatever it prints, a secret or a ConfigError of one line, never a
    traceback or another exception type, never the bytes printed."""
    try:
        secret = credentials.run_secret_command(printing(data), WHERE)
    except ConfigError as exc:
        assert str(exc) in REFUSALS
    else:
        assert secret.encode() in (data, data[:-1], data[:-2])


def test_importing_agentmail_does_not_import_keyring() -> None:
    code = "import sys, agentmail.cli.app, agentmail.transport.smtpimap; print('keyring' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_each_secret_source_is_read_from_the_environment_or_the_file(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = credentials.env_file(home, "gamma")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text("AGENTMAIL_USERNAME=g@bus.test\nAGENTMAIL_PASSWORD_CMD='/opt/tok en' --for g\n")
    path.chmod(0o600)
    login = credentials.mailbox_login(home, "gamma", "gamma@bus.test")
    assert (login.username, login.password, login.command) == ("g@bus.test", "", ("/opt/tok en", "--for", "g"))
    assert login.source == f"the command of AGENTMAIL_PASSWORD_CMD in {path} (program 'tok en')"
    monkeypatch.setenv("AGENTMAIL_PASSWORD_KEYRING", " agentmail ")
    login = credentials.mailbox_login(home, "gamma", "gamma@bus.test")
    assert (login.username, login.keyring, login.command) == ("gamma@bus.test", "agentmail", ())
    assert "AGENTMAIL_PASSWORD_KEYRING in the environment" in login.source
    monkeypatch.setenv("AGENTMAIL_PASSWORD_KEYRING", "")
    with pytest.raises(ConfigError, match="AGENTMAIL_PASSWORD_KEYRING in the environment is empty"):
        credentials.mailbox_login(home, "gamma", "gamma@bus.test")
    monkeypatch.delenv("AGENTMAIL_PASSWORD_KEYRING")
    monkeypatch.setenv("AGENTMAIL_PASSWORD", "pw")  # today's way, unchanged
    assert credentials.mailbox_login(home, "gamma", "gamma@bus.test") == credentials.Login(
        "gamma@bus.test", "pw", "the environment (AGENTMAIL_PASSWORD)"
    )
    path.write_text("AGENTMAIL_USERNAME=g@bus.test\n")
    monkeypatch.delenv("AGENTMAIL_PASSWORD")
    with pytest.raises(ConfigError, match="has no AGENTMAIL_PASSWORD line \\(nor AGENTMAIL_PASSWORD_CMD, _KEYRING\\)"):
        credentials.mailbox_login(home, "gamma", "gamma@bus.test")
