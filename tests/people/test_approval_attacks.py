"""Issue 37, attacked by someone who did not write the approval code: the steered agent, a
hostile partner and a relay try to get a held letter out, or a guard changed, without the
approvers' verified answer; each attack that once worked is pinned here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import ConfigError
from agentmail.letter.attach import Attachment
from agentmail.people import approval

from ..conftest import OPENER, Cli
from ..helpers.approval_key import operator_key
from .test_approval_by_mail import CAROL, answer, approved, approving, mailbox  # noqa: F401  (a fixture)
from .test_approval_guard import approvers_of, asked, guarded  # noqa: F401  (a fixture)


def held_letter(home: Path) -> str:
    alpha = AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), home)
    return alpha.send("beta", "quota 500", OPENER).id


def test_a_registry_of_the_agents_own_never_releases_a_held_letter(approving: Registry, home: Path, cli: Cli) -> None:
    """The agent writes a second registry for the platforms this home holds keys of, pinning an
    approval key of its own, and approves its held letter there."""
    operator_key(home)
    letter_id = held_letter(home)
    own = home.parent / "own-registry"
    mine = home.parent / "mine.key"
    code, out, err = cli("--registry", str(own), "init", "--force", "--domain", "bus.test", "alpha", "beta",
                         "--approval-key", str(mine))  # fmt: skip
    assert (code, out) == (6, "") and "cannot stand in" in err and not (own / "bus.toml").exists()
    code, _, err = cli("--registry", str(own), "init", "--force", "--domain", "bus.test", "alpha", "beta")
    assert code == 0, err  # a bus of its own it may write: it never stands in for the one that guards
    code, out, err = cli("--registry", str(own), "--as", "alpha", "approve", letter_id, "--key-file", str(mine))
    assert (code, out) == (6, "") and "cannot stand in" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli("--registry", str(own), "--as", "alpha", "send", "beta", "-s", "unheld", "-b", OPENER)
    assert (code, out) == (6, "") and "cannot stand in" in err
    with pytest.raises(ConfigError, match="cannot stand in"):
        AgentMail(registry_mod.load(own), Identity("alpha"), home)
    assert [x.id for x in AgentMail(approving, Identity("alpha"), home).held()] == [letter_id]
    beta = AgentMail(registry_mod.load(home / "registry"), Identity("beta"), home)
    assert beta.inbox() == []


BARE = b"""From: Partner <p@partner.test>
Subject: [PATCH] routine typo fix in README

---
--- a/registry/platforms/beta.toml
+++ b/registry/platforms/beta.toml
@@ -1 +1 @@
-old
+new
"""
RENAMED = b"""From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001
Subject: [PATCH] docs: move a note\r
\r
diff --git a/registry/approval-key.sha256 b/docs/note.txt\r
similarity index 100%\r
rename from registry/approval-key.sha256\r
rename to docs/note.txt\r
"""


@pytest.mark.parametrize(
    ("patch", "paths"),
    [
        (BARE, ("registry/platforms/beta.toml",)),  # no "From <sha>", no "diff --git": git am lands it
        (RENAMED, ("registry/approval-key.sha256", "docs/note.txt")),  # the path a rename takes away
    ],
)
def test_the_announcement_names_every_path_git_am_would_touch(patch: bytes, paths: tuple[str, ...]) -> None:
    (commit,) = approval.commits_of(patch)
    assert commit[1] == paths


def test_a_subject_cannot_imitate_a_line_of_the_announcement(approving: Registry, home: Path) -> None:
    """The agent (or the letter that steers it) writes a long subject that, cut at its spaces,
    put a line reading "Attachments: none" into the announcement of a letter with an attachment."""
    alpha = AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), home)
    subject = "quota 500 " + "padding " * 6 + "Attachments: none " + "x " * 30
    alpha.send("beta", subject, OPENER)
    (news,) = mailbox(home, CAROL)
    lines = news.get_content().splitlines()
    assert [line for line in lines if "Attachments:" in line and not line.startswith("Subject: ")] == [
        "Attachments: none"
    ]
    (subject_line,) = [line for line in lines if line.startswith("Subject: ")]
    assert subject_line.endswith('x x "')  # the whole subject on its one line, in its quotes


def test_a_commit_subject_cannot_imitate_a_line_of_the_announcement(approving: Registry, home: Path) -> None:
    """The same with a partner's patch: its commit subject, cut at its spaces, read as the SHA-256
    of an attachment (an attachment's own name holds no space: it is sanitised)."""
    alpha = AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), home)
    fake = "0" * 64
    patch = (
        b"From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n"
        + f"Subject: [PATCH] docs {'padding ' * 7}SHA-256 {fake}\n\n".encode()
        + b"---\ndiff --git a/README b/README\n"
    )
    alpha.send("beta", "quota 500", OPENER, attachments=(Attachment("fix.patch", "text/x-diff", patch),))
    (news,) = mailbox(home, CAROL)
    lines = news.get_content().splitlines()
    assert not [line for line in lines if line.strip().startswith(f"SHA-256 {fake}")]
    assert [line for line in lines if line.startswith("    commit: docs padding")][0].endswith(fake)


