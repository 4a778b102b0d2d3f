"""Reading a file to attach, saving a letter's attachments and their names, exact (written for
mutation testing's survivors, tests/MUTATION.md run 6): the size limit at its edge, which home is
confined, each refusal's wording, and the names saved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail import evidence
from agentmail.attach import Attachment, unique_names
from agentmail.errors import BadInput, ConfigError, NotFound


def refused(call: object, *args: object, **kwargs: object) -> str:
    with pytest.raises((BadInput, NotFound)) as caught:
        call(*args, **kwargs)  # type: ignore[operator]
    return str(caught.value)


def test_a_file_of_exactly_the_limit_is_attached_whole_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run.log").write_bytes(b"x" * 10)
    item = evidence.from_file(tmp_path / "run.log", 10, home=tmp_path / "home")
    assert (item.name, item.type, item.data) == ("run.log", "text/x-log", b"x" * 10)
    assert refused(evidence.from_file, tmp_path / "run.log", 9, home=tmp_path / "home") == (
        "attachment refused: run.log is larger than 9 bytes, what an attachment may be (bus set attach_max_bytes)"
    )


def test_the_home_given_is_the_one_confined_else_agentmail_home(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-home"
    other.mkdir()
    (other / "key.txt").write_text("secret")
    (home / "note.txt").write_text("mine")
    assert refused(evidence.from_file, other / "key.txt", 100, home=other) == (
        f"--attach {other / 'key.txt'}: lies inside the agentmail home ({other.resolve()}); its keys, "
        "logins and spools are never attached"
    )
    assert evidence.from_file(home / "note.txt", 100, home=other).data == b"mine"  # not the home given
    assert refused(evidence.from_file, home / "note.txt", 100).startswith(f"--attach {home / 'note.txt'}: lies inside")
    assert evidence.from_file(other / "key.txt", 100).data == b"secret"  # $AGENTMAIL_HOME is home


def test_a_file_that_cannot_be_read_is_named_with_the_reason(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads a 0000 file")
    locked = tmp_path / "locked.log"
    locked.write_text("x")
    locked.chmod(0)
    assert refused(evidence.from_file, locked, 100, home=tmp_path / "home") == (f"--attach {locked}: Permission denied")


def test_a_directory_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    assert refused(evidence.from_file, tmp_path / "logs", 100, home=tmp_path / "home") == (
        f"--attach {tmp_path / 'logs'}: not a regular file"
    )


def test_save_refuses_nothing_to_save_a_missing_folder_and_a_file(tmp_path: Path) -> None:
    one = (Attachment("a.log", "text/x-log", b"A"),)
    assert refused(evidence.save, (), tmp_path) == "the letter carries no attachments"
    assert (
        refused(evidence.save, one, tmp_path / "nosuch")
        == f"--dir {tmp_path / 'nosuch'}: does not exist (create it first)"
    )
    (tmp_path / "afile").write_text("x")
    assert refused(evidence.save, one, tmp_path / "afile") == f"--dir {tmp_path / 'afile'}: not a directory"
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    assert refused(evidence.save, one, tmp_path / "dangling") == f"--dir {tmp_path / 'dangling'}: not a directory"


def test_save_never_replaces_a_file_unless_forced(tmp_path: Path) -> None:
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    (tmp_path / "a.log").write_bytes(b"old")
    one = (Attachment("a.log", "text/x-log", b"new"),)
    assert refused(evidence.save, one, tmp_path) == f"{tmp_path.resolve() / 'a.log'} exists; --force replaces it"
    assert (tmp_path / "a.log").read_bytes() == b"old"
    assert evidence.save(one, tmp_path, force=True) == [tmp_path.resolve() / "a.log"]
    assert (tmp_path / "a.log").read_bytes() == b"new" and (tmp_path / "a.log").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.log"]  # no temporary file left


def test_save_writes_each_attachment_under_its_unique_name(tmp_path: Path) -> None:
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    items = (
        Attachment("run.log", "text/x-log", b"1"),
        Attachment("RUN.log", "text/x-log", b"2"),
        Attachment("run.log", "text/x-log", b"3"),
        Attachment("", "text/plain", b"4"),
        Attachment("notes", "text/plain", b"5"),
        Attachment("notes", "text/plain", b"6"),
        Attachment("a.tar.gz", "application/gzip", b"7"),
        Attachment("a.tar.gz", "application/gzip", b"8"),
    )
    names = ["run.log", "RUN-2.log", "run-3.log", "attachment-4", "notes", "notes-2", "a.tar.gz", "a.tar-2.gz"]
    assert unique_names(items) == names
    assert evidence.save(items, tmp_path) == [tmp_path.resolve() / n for n in names]
    assert [(tmp_path / n).read_bytes() for n in names] == [str(i).encode() for i in range(1, 9)]
    assert {(tmp_path / n).stat().st_mode & 0o777 for n in names} == {0o600}  # a new file too, not only a replaced one


# --- run 7: the confined open's refusals, the secrets check, the git probes -------------------


def test_a_name_that_is_no_file_name_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert refused(evidence.from_file, ".", 100, home=tmp_path / "home") == "--attach .: not a regular file"
    assert refused(evidence.from_file, "a/..", 100, home=tmp_path / "home") == "--attach a/..: not a regular file"


def test_each_refusal_of_the_confined_open_is_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "real.log").write_text("x")
    (tmp_path / "link.log").symlink_to(tmp_path / "real.log")
    assert refused(evidence.from_file, tmp_path / "link.log", 100, home=home) == (
        f"--attach {tmp_path / 'link.log'}: is a symbolic link; attach the file itself, not a link to it"
    )
    assert refused(evidence.from_file, tmp_path / "gone.log", 100, home=home) == (
        f"--attach {tmp_path / 'gone.log'}: not a readable file (it does not exist)"
    )
    through = tmp_path / "real.log" / "x.log"  # a file where a folder should be
    assert refused(evidence.from_file, through, 100, home=home) == (
        f"--attach {through}: a symbolic link appeared on its path while it was opened"
    )
    long = tmp_path / ("a" * 300)
    assert refused(evidence.from_file, long, 100, home=home) == f"--attach {long}: File name too long"


def test_a_home_at_the_root_holds_every_path() -> None:
    assert evidence._inside("/etc/hosts", "/")
    assert evidence._inside("/h", "/h") and evidence._inside("/h/x", "/h/")
    assert not evidence._inside("/hx", "/h")


def test_a_hard_link_to_a_secret_is_named_and_other_hard_links_are_not_secrets(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "secrets").mkdir(parents=True)
    (home / "secrets" / "key.pem").write_text("KEY")
    os.link(home / "secrets" / "key.pem", tmp_path / "key-copy.txt")  # two links: the least there is
    assert refused(evidence.from_file, tmp_path / "key-copy.txt", 100, home=home) == (
        f"--attach {tmp_path / 'key-copy.txt'}: is a file of the agentmail home's secrets under another name (a hard link)"
    )
    (tmp_path / "log.txt").write_text("LOG")
    os.link(tmp_path / "log.txt", tmp_path / "log-2.txt")
    (home / "secrets" / "log-link").symlink_to(tmp_path / "log.txt")  # a link in secrets: not its target
    assert evidence.from_file(tmp_path / "log.txt", 100, home=home).data == b"LOG"
    assert evidence.from_file(tmp_path / "log.txt", 100, home=tmp_path / "no-home").data == b"LOG"  # no secrets/


def test_patches_are_the_diff_typed_parts_and_the_patch_or_diff_named_ones() -> None:
    items = (
        Attachment("fix.txt", evidence.PATCH_TYPE, b"1"),
        Attachment("a.patch", "text/plain", b"2"),
        Attachment("b.diff", "text/plain", b"3"),
        Attachment("c.log", "text/plain", b"4"),
        Attachment("d.PATCH", "text/plain", b"5"),
    )
    assert evidence.patches_of(items) == items[:3]


def test_git_runs_without_the_checkout_s_hooks_pager_or_editor(tmp_path: Path) -> None:
    assert evidence._quiet_git(tmp_path) == [
        *("-c", f"core.hooksPath={tmp_path}", "-c", "core.pager=cat", "-c", "core.editor=false")
    ]


def _fake_git(tmp_path: Path, help_text: str, to: str) -> Path:
    """A git whose ``am -h`` prints ``help_text`` (to stdout or stderr) and logs where and how it ran:
    the probe of a newer git than this machine's 2.39, which has no ``git am --no-verify``."""
    folder = tmp_path / f"bin-{to}"
    folder.mkdir()
    log = tmp_path / f"git-{to}.log"
    redirect = " >&2" if to == "stderr" else ""
    (folder / "git").write_text(f'#!/bin/sh\necho "$(pwd -P) $*" >> {log}\necho "{help_text}"{redirect}\nexit 129\n')
    (folder / "git").chmod(0o755)
    return folder


