"""Fan-out on the live bus (issue 13): one letter to two platforms (of two domains) crosses
Postfix/Dovecot once per recipient, each verifies it, both replies land in one thread, and
``status`` says per recipient whose move it is. A new agent starts at the platform's position."""

from __future__ import annotations

from email import message_from_bytes

import pytest
from conftest import LiveBus, opener, receive

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity


@pytest.fixture(scope="module")
def writer(bus: LiveBus) -> AgentMail:
    """The sender's platform in a home of its own: the session's sender has used its hourly
    new-thread quota (20) on the other checks by now."""
    registry, home = bus.variant("fanout")
    return bus.client(bus.cfg.sender, home=home, registry=registry)


def test_a_fan_out_letter_reaches_two_platforms_and_both_replies_land_in_one_thread(
    bus: LiveBus, writer: AgentMail, receiver: AgentMail, partner: AgentMail, token: str
) -> None:
    sender = writer
    to = f"{receiver.me.platform},{partner.me.platform}"
    sent = sender.send(to, f"Runflow 3.0 drops /v1 {token}", opener(sender.me.platform, to, token), type="fix-notice")
    assert sent.state == "sent", f"not accepted: {sent.extra}"
    assert not sent.extra.get("refused")
    (at_receiver,) = receive(receiver, sent.thread)
    (at_partner,) = receive(partner, sent.thread)
    for am, got in ((receiver, at_receiver), (partner, at_partner)):
        assert (got.message_id, got.sender, got.thread) == (sent.message_id, sender.me.platform, sent.thread)
        assert got.recipients == sent.recipients and len(got.recipients) == 2
        msg = message_from_bytes(am.raw(got.id))
        mine = f"{am.me.platform}+{sent.thread}@{am.platform.domain}"
        assert mine in str(msg["To"]).lower()  # each recipient's thread address, in the one signed To
        # Dovecot's LMTP writes Delivered-To only when Postfix hands it one recipient per
        # transaction; when it is there, it is this mailbox's thread address.
        delivered = [str(v).strip().lower() for v in msg.get_all("Delivered-To") or []]
        assert delivered in ([], [mine]), delivered
    assert receiver.reply(at_receiver, f"Verified on {token}.", type="verify-result") is not None
    assert partner.reply(at_partner, f"Still 404 on /v1/jobs ({token}).", type="verify-result") is not None
    answers = receive(sender, sent.thread, count=2)
    assert sorted(x.sender for x in answers) == sorted([receiver.me.platform, partner.me.platform])
    assert all(x.in_reply_to == sent.message_id for x in answers)
    assert [x.type for x in sender.thread(sent.thread, sync=False)] == ["fix-notice", "verify-result", "verify-result"]
    (row,) = [r for r in sender.status(sync=False) if r.thread == sent.thread]
    assert sorted(r["with"] for r in row.recipients) == sorted([receiver.me.platform, partner.me.platform])
    assert {r["whose_move"] for r in row.recipients} == {"me"}  # each verify-result is answered by the sender


def test_a_new_agent_starts_at_the_platforms_position(
    bus: LiveBus, writer: AgentMail, receiver: AgentMail, token: str
) -> None:
    sender = writer
    old = sender.send(receiver.me.platform, f"Before the newcomer {token}", opener(sender.me.platform, "x", token))
    receive(receiver, old.thread)  # the platform's mailbox has read it
    with AgentMail(bus.registry, Identity(receiver.me.platform, "newcomer" + token), bus.home) as newcomer:
        assert old.thread not in {x.thread for x in newcomer.inbox()}  # not the history
        fresh = sender.send(receiver.me.platform, f"After {token}", opener(sender.me.platform, "x", token))
        (got,) = receive(newcomer, fresh.thread)
        assert got.message_id == fresh.message_id