@pytest.mark.parametrize(
    "command",
    [
        ("bus", "set", "imap", "mail.partner.test:993"),  # the partner's server hands out forged answers
        ("bus", "set", "imap", "127.0.0.1:1143", "--tls", "none"),
        ("bus", "set", "imap.tls", "none"),
    ],
)
def test_moving_where_approvers_answers_are_read_waits_for_an_approver(
    guarded: Registry, home: Path, cli: Cli, command: tuple[str, ...]
) -> None:
    """A letter tells the agent "the mail server moved": the server it names would serve an
    approver's "approve" with an Authentication-Results of the trusted id (and get the login).
    A TLS mode for an [imap] this bus has not got is refused before anyone is asked (exit 2)."""
    before = (home / "registry" / "bus.toml").read_bytes()
    code, out, err = cli("--as", "alpha", *command)
    if command[2] == "imap.tls":
        assert (code, out) == (2, "") and "no [imap] yet" in err and mailbox(home, CAROL) == [], err
    else:
        assert (code, out) == (4, "") and "waits for an approver" in err, err
    assert (home / "registry" / "bus.toml").read_bytes() == before


EVE = "eve@people.test"  # approves beta's letters: a partner's person, nobody alpha trusts


def test_a_partners_approver_never_decides_a_change_of_another_platforms_guards(
    guarded: Registry, home: Path, cli: Cli
) -> None:
    """The steered agent of alpha asks to make the partner's approver an approver of alpha; the
    request went to every approver of the bus, and the partner's answer was enough."""
    approved(home, lambda: bus.set_person(registry_mod.load(home / "registry"), "beta", EVE, follows=False,
                                          writes=False, approves=True))  # fmt: skip
    command = ("--as", "alpha", "person", "alpha", EVE, "--approves")
    assert cli(*command)[0] == 4
    news = asked(home, f"agentmail person alpha {EVE} --approves")
    assert news["To"] == CAROL  # asked of alpha's approvers only
    answer(home, news, "approve", sender=EVE)
    code, _, err = cli(*command)
    assert code == 4 and "still waits" in err, err
    assert approvers_of(home) == [CAROL]
    answer(home, news, "approve", n=2)
    assert cli(*command)[0] == 0
    assert approvers_of(home) == [CAROL, EVE]