@pytest.mark.parametrize("to", ["stdout", "stderr"])
def test_am_gets_no_verify_where_git_lists_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, to: str) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.setenv("PATH", str(_fake_git(tmp_path, "usage: git am [--no-verify] [--3way]", to)))
    assert evidence._am_flags(checkout) == ["--no-verify"]
    assert (tmp_path / f"git-{to}.log").read_text() == f"{checkout.resolve()} am -h\n"


def test_am_gets_no_flag_where_git_does_not_list_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(_fake_git(tmp_path, "usage: git am [--3way] [--NO-VERIFY]", "stdout")))
    assert evidence._am_flags(tmp_path) == []


def test_apply_without_git_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ConfigError) as caught:
        evidence._am_flags(tmp_path)
    assert str(caught.value) == "apply needs git, which is not installed"


def test_a_file_of_no_known_type_is_typed_by_its_bytes(tmp_path: Path) -> None:
    (tmp_path / "notes.zzq").write_bytes(b"plain words")
    (tmp_path / "blob.zzq").write_bytes(b"\xff\x00")
    assert evidence.from_file(tmp_path / "notes.zzq", 100, home=tmp_path / "home").type == "text/plain"
    assert evidence.from_file(tmp_path / "blob.zzq", 100, home=tmp_path / "home").type == "application/octet-stream"


def test_a_socket_is_refused_with_the_system_s_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.chdir(tmp_path)  # a short relative path: a socket's address is at most 108 bytes
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind("s.sock")
        assert refused(evidence.from_file, tmp_path / "s.sock", 100, home=tmp_path / "home") == (
            f"--attach {tmp_path / 's.sock'}: No such device or address"
        )
