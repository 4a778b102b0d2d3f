"""Issue 37, "a person approves exactly what leaves": the announcement shows every envelope
recipient, every attachment (name, type, size, SHA-256; a patch's commits and paths) and the
whole body; the approval is bound to a digest of the bytes and the envelope, so a letter changed
after it was announced is never released; answers that disagree never release it and ``held``
shows them both."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail import frame
from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import NotFound, Refused
from agentmail.letter.attach import Attachment
from agentmail.people import approval
from agentmail.transport.local import deliver

from ..conftest import OPENER, Cli
from ..helpers.approval_key import operator_key
from .test_approval_by_mail import CAROL, DAVE, answer, approved, mailbox
from .test_writing import client_letter, trusting, vouched

ERIN = "erin@people.test"  # follows gamma: copied on every letter to gamma
PATCH = (
    b"From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n"
    b"From: Agent <alpha@bus.test>\nSubject: [PATCH] quota: default the plan\n\n---\n"
    b"diff --git a/quota/plan.py b/quota/plan.py\n--- a/quota/plan.py\n+++ b/quota/plan.py\n@@ -1 +1 @@\n-x\n+y\n"
    b"diff --git a/.github/workflows/ci.yml b/.github/workflows/ci.yml\n"
)
LOG = Attachment("quota.log", "text/plain", b"KeyError: 'plan'\n" * 3)


@pytest.fixture
def fan_out(home: Path) -> Registry:
    """alpha, beta and gamma; carol and dave approve alpha's letters; erin follows gamma; every
    letter to gamma is held."""
    reg = bus.init(home, home / "registry", ["alpha", "beta", "gamma"], domain="bus.test",
                   endpoints={"new_threads_per_hour": 0})  # fmt: skip
    bus.set_setting(reg.root, "hold", ["gamma@bus.test"])  # before an approver: then it is told to them
    bus.set_setting(reg.root, "trusted_authserv_ids", ["mail.bus.test"])  # carol's answer below is judged on it
    bus.set_person(registry_mod.load(reg.root), "gamma", ERIN, follows=True, writes=False)  # before an approver
    bus.set_person(registry_mod.load(reg.root), "alpha", CAROL, follows=False, writes=False, approves=True)
    approved(home, lambda: bus.set_person(registry_mod.load(reg.root), "alpha", DAVE, follows=False, writes=False,
                                          approves=True))  # fmt: skip
    return trusting(registry_mod.load(reg.root))


def rewrite(am: AgentMail, table: str, column: str, letter_id: str, change: Callable[[Any], Any]) -> None:
    """What only a process with the spool's files could do: change a letter's record behind agentmail."""
    with am.spool.db.write() as tx:
        (value,) = tx.execute(f"SELECT {column} FROM {table} WHERE id=?", (letter_id,)).fetchone()
        tx.execute(f"UPDATE {table} SET {column}=? WHERE id=?", (json.dumps(change(json.loads(value))), letter_id))


def held_fan_out(reg: Registry, home: Path) -> tuple[AgentMail, str]:
    alpha = AgentMail(reg, Identity("alpha"), home)
    patch = Attachment("0001-quota-default-the-plan.patch", "text/x-diff", PATCH)
    letter = alpha.send("beta,gamma", "Quota 500s", OPENER, attachments=(LOG, patch))
    assert letter.state == "held"
    return alpha, letter.id


def test_the_announcement_shows_every_recipient_every_attachment_and_the_whole_body(
    fan_out: Registry, home: Path
) -> None:
    alpha, letter_id = held_fan_out(fan_out, home)
    (news,) = mailbox(home, CAROL)
    text = news.get_content().replace("\r\n", "\n")
    assert "To: beta@bus.test" in text and "To: gamma@bus.test" in text  # both platforms of the fan-out
    flat = " ".join(text.split())  # the envelope's line is wrapped: a bound thread id is long
    assert "Delivered to: beta+thr-" in flat and ", gamma+thr-" in flat
    assert f"Cc: {ERIN}" in text  # the follower it copies
    assert "quota.log (text/plain, 51 bytes)" in text and LOG.sha256 in text
    assert "0001-quota-default-the-plan.patch (text/x-diff" in text
    assert "commit: quota: default the plan" in text
    assert "quota/plan.py" in text and ".github/workflows/ci.yml" in text
    assert frame.body(OPENER) in text  # the whole body, word for word, inside the frame
    digest = alpha.show(letter_id).extra["held_digest"]
    assert f"Digest: {digest}" in text


def test_a_letter_changed_after_its_announcement_is_never_released(fan_out: Registry, home: Path, cli: Cli) -> None:
    alpha, letter_id = held_fan_out(fan_out, home)
    (news,) = mailbox(home, CAROL)
    path = alpha.spool.read.path("held", letter_id)
    path.write_bytes(path.read_bytes().replace(b"KeyError", b"KeyErrer"))  # one byte of what would leave
    answer(home, news, "approve")
    (got,) = alpha.sync().accepted
    assert alpha.spool.read.locate(letter_id) == "held"
    assert "changed after it was announced" in alpha.spool.read.annotations(got.id)["approval_ignored"]
    with pytest.raises(Refused, match="changed after it was announced"):
        alpha.approve(letter_id, key_file=operator_key(home))
    code, out, err = cli("--as", "alpha", "approve", letter_id, "--key-file", operator_key(home))
    assert (code, out) == (4, "") and len(err.strip().splitlines()) == 1 and "changed after" in err
    assert AgentMail(fan_out, Identity("beta"), home).inbox() == []


def test_the_digest_covers_the_envelope_and_every_byte() -> None:
    one = approval.digest_of(b"letter", ("beta@bus.test",))
    assert one == approval.digest_of(b"letter", ("beta@bus.test",))
    assert one != approval.digest_of(b"letter", ("beta@bus.test", "mallory@evil.test"))
    assert one != approval.digest_of(b"letter ", ("beta@bus.test",))
    assert approval.digest_of(b"a", ("b", "c")) != approval.digest_of(b"a", ("b\nc",))


def test_a_letter_whose_envelope_changed_is_never_released(fan_out: Registry, home: Path) -> None:
    """The bytes as announced, but the spool's record now names another recipient: the envelope
    that would leave is not the approved one."""
    alpha, letter_id = held_fan_out(fan_out, home)
    rewrite(alpha, "letters", "meta", letter_id, lambda m: {**m, "recipients": ["beta@bus.test", "mallory@bus.test"]})
    assert alpha.spool.read.letter(letter_id, "held").recipients == ("beta@bus.test", "mallory@bus.test")
    with pytest.raises(Refused, match="changed after it was announced"):
        alpha.approve(letter_id, key_file=operator_key(home))
    assert alpha.spool.read.locate(letter_id) == "held"


def test_answers_that_disagree_never_release_it_and_held_shows_both(fan_out: Registry, home: Path, cli: Cli) -> None:
    alpha, letter_id = held_fan_out(fan_out, home)
    news = mailbox(home, CAROL)[0]
    answer(home, news, "approve", sender=CAROL)
    answer(home, news, "reject: not to gamma", sender=DAVE, n=2)
    alpha.sync()
    alpha.flush()
    assert alpha.spool.read.locate(letter_id) == "held"
    held = alpha.show(letter_id)
    assert "disagree" in held.extra["answers_disagree"]
    assert held.extra["answers"].splitlines() == [f"{CAROL} approve", f"{DAVE} reject: not to gamma"]
    code, out, _ = cli("--as", "alpha", "held")
    assert code == 0 and f"answered: {CAROL} approve" in out and f"answered: {DAVE} reject: not to gamma" in out
    assert "NOT SENT" in out
    answer(home, news, "approve", sender=DAVE, n=3)  # a later approval does not settle it either
    alpha.sync()
    assert alpha.spool.read.locate(letter_id) == "held"
    with pytest.raises(Refused, match="disagree"):
        alpha.approve(letter_id, key_file=operator_key(home))
    assert AgentMail(fan_out, Identity("beta"), home).inbox() == []
    assert alpha.reject(letter_id, "the approvers disagree").state == "failed"  # withdrawing stays possible


def test_two_answers_that_agree_release_it_once(fan_out: Registry, home: Path) -> None:
    alpha, letter_id = held_fan_out(fan_out, home)
    news = mailbox(home, CAROL)[0]
    answer(home, news, "approve", sender=CAROL)
    answer(home, news, "Approved.", sender=DAVE, n=2)
    alpha.sync()
    assert alpha.spool.read.locate(letter_id) == "sent" and alpha.show(letter_id).extra["approved_by"] == CAROL
    assert len(AgentMail(fan_out, Identity("beta"), home).inbox()) == 1


def test_a_letter_held_before_digests_is_never_released_by_an_approval(fan_out: Registry, home: Path) -> None:
    alpha, letter_id = held_fan_out(fan_out, home)
    rewrite(alpha, "notes", "data", letter_id, lambda n: {k: v for k, v in n.items() if k != "held_digest"})
    with pytest.raises(Refused, match="without a digest"):
        alpha.approve(letter_id, key_file=operator_key(home))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600) | st.text(max_size=400).map(str.encode))
def test_the_patch_reader_never_fails_and_shows_only_one_line_values(data: bytes) -> None:
    for subject, paths in approval.commits_of(PATCH[:40] + data) + approval.commits_of(data):
        assert subject and all(c.isprintable() for c in subject)
        assert all(path and all(c.isprintable() for c in path) for path in paths)


def test_the_patch_reader_reads_a_series() -> None:
    two = PATCH + PATCH.replace(b"0123456789", b"9876543210").replace(b"default the plan", b"second")
    assert [s for s, _ in approval.commits_of(two)] == ["quota: default the plan", "quota: second"]
    assert approval.commits_of(PATCH)[0][1] == ("quota/plan.py", ".github/workflows/ci.yml")
    assert approval.commits_of(b"no patch at all\n") == []


def test_a_held_letter_whose_file_is_gone_is_never_released(fan_out: Registry, home: Path) -> None:
    alpha, letter_id = held_fan_out(fan_out, home)
    alpha.spool.read.path("held", letter_id).unlink()
    with pytest.raises(NotFound, match="its file is gone"):
        alpha.approve(letter_id, key_file=operator_key(home))
    assert alpha.spool.read.locate(letter_id) == "held"


def test_other_letters_filed_while_a_letter_is_held_decide_nothing(fan_out: Registry, home: Path) -> None:
    approved(home, lambda: bus.set_person(registry_mod.load(fan_out.root), "alpha", "frank@people.test",
                                          follows=False, writes=True), CAROL, DAVE)  # fmt: skip
    fan_out = trusting(registry_mod.load(fan_out.root))
    alpha, letter_id = held_fan_out(fan_out, home)
    news = mailbox(home, CAROL)[0]
    AgentMail(fan_out, Identity("beta"), home).send("alpha", "Unrelated", OPENER)  # an agent's letter
    answer(home, news, "approve", sender="frank@people.test")  # frank writes for alpha, approves nothing
    deliver(home / "postoffice" / "alpha", vouched(client_letter("alpha@bus.test", "approve", sender="frank@people.test",
                                                                 message_id="<other.1@people.test>")))  # fmt: skip
    alpha.sync()
    (frank,) = [x for x in alpha.spool.read.ids("unread") if "approval_ignored" in alpha.spool.read.annotations(x)]
    weighed = alpha.spool.read.annotations
    calls: list[str] = []
    alpha.spool.write.annotate = lambda letter_id, **fields: calls.append(letter_id)  # type: ignore[method-assign]
    alpha.sync()  # weighed once: the ignored answer is not weighed (nor noted) again
    assert calls == [] and "approval_ignored" in weighed(frank)
    assert alpha.spool.read.locate(letter_id) == "held"
    assert len(alpha.inbox()) == 3  # beta's letter and frank's two: letters for the agent, nothing decided