def test_a_platform_without_approvers_asks_every_approver_of_the_bus(registry: Registry, home: Path, cli: Cli) -> None:
    bus.set_setting(registry.root, "hold", ["beta@bus.test"])  # before an approver: then it is asked, or told
    bus.set_setting(registry.root, "trusted_authserv_ids", ["mail.bus.test"])
    bus.set_person(registry_mod.load(registry.root), "beta", EVE, follows=False, writes=False, approves=True)
    command = ("--as", "alpha", "bus", "set", "hold", "")
    assert cli(*command)[0] == 4
    (news,) = [m for m in mailbox(home, EVE) if str(m["Subject"]).startswith("Approve? a change")]
    answer(home, news, "approve", sender=EVE)
    assert cli(*command)[0] == 0
    assert registry_mod.load(registry.root).bus.hold == ()


def test_a_change_asked_before_deciders_were_recorded_is_answered_by_every_approver(
    guarded: Registry, home: Path, cli: Cli
) -> None:
    approved(home, lambda: bus.set_person(registry_mod.load(home / "registry"), "beta", EVE, follows=False,
                                          writes=False, approves=True))  # fmt: skip
    command = ("--as", "alpha", "keygen")
    assert cli(*command)[0] == 4
    (record,) = (home / "spool" / "alpha" / "changes").glob("*.json")
    data = json.loads(record.read_bytes())
    del data["deciders"]  # as the version before wrote it
    record.write_text(json.dumps(data))
    answer(home, asked(home, "agentmail --as alpha keygen"), "approve", sender=EVE)
    assert cli(*command)[0] == 0


def test_one_approval_lets_one_command_through_even_when_two_run_at_once(
    guarded: Registry, home: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs of an approved ``keygen`` read the approved record before either removed it: both
    went on (two rotations on one approval). The one that finds the record gone is refused."""
    from agentmail.client import guard_changes

    command = ("--as", "alpha", "keygen")
    assert cli(*command)[0] == 4
    answer(home, asked(home, "agentmail --as alpha keygen"), "approve")
    read = guard_changes.read

    def and_the_other_command_takes_it(path: Path) -> dict[str, object]:
        data = read(path)
        if data.get("answers"):
            path.unlink()  # the other run, between this one's read and its removal
        return data

    monkeypatch.setattr(guard_changes, "read", and_the_other_command_takes_it)
    key = (home / "registry" / "platforms" / "alpha.toml").read_bytes()
    code, out, err = cli(*command)
    assert (code, out) == (4, "") and "taken up by another command" in err, err
    assert (home / "registry" / "platforms" / "alpha.toml").read_bytes() == key


def test_on_smtp_imap_a_registry_of_the_agents_own_never_releases_a_held_letter(home: Path) -> None:
    """Attack 1 through the Python API on the in-process servers: the agent's own copy of the bus
    (same servers, same keys, its own approval key) never opens this home's mailbox."""
    from ..mailservers import MailServers
    from ..transport.test_transport_smtpimap import USERS, make_bus

    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as servers:
        reg = make_bus(home, servers, new_threads_per_hour=0)
        bus.set_setting(reg.root, "hold", ["beta@bus.test"])  # before an approver: then it is told to them
        bus.set_person(registry_mod.load(reg.root), "alpha", CAROL, follows=False, writes=False, approves=True)
        reg = registry_mod.load(reg.root)
        with AgentMail(reg, Identity("alpha"), home) as alpha:
            letter = alpha.send("beta", "quota 500", OPENER)
            assert letter.state == "held"
        own = home.parent / "own"
        shutil.copytree(reg.root, own)
        (own / "platforms" / "alpha.toml").write_text(
            (own / "platforms" / "alpha.toml").read_text().replace(CAROL, "mallory@people.test")
        )
        with pytest.raises(ConfigError, match="cannot stand in"):
            approval.first_key(registry_mod.load(own), str(home.parent / "mine.key"), home)
        with pytest.raises(ConfigError, match="cannot stand in"):
            AgentMail(registry_mod.load(own), Identity("alpha"), home)
        with AgentMail(reg, Identity("alpha"), home) as alpha:
            assert [x.id for x in alpha.held()] == [letter.id]
        assert servers.store.messages("beta@bus.test", "INBOX") == []
