"""What a send, reply or follow-up says besides its letter travels in its return value (issue 27):
the facade returns a ``Sent`` (the letter as it is now), which holds an opener's advice apart from
the warnings, ``notices`` keeps its one list (MCP's ``warnings``), and a reply claimed on this
machine only, or not yet on the server, says so in the same value. The CLI prints what it
printed before."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentmail.client.facade import AgentMail
from agentmail.client.sender import Sent
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.model import Letter
from agentmail.stages import guards
from agentmail.transport import open_transport
from agentmail.transport.base import OnResult, Outgoing, SubmitResult
from agentmail.transport.local import LocalTransport
from agentmail.transport.smtpimap import NO_CONDSTORE

from ..conftest import OPENER, Cli
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import USERS, make_bus


def test_an_openers_advice_is_held_apart_and_the_public_list_and_the_cli_line_are_as_before(
    alpha: AgentMail, cli: Cli
) -> None:
    body = "As discussed, the quota endpoint broke."
    sent = alpha.send("beta", "Quota", body)
    assert isinstance(sent, Sent) and sent.state == "sent" and sent.flushed == 0
    assert sent.advice == tuple(guards.opener_warnings("report", body)) and sent.warnings == ()
    assert not any(a.startswith("opener: ") for a in sent.advice)
    assert sent.notices == [f"opener: {a}" for a in sent.advice]
    assert sent.advice[-1] == "'As discussed' leans on something the reader cannot see"
    code, _out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota again", "-b", body)
    assert err == "agentmail: advice for an opener (sent anyway; said once a day): " + "; ".join(sent.advice) + "\n"
    assert code == 0


def test_a_reply_and_a_follow_up_return_sent_and_a_refused_reply_none(alpha: AgentMail, beta: AgentMail) -> None:
    opened = alpha.send("beta", "Quota", OPENER)
    (got,) = beta.inbox()
    answer = beta.reply(got, "Reproduced; fixing it.", type="ack")
    assert isinstance(answer, Sent) and answer.type == "ack" and answer.advice == answer.warnings == ()
    assert answer.notices == [] and beta.show(answer.id).state == answer.state == "sent"
    assert beta.reply(got, "Again.", type="ack") is None  # one reply per letter
    (back,) = alpha.inbox()
    more = alpha.follow_up(opened.thread, "More evidence: it fails since 2.4.1.", type="report")
    assert isinstance(more, Sent) and more.thread == opened.thread and more.warnings == ()
    assert isinstance(alpha.note("Handover", "The quota fix is on its way."), Sent)
    assert back.type == "ack"


def test_a_claim_held_per_machine_only_and_one_not_made_yet_are_warnings_of_the_reply(home: Path) -> None:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as servers:
        servers.store.condstore = False
        reg = make_bus(home, servers, new_threads_per_hour=0)
        with AgentMail(reg, Identity("alpha"), home) as alpha:
            alpha.send("beta", "Quota", OPENER)
            alpha.send("beta", "Quota 2", OPENER)
        with AgentMail(reg, Identity("beta"), home) as beta:
            first, second = beta.inbox()
            answer = beta.reply(first, "On it.", type="ack")
            assert answer is not None and answer.warnings == (NO_CONDSTORE,) and answer.notices == [NO_CONDSTORE]
        servers.store.condstore = True
        servers.stop_imap()  # the claim cannot be made now: the reply waits, and says why
        with AgentMail(reg, Identity("beta"), home) as beta:  # a new connection: no CONDSTORE seen before
            letter = beta.reply(second.id, "On it.", type="ack")
            assert letter is not None and letter.state == "outbox"
            (warning,) = letter.notices
            assert warning.startswith("the reply is not claimed on the server yet (nothing is listening on 127.0.0.1:")
            assert warning.endswith("): it is claimed when it is submitted")
            servers.start_imap()
            assert [x.status for x in beta.flush()] == ["sent"]  # claimed at submit, then sent


class Closed(LocalTransport):
    """The local post office, closed while ``closed``: every letter is queued (a transient failure)."""

    closed = True

    def submit(self, messages: Sequence[Outgoing], on_result: OnResult | None = None) -> list[SubmitResult]:
        if not self.closed:
            return super().submit(messages, on_result)
        results = [SubmitResult(item.key, "queued", "421 try again later") for item in messages]
        for result in results:
            if on_result is not None:
                on_result(result)
        return results


def _closed(registry: Registry, home: Path, platform: str) -> tuple[AgentMail, Closed]:
    base = open_transport(registry, platform, home)
    assert isinstance(base, LocalTransport)
    transport = Closed(base.postoffice, platform, base.resolve)
    return AgentMail(registry, Identity(platform), home, transport=transport), transport


def test_the_letters_queued_earlier_that_leave_with_a_send_or_a_sync_are_counted_in_what_it_returns(
    registry: Registry, home: Path
) -> None:
    alpha, post = _closed(registry, home, "alpha")
    first = alpha.send("beta", "Quota", OPENER)
    assert first.state == "outbox" and first.flushed == 0
    post.closed = False
    second = alpha.send("beta", "Quota 2", OPENER)  # the queued one rides along: said in the value
    assert second.state == "sent" and second.flushed == 1 and alpha.show(first.id).state == "sent"
    assert alpha.send("beta", "Quota 3", OPENER).flushed == 0  # nothing waited
    post.closed = True
    alpha.send("beta", "Quota 4", OPENER)
    post.closed = False
    assert alpha.sync().flushed == 1 and alpha.sync().flushed == 0
    assert "flushed" not in alpha.sync().to_json()  # the sync's --json shape stays as it was


def test_a_reply_queued_then_sent_with_a_note_is_counted_in_the_notes_value(
    registry: Registry, home: Path, alpha: AgentMail
) -> None:
    alpha.send("beta", "Quota", OPENER)
    beta, post = _closed(registry, home, "beta")
    (got,) = beta.inbox()
    answer = beta.reply(got, "Reproduced.", type="ack")
    assert answer is not None and answer.state == "outbox"
    post.closed = False
    note = beta.note("Handover", "The quota fix is on branch fix-quota.")
    assert note.state == "sent" and note.flushed == 1 and beta.show(answer.id).state == "sent"


def test_a_sent_equals_the_letter_it_is_either_way_round_and_hashes_as_it(alpha: AgentMail) -> None:
    sent = alpha.send("beta", "Quota", "As discussed, the quota endpoint broke.")
    shown = alpha.show(sent.id)
    assert sent.advice and type(shown) is Letter
    assert sent == shown and shown == sent and hash(sent) == hash(shown) and {sent, shown} == {shown}
    assert sent != shown.replace(state="failed") and sent.replace(advice=()) == sent  # told, not the letter
    assert Letter.from_json(sent.to_json()) == sent
