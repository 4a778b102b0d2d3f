"""Reading a file to attach, saving a letter's attachments and their names, exact (written for
mutation testing's survivors, tests/MUTATION.md run 6): the size limit at its edge, which home is
confined, each refusal's wording, and the names saved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.errors import BadInput, ConfigError, NotFound
from agentmail.letter.attach import Attachment, unique_names
from agentmail.stages import evidence


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
        pytest.skip("runs as a user that is not root: root reads a file of mode 0000, so none is unreadable")
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


# --- run 7, second part: save's own checks, the symlink check, apply's refusals whole -------------


def test_save_refuses_a_name_that_would_leave_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    one = (Attachment("a.log", "text/x-log", b"A"),)
    for name in ("../a.log", ".."):  # safe_name never gives these; the check stands behind it
        monkeypatch.setattr(evidence, "unique_names", lambda _items, n=name: [n])
        assert refused(evidence.save, one, tmp_path) == f"the attachment name {name!r} would leave {tmp_path.resolve()}"
    assert sorted(tmp_path.iterdir()) == []


def test_save_writes_nothing_when_a_later_name_exists_and_names_a_folder_in_the_way(tmp_path: Path) -> None:
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    (tmp_path / "b.log").write_bytes(b"old")
    two = (Attachment("a.log", "text/x-log", b"A"), Attachment("b.log", "text/x-log", b"B"))
    assert refused(evidence.save, two, tmp_path) == f"{tmp_path.resolve() / 'b.log'} exists; --force replaces it"
    assert not (tmp_path / "a.log").exists() and (tmp_path / "b.log").read_bytes() == b"old"
    (tmp_path / "a.log").mkdir()
    assert refused(evidence.save, two, tmp_path, force=True) == f"{tmp_path.resolve() / 'a.log'} is a directory"
    assert (tmp_path / "b.log").read_bytes() == b"old"


def test_a_link_leaves_by_its_own_climb_or_an_absolute_target_outside(tmp_path: Path) -> None:
    scratch, checkout = tmp_path / "tree", tmp_path / "checkout"
    scratch.mkdir()
    checkout.mkdir()
    leaves = evidence._leaves  # the links named are not in the tree: only the words decide
    assert leaves("a", "..", scratch, checkout) and leaves("a", "../x", scratch, checkout)
    assert leaves("logs/a", "../../x", scratch, checkout) and leaves("a", "b/../../x", scratch, checkout)
    assert not leaves("logs/a", "../quota.py", scratch, checkout) and not leaves("a", "b/..", scratch, checkout)
    assert not leaves("a", str(checkout / "x"), scratch, checkout) and not leaves("a", str(checkout), scratch, checkout)
    assert leaves("a", str(scratch / "x"), scratch, checkout) and leaves("a", "/etc", scratch, checkout)


def test_a_link_leads_out_as_made_or_as_the_tree_now_has_it(tmp_path: Path) -> None:
    scratch = tmp_path / "tree"
    scratch.mkdir()
    (scratch / "now").symlink_to("../out")  # made pointing inside, changed by a later patch
    links = [("1.patch", "now", "inside"), ("2.patch", "gone", "../out"), ("3.patch", "fine", "x")]
    assert evidence._leading_out(links, scratch, scratch) == ["1.patch: now -> inside", "2.patch: gone -> ../out"]
    (scratch / "back").symlink_to("../tree/x")  # resolves inside, but its words climb out
    assert evidence._leading_out([("5.patch", "back", "inside")], scratch, scratch) == ["5.patch: back -> inside"]
    (scratch / "abs").symlink_to(scratch / "x")  # an absolute link into the scratch tree, not the checkout
    now_absolute = [("6.patch", "abs", "inside")]
    assert evidence._leading_out(now_absolute, scratch, tmp_path / "checkout") == ["6.patch: abs -> inside"]
    absolute = [("4.patch", "abs", "/etc/passwd")]
    assert evidence._leading_out(absolute, scratch, scratch) == ["4.patch: abs -> /etc/passwd"]


GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@x",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@x",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git_at(repo: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True, check=True
    ).stdout


def _repos(tmp_path: Path) -> tuple[Path, Path]:
    fixer, target = tmp_path / "fixer", tmp_path / "target"
    fixer.mkdir()
    _git_at(fixer, "init", "-q", "-b", "main")
    (fixer / "quota.py").write_text("LIMIT = 5\n")
    _git_at(fixer, "add", ".")
    _git_at(fixer, "commit", "-qm", "first")
    _git_at(tmp_path, "clone", "-q", str(fixer), str(target))
    return fixer, target


def test_apply_refuses_links_out_and_several_commits_in_its_own_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)  # git am in the scratch tree needs a committer
    fixer, target = _repos(tmp_path)
    (fixer / "a").symlink_to("/etc/passwd")
    (fixer / "b").symlink_to("../..")
    _git_at(fixer, "add", "-A")
    _git_at(fixer, "commit", "-qm", "Links")
    (fixer / "quota.py").write_text("LIMIT = 6\n")
    _git_at(fixer, "commit", "-qam", "More")
    [links, more] = evidence.from_patches("HEAD~2..", fixer)
    assert refused(evidence.apply, (links,), target, check_only=True) == (
        f"refused: the patches make symlinks that lead outside the checkout ({links.name}: a -> /etc/passwd; "
        f"{links.name}: b -> ../..); nothing applied"
    )
    both = Attachment("both.patch", evidence.PATCH_TYPE, links.data + more.data)
    assert refused(evidence.apply, (both,), target) == (
        "attachment both.patch holds 2 commits (several in one file); nothing applied; "
        "'apply --series' lists and lands each of them ('apply --check --series' only lists)"
    )
    assert _git_at(target, "log", "--format=%s") == "first\n"
    checked = evidence.apply((more,), target, check_only=True)
    assert checked.commits == (evidence.Commit(more.name, "t <t@x>", "More", ("M quota.py",)),)
    words = refused(evidence.apply, (Attachment("bad.patch", evidence.PATCH_TYPE, b"not a patch\n"),), target)
    assert words.startswith("git am failed (aborted, nothing changed): bad.patch: ") and len(words) > 54
    assert evidence.apply((more,), target).detail == "applied 1 patch(es) with git am"
    assert _git_at(target, "log", "--format=%s") == "More\nfirst\n"


def _scripted_git(tmp_path: Path, body: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "git").write_text(f"#!/bin/sh\n{body}\n")
    (folder / "git").chmod(0o755)
    return folder


@pytest.mark.parametrize(
    ("script", "words"),
    [
        ("echo 'fatal: no HEAD' >&2; exit 128", "apply: git rev-parse failed in the scratch worktree: fatal: no HEAD"),
        ('/bin/rm -- "$0"; echo 0123', "apply needs git, which is not installed"),  # git gone before `am`
    ],
)
def test_a_git_that_fails_or_vanishes_in_the_scratch_tree_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, words: str
) -> None:
    (tmp_path / "tree").mkdir()
    monkeypatch.setenv("PATH", str(_scripted_git(tmp_path, script)))
    patch = (Attachment("x.patch", evidence.PATCH_TYPE, b"From 0 Mon Sep 17 00:00:00 2001\n"),)
    with pytest.raises((BadInput, ConfigError)) as caught:
        evidence._try_in(tmp_path / "tree", tmp_path / "tree", patch, [], [], False)
    assert str(caught.value) == words


def test_the_scratch_tree_without_git_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tree").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ConfigError) as caught:
        evidence._try_in(tmp_path / "tree", tmp_path / "tree", (), [], [], False)
    assert str(caught.value) == "apply needs git, which is not installed"
