"""The approval's letters are written by the one writer of letters for people (issue 27,
``people/for_people.py``): signed by the platform like the digest, short lines for what agentmail
says, the held letter as the agent wrote it (quoted-printable where a line is long), and the
approver's answer still decides it."""

from __future__ import annotations

import email
import email.policy
import types
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import ConfigError
from agentmail.people import approval, for_people
from agentmail.trust import signing
from agentmail.trust.authenticity import pinned_key

from ..conftest import OPENER
from .test_approval_by_mail import CAROL, answer, approving, mailbox  # noqa: F401  (approving: a fixture)


def test_an_announcement_is_signed_keeps_the_letters_long_line_and_its_answer_still_decides(
    approving: Registry,  # noqa: F811
    home: Path,
) -> None:
    alpha = AgentMail(approving, Identity("alpha"), home)
    long_line = "Output: " + " ".join(f"frame{i}" for i in range(40))  # one line of ~300 characters
    letter = alpha.send("beta", "Quota 500s", OPENER + "\n" + long_line + "\n")
    assert letter.state == "held"
    (path,) = (home / "postoffice" / CAROL / "new").iterdir()
    raw = path.read_bytes()
    assert signing.verify(raw, pinned_key(approving.get("alpha"))).ok  # DKIM, as the digest is
    news = email.message_from_bytes(raw, policy=email.policy.default)
    assert news["Content-Transfer-Encoding"] == "quoted-printable" and news["Auto-Submitted"] == "auto-generated"
    text = news.get_content().replace("\r\n", "\n")
    assert "| " + long_line in text.splitlines()  # the held letter as written (framed), never rewrapped
    mine = text.split("\n\n", 1)[0].splitlines()
    assert all(len(line) <= 78 for line in mine)  # agentmail's own lines are short
    assert text.rstrip().splitlines()[-1] == approval.HOW_TO_ANSWER and len(approval.HOW_TO_ANSWER) <= 78
    assert alpha.show(letter.id).extra["announced"] == news["Message-ID"]
    (announced,) = mailbox(home, CAROL)
    answer(home, announced, "approve")
    alpha.sync()
    assert alpha.spool.read.locate(letter.id) == "sent"


def test_an_announcement_the_key_cannot_sign_leaves_the_letter_held_with_why(
    approving: Registry,  # noqa: F811
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A held letter stays held whatever happens to its announcement: a key that cannot sign it
    (here, a key file that reads as no key) is recorded on the letter, and nothing reaches the
    approver unsigned."""
    alpha = AgentMail(approving, Identity("alpha"), home)

    def unreadable(*args: object, **kwargs: object) -> object:
        raise ConfigError("alpha's private key cannot be read")

    monkeypatch.setattr(for_people, "signing", types.SimpleNamespace(sign_as=unreadable))  # letters to people only
    letter = alpha.send("beta", "Quota 500s", OPENER)
    assert letter.state == "held"
    assert alpha.show(letter.id).extra["announce_failed"] == "alpha's private key cannot be read"
    assert not (home / "postoffice" / CAROL / "new").exists() or not list(
        (home / "postoffice" / CAROL / "new").iterdir()
    )
    assert alpha.announce_hold_change(["report"], []) == "alpha's private key cannot be read"
