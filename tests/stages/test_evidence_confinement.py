"""Evidence confinement (issue 23, class 2), written as the attacks: a letter cannot turn
``--attach``, ``apply`` or ``save`` against the agent that honestly runs them — no key mailed out
through a planted link, no secret in an attachment unchallenged, no hook run, no commit landed
unseen, no symlink out of the checkout, no filed letter changed after it was verified."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.client.facade import AgentMail
from agentmail.errors import BadInput, Refused
from agentmail.letter import attach
from agentmail.stages import evidence

from ..conftest import OPENER, Cli
from ..depth import examples, suppressed

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@x",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@x",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@pytest.fixture(autouse=True)
def hermetic_git(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)  # git am needs a committer; no machine's own config


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "quota.py").write_text("LIMIT = 5\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "first")
    return path


def clone(source: Path, target: Path) -> Path:
    git(source.parent, "clone", "-q", str(source), str(target))
    return target


def commit_all(repo: Path, subject: str, *extra: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", subject, *extra)


def deliver_patches(alpha: AgentMail, beta: AgentMail, items: tuple[attach.Attachment, ...]) -> str:
    """alpha mails ``items``; beta reads the letter. Its id."""
    alpha.send("beta", "Fix", OPENER, attachments=items)
    [letter] = beta.inbox()
    return letter.id


# --- --attach: the planted link, the secrets, what is not a file --------------------------


def test_a_planted_link_to_the_dkim_key_is_not_attached_by_an_honest_reply(
    alpha: AgentMail, home: Path, tmp_path: Path, cli: Cli
) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "logs").mkdir(parents=True)
    key = home / "secrets" / "alpha.key"
    (checkout / "logs" / "run.log").symlink_to(key)  # what a hostile patch plants
    (checkout / "leak").symlink_to(home / "secrets")  # a directory link walks around nothing either
    os.link(key, checkout / "copy.log")  # nor a hard link of the key under a harmless name
    for path, said in (
        (checkout / "logs" / "run.log", "is a symbolic link"),
        (checkout / "leak" / "alpha.key", "lies inside the agentmail home"),
        (home / "secrets" / "alpha.key", "lies inside the agentmail home"),
        (home / "spool" / ".." / "secrets" / "alpha.key", "lies inside the agentmail home"),
        (checkout / "copy.log", "a hard link"),
    ):
        code, out, err = cli("--as", "alpha", "send", "beta", "-s", "the log", "-b", OPENER,
                             "--attach", str(path))  # fmt: skip
        assert code == 2 and out == "" and said in err and len(err.strip().splitlines()) == 1, (path, err)
        with pytest.raises(BadInput, match=said):
            evidence.from_file(path, 1 << 20, home=home)
    assert alpha.sent() == []
    assert key.read_text() not in "".join(p.read_text(errors="replace") for p in home.rglob("*.eml"))


def test_a_fifo_or_a_directory_is_refused_without_hanging(home: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="not a regular file"):
        evidence.from_file(fifo, 100, home=home)
    with pytest.raises(BadInput, match="not a regular file"):
        evidence.from_file(tmp_path, 100, home=home)
    with pytest.raises(BadInput, match="does not exist"):
        evidence.from_file(tmp_path / "none.log", 100, home=home)


def test_a_directory_swapped_for_a_link_after_the_check_fails_the_walk(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "alpha.key").write_text("harmless\n")
    real = os.path.realpath

    def swap(path: str | os.PathLike[str]) -> str:  # the race: checked, then replaced by a link
        answer = real(path)
        if (tmp_path / "logs").is_dir() and not (tmp_path / "logs").is_symlink():
            os.rename(tmp_path / "logs", tmp_path / "old")
            (tmp_path / "logs").symlink_to(home / "secrets")
        return answer

    monkeypatch.setattr(os.path, "realpath", swap)
    with pytest.raises(BadInput, match="symbolic link appeared"):
        evidence.from_file(tmp_path / "logs" / "alpha.key", 100, home=home)


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("notes.txt", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n", "a private key"),
        ("config.log", "DB_PASSWORD=hunter22hunter\n", "a password or token assignment"),
        (".env", "MODE=dev\n", "named like a secret file"),
        ("prod.env", "MODE=dev\n", "named like a secret file"),
        ("id_ed25519", "not a key at all\n", "named like a secret file"),
        ("server.pem", "nothing\n", "named like a secret file"),
        ("deploy.key", "nothing\n", "named like a secret file"),
    ],
)
def test_a_secret_attached_is_refused_unless_forced(
    alpha: AgentMail, tmp_path: Path, cli: Cli, name: str, content: str, said: str
) -> None:
    file = tmp_path / name
    file.write_text(content)
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "the log", "-b", OPENER, "--attach", str(file))
    assert code == 4 and out == "" and said in err and "--force" in err, err
    assert alpha.sent() == []
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "the log", "-b", OPENER, "--attach", str(file),
                       "--force")  # fmt: skip
    assert code == 0 or (code == 2 and "allow-list" in err), err  # past the scan; .pem/.key are not allowed types


def test_every_path_that_writes_a_letter_scans_its_attachments(alpha: AgentMail, beta: AgentMail) -> None:
    secret = attach.Attachment("fix.patch", evidence.PATCH_TYPE, b"+AWS = 'AKIAABCDEFGHIJKLMNOP'\n")
    with pytest.raises(Refused, match="an AWS access key id"):
        alpha.send("beta", "Fix", OPENER, attachments=(secret,))
    alpha.send("beta", "Quota", OPENER)
    [got] = beta.inbox()
    assert beta.reply(got, "Reproduced.", type="ack", attachments=(secret,)) is None
    assert "fix.patch looks like it contains an AWS access key id" in str(beta.why_refused(got))
    with pytest.raises(Refused, match="fix.patch"):
        alpha.note("handover", "the patch", attachments=(secret,))
    assert beta.reply(got, "Reproduced.", type="ack", attachments=(secret,), force=True) is not None


def test_the_patch_option_passes_the_same_scan(
    alpha: AgentMail, tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "fixer")
    (repo / "settings.py").write_text("password = 'correct-horse-battery'\n")
    commit_all(repo, "Settings")
    monkeypatch.chdir(repo)
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Fix", "-b", OPENER, "--patch", "HEAD~1..")
    assert code == 4 and "0001-Settings.patch looks like it contains a password assignment" in err
    assert alpha.sent() == []


# --- apply: hooks, several commits, symlinks, the series, git's hints ---------------------


HOOKS = ("applypatch-msg", "pre-applypatch", "post-applypatch", "post-checkout", "post-merge", "post-rewrite",
         "pre-commit", "post-commit", "reference-transaction")  # fmt: skip


def test_a_patch_that_adds_a_hook_never_has_it_run(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    fixer = make_repo(tmp_path / "fixer")
    target = clone(fixer, tmp_path / "target")
    git(target, "config", "core.hooksPath", ".githooks")  # tracked hooks, as husky sets them up
    marker = tmp_path / "ran"
    marker.mkdir()
    (fixer / ".githooks").mkdir()
    for hook in HOOKS:
        script = fixer / ".githooks" / hook
        script.write_text(f"#!/bin/sh\ntouch '{marker}/{hook}'\n")
        script.chmod(0o755)
    (fixer / "quota.py").write_text("LIMIT = 10\n")
    commit_all(fixer, "Raise the limit")
    letter = deliver_patches(alpha, beta, evidence.from_patches("HEAD~1..", fixer))
    checked = beta.apply(letter, target, check=True)
    assert not checked.landed and "A .githooks/post-applypatch" in checked.commits[0].paths
    done = beta.apply(letter, target)
    assert done.landed and (target / ".githooks" / "post-applypatch").exists()
    assert sorted(os.listdir(marker)) == []  # not one hook ran, in the scratch tree or the checkout
    git(target, "commit", "--allow-empty", "-qm", "a hook of mine")  # the checkout's own hooks still work
    assert "pre-commit" in os.listdir(marker)


def test_an_attachment_holding_several_commits_needs_series_and_every_commit_is_listed(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path, cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fixer = make_repo(tmp_path / "fixer")
    target = clone(fixer, tmp_path / "target")
    (fixer / "quota.py").write_text("LIMIT = 10\n")
    commit_all(fixer, "Raise the limit")
    (fixer / ".github" / "workflows").mkdir(parents=True)
    (fixer / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    commit_all(fixer, "Tidy CI", "--author", "Mallory <m@evil.example>")
    mbox = git(fixer, "format-patch", "--stdout", "HEAD~2..").encode()
    letter = deliver_patches(alpha, beta, (attach.Attachment("fix.patch", evidence.PATCH_TYPE, mbox, "the fix"),))
    monkeypatch.chdir(target)
    for check in ((), ("--check",)):
        code, out, err = cli("--as", "beta", "apply", *check, letter)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert "attachment fix.patch holds 2 commits" in err and "--series" in err
    assert git(target, "log", "--format=%s") == "first\n"
    code, out, _ = cli("--as", "beta", "--json", "apply", "--check", "--series", letter)
    assert code == 0 and json.loads(out) == {
        "applied": False,
        "detail": "2 patch(es) would apply cleanly",
        "commits": [
            {"patch": "fix.patch", "author": "t <t@x>", "subject": "Raise the limit", "paths": ["M quota.py"]},
            {"patch": "fix.patch", "author": "Mallory <m@evil.example>", "subject": "Tidy CI",
             "paths": ["A .github/workflows/ci.yml"]},
        ],
    }  # fmt: skip
    assert git(target, "log", "--format=%s") == "first\n"
    code, out, _ = cli("--as", "beta", "apply", "--series", letter)
    assert (
        code == 0 and "commit 2/2: Tidy CI\n  author: Mallory <m@evil.example>\n  A .github/workflows/ci.yml\n" in out
    )
    assert out.endswith("applied 2 patch(es) with git am\n")
    assert git(target, "log", "--format=%an %s") == "Mallory Tidy CI\nt Raise the limit\nt first\n"


@pytest.mark.parametrize("target_of", ["secrets", "relative", "through-a-link"])
def test_a_patch_that_plants_a_symlink_out_of_the_checkout_is_refused(
    alpha: AgentMail, beta: AgentMail, home: Path, tmp_path: Path, target_of: str
) -> None:
    fixer = make_repo(tmp_path / "fixer")
    target = clone(fixer, tmp_path / "target")
    (fixer / "logs").mkdir()
    if target_of == "secrets":
        (fixer / "logs" / "run.log").symlink_to(home / "secrets" / "beta.key")
    elif target_of == "relative":
        (fixer / "logs" / "run.log").symlink_to("../../home/secrets/beta.key")
    else:  # each link stays inside on its own; together they lead out
        (fixer / "logs" / "up").symlink_to("..")
        (fixer / "logs" / "run.log").symlink_to("up/../home/secrets/beta.key")
    commit_all(fixer, "Add the log")
    letter = deliver_patches(alpha, beta, evidence.from_patches("HEAD~1..", fixer))
    for check in (True, False):
        with pytest.raises(BadInput, match=r"symlinks that lead outside the checkout \(0001-Add-the-log.patch: logs/"):
            beta.apply(letter, target, check=check)
    assert git(target, "log", "--format=%s") == "first\n" and not (target / "logs").exists()


def test_a_symlink_inside_the_checkout_lands_and_is_named(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    fixer = make_repo(tmp_path / "fixer")
    target = clone(fixer, tmp_path / "target")
    (fixer / "docs").mkdir()
    (fixer / "docs" / "v2.md").write_text("v2\n")
    (fixer / "docs" / "latest.md").symlink_to("v2.md")
    commit_all(fixer, "Docs")
    done = beta.apply(deliver_patches(alpha, beta, evidence.from_patches("HEAD~1..", fixer)), target)
    assert "A docs/latest.md -> v2.md (symlink)" in done.commits[0].paths
    assert (target / "docs" / "latest.md").read_text() == "v2\n"


def test_a_series_that_creates_then_edits_a_file_checks_as_it_applies(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path, cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fixer = make_repo(tmp_path / "fixer")
    target = clone(fixer, tmp_path / "target")
    (fixer / "plan.py").write_text("PLANS = []\n")
    commit_all(fixer, "Add plans")
    (fixer / "plan.py").write_text("PLANS = ['free']\n")
    commit_all(fixer, "The free plan")
    letter = deliver_patches(alpha, beta, evidence.from_patches("HEAD~2..", fixer))
    monkeypatch.chdir(target)
    code, out, err = cli("--as", "beta", "apply", "--check", letter)
    assert code == 0 and out.endswith("2 patch(es) would apply cleanly\n"), err
    assert "commit 1/2: Add plans" in out and "  A plan.py" in out and "  M plan.py" in out
    assert not (target / "plan.py").exists()
    code, out, err = cli("--as", "beta", "apply", letter)
    assert code == 0 and out.endswith("applied 2 patch(es) with git am\n"), err
    assert (target / "plan.py").read_text() == "PLANS = ['free']\n"


def test_a_failed_apply_says_why_without_git_s_useless_hint(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path, cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fixer = make_repo(tmp_path / "fixer")
    target = clone(fixer, tmp_path / "target")
    (fixer / "quota.py").write_text("LIMIT = 10\n")
    commit_all(fixer, "Raise the limit")
    (target / "quota.py").write_text("LIMIT = 7\n")
    commit_all(target, "Mine")
    letter = deliver_patches(alpha, beta, evidence.from_patches("HEAD~1..", fixer))
    monkeypatch.chdir(target)
    code, out, err = cli("--as", "beta", "apply", letter)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "patch does not apply" in err and "show-current-patch" not in err and "hint" not in err
    assert git(target, "status", "--porcelain") == "" and git(target, "log", "-1", "--format=%s") == "Mine\n"
    assert git(target, "worktree", "list", "--porcelain").count("worktree ") == 1


# --- save/apply hand out only what was verified -------------------------------------------


def _edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert data.count(old) == 1
    with open(path, "r+b") as fh:  # the same inode: every hard link of it sees the change
        fh.write(data.replace(old, new))


def test_a_filed_letter_edited_in_place_is_refused_by_save_and_apply(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path, cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    log = attach.Attachment("run.log", "text/x-log", b"ERROR boom\n")
    fixer = make_repo(tmp_path / "fixer")
    (fixer / "quota.py").write_text("LIMIT = 10\n")
    commit_all(fixer, "Raise the limit")
    letter = deliver_patches(alpha, beta, (log, *evidence.from_patches("HEAD~1..", fixer)))
    filed = beta.spool.read.path("unread", letter)
    encoded = b"RVJST1IgYm9vbQo="  # base64 of the log
    _edit_in_place(filed, encoded, b"RVJST1IgYmFuZwo=")  # "ERROR bang"
    monkeypatch.chdir(tmp_path)
    for command in (("save", letter, "--dir", str(tmp_path)), ("apply", letter)):
        code, out, err = cli("--as", "beta", *command)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert f"letter {letter}: its file changed after it was filed" in err
    assert not (tmp_path / "run.log").exists()
    code, out, _ = cli("--as", "beta", "show", letter)
    assert "its file changed after it was filed" in out


def test_the_sender_editing_its_sent_copy_changes_nothing_the_reader_filed(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path
) -> None:
    log = attach.Attachment("run.log", "text/x-log", b"ERROR boom\n")
    letter = deliver_patches(alpha, beta, (log,))
    [sent] = alpha.sent()
    _edit_in_place(alpha.spool.read.path("sent", sent.id), b"RVJST1IgYm9vbQo=", b"RVJST1IgYmFuZwo=")
    [saved] = beta.save(letter, tmp_path)
    assert saved.read_bytes() == b"ERROR boom\n"
    with pytest.raises(BadInput, match="its file changed after it was filed"):
        alpha.save(sent.id, tmp_path / "mine")


_PART = st.sampled_from(["..", ".", "a", "b", "logs", ""])


@settings(
    max_examples=examples(200), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(
    link=st.lists(st.sampled_from(["a", "b", "logs"]), min_size=1, max_size=3).map("/".join),
    target=st.lists(_PART, min_size=1, max_size=6).map("/".join).filter(lambda t: t and not t.startswith("/")),
)
def test_property_a_relative_symlink_leaves_exactly_when_the_file_system_says_so(
    tmp_path: Path, link: str, target: str
) -> None:
    """The check a letter's symlinks meet agrees with the kernel's own resolution, for any
    relative target: it never lets one out that resolves outside, nor refuses one that stays."""
    scratch = Path(tempfile.mkdtemp(dir=tmp_path))
    (scratch / link).parent.mkdir(parents=True, exist_ok=True)
    (scratch / link).symlink_to(target)
    real = os.path.realpath(scratch / link)
    top = os.path.realpath(scratch)
    inside = real == top or real.startswith(top + os.sep)
    assert evidence._leaves(link, target, scratch, scratch) == (not inside), (link, target, real)
