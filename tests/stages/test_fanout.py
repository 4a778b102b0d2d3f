"""Fan-out (issue 13): one letter to several platforms (``send beta,gamma``, ``send @group``) —
one Message-ID, one thread, every recipient at its thread address in To; each recipient's
replies in the shared thread; ``status`` per recipient; the guards per recipient; receivers
quarantine recipient tags that disagree; a new agent starts at the platform's position."""

from __future__ import annotations

import json
from email import message_from_bytes
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import recipients
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import Login, read_private_key, write_login
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import BadInput, ConfigError, Refused
from agentmail.letter import wire
from agentmail.model import new_thread_id
from agentmail.trust.authenticity import judge

from ..conftest import OPENER, Cli
from ..depth import examples
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import make_bus, servers  # noqa: F401  (the fixture)

FOLLOWER = "carol@people.test"


@pytest.fixture
def three(home: Path) -> Registry:
    """alpha, beta, gamma on the local post office, and the group ``consumers`` = beta, gamma."""
    bus.init(home, home / "registry", ["alpha", "beta", "gamma"], domain="bus.test",
             endpoints={"new_threads_per_hour": 0})  # fmt: skip
    bus.set_setting(home / "registry", "groups.consumers", ["beta", "gamma"])
    return registry_mod.load(home / "registry")


def mailbox(reg: Registry, home: Path, name: str, agent: str | None = None) -> AgentMail:
    return AgentMail(reg, Identity(name, agent), home)


# --- the recipient list and groups ----------------------------------------------------------

NAMES = st.from_regex(r"[a-z0-9][a-z0-9-]{0,8}", fullmatch=True)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(NAMES, min_size=1, max_size=6), st.lists(st.sampled_from(["", " ", "\t"]), min_size=12, max_size=12))
def test_split_keeps_every_name_once_in_order_whatever_the_spacing(names: list[str], pads: list[str]) -> None:
    text = ",".join(f"{pads[i % 12]}{n}{pads[(i + 5) % 12]}" for i, n in enumerate(names)) + ","
    assert recipients.split(text) == tuple(names)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=40))
def test_split_never_raises_anything_but_bad_input_and_never_returns_an_empty_item(text: str) -> None:
    try:
        items = recipients.split(text)
    except BadInput:
        return
    assert items and all(item and item == item.strip() and "," not in item for item in items)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.sampled_from(["beta", "gamma", "delta", "@consumers", "@all"]), min_size=1, max_size=8))
def test_resolve_expands_groups_drops_duplicates_and_keeps_first_seen_order(items: list[str]) -> None:
    reg = Registry(root=Path("/nonexistent"), bus=registry_mod.parse_bus({"domain": "bus.test", "groups": {
        "consumers": ["beta", "gamma"], "all": ["alpha", "delta", "beta"]}}))  # fmt: skip
    for name in ("alpha", "beta", "gamma", "delta"):
        reg.platforms[name] = registry_mod.Platform(name, f"{name}@bus.test", selector="s", public_key="A" * 44)
    expected: list[str] = []
    for item in items:
        members = {"@consumers": ["beta", "gamma"], "@all": ["delta", "beta"]}.get(item, [item])  # alpha: the sender
        expected += [m for m in members if m not in expected]
    assert recipients.resolve(reg, ",".join(items), sender="alpha") == tuple(expected)
    assert recipients.resolve(reg, items, sender="alpha") == tuple(expected)  # a list: the same


@pytest.mark.parametrize(
    "to,error,words",
    [
        ("", BadInput, "no recipient"),
        (" , ,", BadInput, "no recipient"),
        ("@nobody", BadInput, "no group @nobody"),
        ("@Bad!", BadInput, "not a group name"),
        ("beta,alpha", BadInput, "sending platform itself"),
        ("beta,gmma", BadInput, "did you mean gamma"),  # a typed name: bad input (exit 2), issue 29
        ("alpha", BadInput, "sending platform itself"),  # a letter to itself, issue 29
    ],
)
def test_a_bad_recipient_list_is_refused_in_one_line(three: Registry, to: str, error: type, words: str) -> None:
    with pytest.raises(error, match=words) as caught:
        recipients.resolve(three, to, sender="alpha")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "groups,words",
    [
        ({"Bad": ["beta"]}, "group name"),
        ({"g": []}, "non-empty list"),
        ({"g": "beta"}, "non-empty list"),
        ({"g": ["beta", "beta"]}, "twice"),
        ({"g": ["Beta"]}, "non-empty list of platform names"),
        (["beta"], "must be a table"),
    ],
)
def test_bus_toml_groups_are_validated(groups: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        registry_mod.parse_bus({"domain": "bus.test", "groups": groups})


def test_bus_set_groups_adds_changes_and_removes_a_group(home: Path, cli: Cli) -> None:
    assert cli("init", "--domain", "bus.test", "alpha", "beta", "gamma")[0] == 0
    code, out, _ = cli("--json", "bus", "set", "groups.consumers", "beta,gamma")
    assert code == 0 and json.loads(out) == {"key": "groups.consumers", "value": ["beta", "gamma"]}
    assert registry_mod.load(home / "registry").bus.group("consumers") == ("beta", "gamma")
    assert cli("bus", "set", "groups.consumers", "gamma", "beta", "gamma")[0] == 0
    assert registry_mod.load(home / "registry").bus.group("consumers") == ("gamma", "beta")
    code, _, err = cli("bus", "set", "groups.consumers", "gmma")
    assert code == 6 and "did you mean gamma" in err
    code, _, err = cli("bus", "set", "groups.consumers", "@other")
    assert code == 2 and "a group lists platforms" in err
    assert cli("bus", "set", "groups.consumers", "")[0] == 0
    assert registry_mod.load(home / "registry").bus.groups == ()
    assert "groups" not in (home / "registry" / "bus.toml").read_text()


# --- one letter, one thread, replies from each ----------------------------------------------


def test_a_fan_out_is_one_letter_to_every_recipient_and_both_replies_land_in_one_thread(
    three: Registry, home: Path
) -> None:
    alpha, beta, gamma = (mailbox(three, home, n) for n in ("alpha", "beta", "gamma"))
    sent = alpha.send("@consumers", "Runflow 3.0 drops /v1", OPENER, type="fix-notice")
    assert sent.state == "sent" and sent.recipients == ("beta@bus.test", "gamma@bus.test")
    msg = message_from_bytes(alpha.raw(sent.id))
    unfolded = " ".join(msg["To"].split())  # a bound thread id is long: the To header may be folded
    assert unfolded == f"beta+{sent.thread}@bus.test, gamma+{sent.thread}@bus.test"
    assert len(alpha.sent()) == 1  # one letter, not one per recipient
    (at_beta,), (at_gamma,) = beta.inbox(), gamma.inbox()
    for got in (at_beta, at_gamma):
        assert (got.message_id, got.thread, got.sender) == (sent.message_id, sent.thread, "alpha")
        assert got.recipients == ("beta@bus.test", "gamma@bus.test")
    assert beta.reply(at_beta, "Verified on beta.", type="verify-result") is not None
    assert gamma.reply(at_gamma, "Still broken here: /v1/jobs 404s.", type="verify-result") is not None
    answers = alpha.inbox()
    assert sorted(x.sender for x in answers) == ["beta", "gamma"]
    assert {x.thread for x in answers} == {sent.thread}
    assert all(x.in_reply_to == sent.message_id for x in answers)
    assert [x.type for x in alpha.thread(sent.thread, sync=False)] == ["fix-notice", "verify-result", "verify-result"]
    # the one-reply-per-letter guard is per platform: each recipient answered once, again is refused
    assert beta.reply(at_beta, "Again.", type="verify-result") is None
    assert "already answered" in (beta.why_refused(at_beta) or "")


def test_a_fan_out_counts_as_one_new_thread_against_the_quota(home: Path) -> None:
    bus.init(home, home / "registry", ["alpha", "beta", "gamma"], domain="bus.test",
             endpoints={"new_threads_per_hour": 2})  # fmt: skip
    reg = registry_mod.load(home / "registry")
    alpha = mailbox(reg, home, "alpha")
    alpha.send("beta,gamma", "One", OPENER)
    alpha.send("beta,gamma", "Two", OPENER)
    with pytest.raises(Refused, match="opened 2 threads"):
        alpha.send("beta,gamma", "Three", OPENER)


def test_status_shows_for_each_recipient_whose_move_it_is(three: Registry, home: Path, cli: Cli) -> None:
    alpha, beta, gamma = (mailbox(three, home, n) for n in ("alpha", "beta", "gamma"))
    sent = alpha.send("beta,gamma", "Quota 500s", OPENER)
    (row,) = alpha.status()
    assert (row.whose_move, row.with_) == ("beta,gamma", "beta,gamma")
    assert [(r["with"], r["whose_move"]) for r in row.recipients] == [("beta", "beta"), ("gamma", "gamma")]
    (got,) = beta.inbox()
    beta.reply(got, "Reproduced; fixing.", type="ack")  # beta owes the fix now
    (got,) = gamma.inbox()
    gamma.reply(got, "Which plan?", type="question")  # alpha owes gamma an answer
    (row,) = alpha.status()
    parts = {r["with"]: r for r in row.to_json()["recipients"]}
    assert (parts["beta"]["whose_move"], parts["beta"]["state"], parts["beta"]["last_type"]) == (
        "beta",
        "acknowledged",
        "ack",
    )
    assert (parts["gamma"]["whose_move"], parts["gamma"]["last_type"]) == ("me", "question")
    assert row.whose_move == "me"  # something here is mine to do
    # each recipient sees a two-party thread with alpha, as before
    (at_beta,) = beta.status()
    assert (at_beta.whose_move, at_beta.with_, at_beta.recipients) == ("me", "alpha", ())
    code, out, _ = cli("--json", "--as", "alpha", "status", "--no-sync")
    assert code == 0 and [r["with"] for r in json.loads(out)[0]["recipients"]] == ["beta", "gamma"]
    code, out, _ = cli("--as", "alpha", "status", "--no-sync")
    assert code == 0 and f"{sent.thread}" in out and "with gamma" in out and "with beta" in out


def test_a_follow_up_in_a_fan_out_thread_is_guarded_per_recipient(three: Registry, home: Path) -> None:
    alpha, beta, gamma = (mailbox(three, home, n) for n in ("alpha", "beta", "gamma"))
    sent = alpha.send("beta,gamma", "Quota 500s", OPENER)
    # a follow-up must say to whom: the thread is with two platforms
    with pytest.raises(BadInput, match="is with beta, gamma"):
        alpha.send("delta", "", "More detail.", type="report", thread=sent.thread)
    more = alpha.send("beta", "", "The 500s started at 2026-11-28 10:00 UTC.", type="report", thread=sent.thread)
    assert more.recipients == () and more.to == "beta" and more.in_reply_to == sent.message_id
    # gamma's part still stands at the opener: the claim on it is per recipient
    claimed = alpha.send("gamma", "", "Also at 11:00.", type="report", thread=sent.thread)
    assert claimed.to == "gamma" and claimed.in_reply_to == sent.message_id
    # beta's part now stands at alpha's follow-up: the next one to beta continues after it
    again = alpha.send("beta", "", "And at 12:00.", type="report", thread=sent.thread)
    assert again.in_reply_to == more.message_id
    # gamma acks: a follow-up to gamma after its ack is refused, as in a two-party thread
    gamma.sync()
    (first, _second) = gamma.inbox()
    gamma.reply(first, "Looking.", type="ack")
    with pytest.raises(Refused, match="gamma: thread .* ends with gamma's ack"):
        alpha.send("gamma", "", "Any news?", type="question", thread=sent.thread)
    # two recipients whose parts stand at different letters: one letter cannot answer both
    with pytest.raises((BadInput, Refused)):
        alpha.send("beta,gamma", "", "Both?", type="question", thread=sent.thread)
    assert [x.to for x in beta.inbox()] == ["beta", "beta", "beta"]


def test_a_follow_up_to_every_recipient_is_one_letter_when_their_parts_stand_together(
    three: Registry, home: Path
) -> None:
    alpha, beta, gamma = (mailbox(three, home, n) for n in ("alpha", "beta", "gamma"))
    sent = alpha.send("@consumers", "Quota 500s", OPENER)
    more = alpha.send("@consumers", "", "Logs attached below: 500 at 10:00 UTC.", type="report", thread=sent.thread)
    assert more.recipients == ("beta@bus.test", "gamma@bus.test") and more.in_reply_to == sent.message_id
    assert [x.message_id for x in beta.inbox()] == [sent.message_id, more.message_id]
    assert [x.message_id for x in gamma.inbox()] == [sent.message_id, more.message_id]
    after = alpha.send("gamma", "", "Again.", type="report", thread=sent.thread)
    assert after.in_reply_to == more.message_id and after.recipients == ()


def test_the_depth_cap_holds_in_a_fan_out_thread(three: Registry, home: Path) -> None:
    from agentmail.stages.guards import MAX_DEPTH

    alpha, beta = mailbox(three, home, "alpha"), mailbox(three, home, "beta")
    sent = alpha.send("beta,gamma", "Ping-pong", OPENER, type="question")
    with pytest.raises(Refused, match="needs a human") as caught:
        for _ in range(MAX_DEPTH):
            (got,) = beta.inbox()
            beta.reply(got, "And you?", type="question", raise_refused=True)
            (got,) = alpha.inbox()
            alpha.reply(got, "And you?", type="question", raise_refused=True)
    assert sent.thread in str(caught.value)


def test_hold_applies_when_any_recipient_is_held(three: Registry, home: Path) -> None:
    bus.set_setting(home / "registry", "hold", ["gamma@bus.test"])
    reg = registry_mod.load(home / "registry")
    alpha = mailbox(reg, home, "alpha")
    letter = alpha.send("beta,gamma", "Quota", OPENER)
    assert letter.state == "held" and "gamma@bus.test" in str(letter.extra.get("held_reason"))
    assert mailbox(reg, home, "beta").inbox() == []


def test_followers_of_every_involved_platform_are_copied(three: Registry, home: Path) -> None:
    bus.set_person(three, "gamma", FOLLOWER, follows=True, writes=False)
    bus.set_person(three, "alpha", "dave@people.test", follows=True, writes=False)
    reg = registry_mod.load(home / "registry")
    sent = mailbox(reg, home, "alpha").send("beta,gamma", "Quota", OPENER)
    assert sent.cc == ("dave@people.test", FOLLOWER)
    assert message_from_bytes(mailbox(reg, home, "alpha").raw(sent.id))["Cc"] == f"dave@people.test, {FOLLOWER}"


def test_the_cli_sends_to_a_list_and_to_a_group(three: Registry, home: Path, cli: Cli) -> None:
    code, out, _ = cli("--json", "--as", "alpha", "send", "@consumers", "-s", "Runflow 3.0", "-b", OPENER)
    assert code == 0 and json.loads(out)["recipients"] == ["beta@bus.test", "gamma@bus.test"]
    (got,) = mailbox(three, home, "gamma").inbox()
    code, out, _ = cli("--as", "gamma", "show", got.id)
    assert code == 0 and "(and gamma@bus.test)" in out
    code, _, err = cli("--as", "alpha", "send", "@nobody", "-s", "x", "-b", OPENER)
    assert code == 2 and "no group @nobody" in err and "Traceback" not in err


# --- receivers: the thread addresses of several To ------------------------------------------


def _signed(reg: Registry, home: Path, to_header: str, thread: str, delivered_to: str | None = None) -> bytes:
    """A letter from alpha with the given To header, signed with alpha's key (a sender's own choice)."""
    from agentmail.trust import signing

    me = reg.get("alpha")
    letter = wire.draft_letter(me.address, "", "beta@bus.test", "report", thread, "Quota", "Body.\n",
                               message_id=wire.new_message_id("alpha", "bus.test"))  # fmt: skip
    raw = wire.render(letter).replace(f"To: beta+{thread}@bus.test".encode(), f"To: {to_header}".encode())
    signed = signing.sign(raw, me.dkim_domain, me.selector, read_private_key(home, "alpha"))
    return (f"Delivered-To: {delivered_to}\r\n".encode() if delivered_to else b"") + signed


def test_a_letter_to_several_thread_addresses_of_one_thread_is_accepted(three: Registry, home: Path) -> None:
    thread = new_thread_id()
    raw = _signed(three, home, f"beta+{thread}@bus.test, gamma+{thread}@bus.test", thread,
                  delivered_to=f"gamma+{thread}@bus.test")  # fmt: skip
    verdict = judge(raw, three)
    assert verdict.route == "accept" and verdict.letter is not None
    assert verdict.letter.recipients == ("beta@bus.test", "gamma@bus.test") and verdict.letter.thread == thread


@pytest.mark.parametrize("where", ["extra-to", "delivered-to", "first-to"])
def test_a_recipient_tagged_for_another_thread_is_quarantined_thread_mismatch(
    three: Registry, home: Path, where: str
) -> None:
    thread, other = new_thread_id(), new_thread_id()
    to = {
        "extra-to": f"beta+{thread}@bus.test, gamma+{other}@bus.test",
        "delivered-to": f"beta+{thread}@bus.test, gamma+{thread}@bus.test",
        "first-to": f"beta+{other}@bus.test, gamma+{thread}@bus.test",
    }[where]
    delivered = f"gamma+{other}@bus.test" if where == "delivered-to" else None
    verdict = judge(_signed(three, home, to, thread, delivered_to=delivered), three)
    assert (verdict.route, verdict.reason) == ("quarantine", "thread-mismatch")
    # and it lands in quarantine on the receiving side, nothing reaches the inbox
    gamma = mailbox(three, home, "gamma")
    from agentmail.transport.local import deliver

    deliver(home / "postoffice" / "gamma", _signed(three, home, to, thread, delivered_to=delivered))
    assert gamma.inbox() == [] and [q.reason for q in gamma.quarantined(sync=False)] == ["thread-mismatch"]


def test_an_added_to_header_is_refused_before_any_signature_is_weighed(three: Registry, home: Path) -> None:
    """A second To (over-signing would also break the signature): one To at most (issue 23)."""
    thread = new_thread_id()
    raw = _signed(three, home, f"beta+{thread}@bus.test", thread)
    forged = raw.replace(b"Subject:", f"To: gamma+{thread}@bus.test\r\nSubject:".encode(), 1)
    verdict = judge(forged, three)
    assert (verdict.route, verdict.reason, verdict.detail) == (
        "quarantine",
        "malformed",
        "the letter has 2 To headers; at most one is allowed",
    )


# --- a new agent starts at the platform's position ------------------------------------------


def test_a_new_agent_starts_at_the_platforms_position_and_reads_the_backlog_on_request(
    three: Registry, home: Path, cli: Cli
) -> None:
    alpha, beta = mailbox(three, home, "alpha"), mailbox(three, home, "beta")
    old = [alpha.send("beta", f"Old {i}", OPENER) for i in range(3)]
    assert len(beta.inbox()) == 3  # the platform's mailbox has read them
    newcomer = mailbox(three, home, "beta", "newcomer")
    assert newcomer.inbox() == []  # not the whole history
    fresh = alpha.send("beta", "Fresh", OPENER)
    assert [x.message_id for x in newcomer.inbox()] == [fresh.message_id]  # but everything after
    code, out, _ = cli("--json", "--as", "beta", "--agent", "newcomer", "inbox", "--from-start")
    assert code == 0
    assert sorted(x["message_id"] for x in json.loads(out)) == sorted(x.message_id for x in [*old, fresh])
    code, out, _ = cli("--json", "--as", "beta", "--agent", "newcomer", "inbox", "--from-start")
    assert code == 0 and len(json.loads(out)) == 4  # read again: nothing filed twice


def test_the_first_mailbox_of_a_platform_reads_everything(three: Registry, home: Path) -> None:
    alpha = mailbox(three, home, "alpha")
    alpha.send("beta", "Before anyone read", OPENER)
    assert len(mailbox(three, home, "beta", "first").inbox()) == 1  # no sibling has read: nothing skipped


def test_a_note_to_an_agent_that_has_never_read_is_not_skipped(three: Registry, home: Path) -> None:
    beta = mailbox(three, home, "beta")
    mailbox(three, home, "alpha").send("beta", "History", OPENER)
    beta.inbox()
    beta.note("Handover", "Take over the quota thread; details in the thread.", to_agent="later")
    beta.inbox()  # the platform's mailbox moves past the note (a sibling's: skipped)
    later = mailbox(three, home, "beta", "later")
    assert [n.subject for n in later.notes()] == ["Handover"]
    assert [x.subject for x in later.inbox()] == ["Handover"]  # not the history


# --- smtp+imap: one submission, every RCPT TO; the checkpoint of a new agent ------------------


def _three_on_imap(home: Path, servers: MailServers) -> Registry:  # noqa: F811
    reg = make_bus(home, servers)
    servers.store.add_user("gamma@bus.test", "gamma-pw-0123456789")
    bus.add(home, reg, "gamma")
    write_login(home, "gamma", Login("gamma@bus.test", "gamma-pw-0123456789"))
    return registry_mod.load(home / "registry")


def test_over_smtp_a_fan_out_is_one_submission_with_every_rcpt_to_and_replies_share_the_thread(
    home: Path,
    servers: MailServers,  # noqa: F811
) -> None:
    servers.store.add_user(FOLLOWER, "carol-pw")
    reg = _three_on_imap(home, servers)
    bus.set_person(reg, "gamma", FOLLOWER, follows=True, writes=False)
    reg = registry_mod.load(home / "registry")
    with mailbox(reg, home, "alpha") as alpha, mailbox(reg, home, "beta") as beta, \
            mailbox(reg, home, "gamma") as gamma:  # fmt: skip
        sent = alpha.send("beta,gamma", "Quota 500s", OPENER)
        assert sent.state == "sent"
        (accepted,) = servers.store.accepted
        assert list(accepted.rcpt_tos) == [f"beta+{sent.thread}@bus.test", f"gamma+{sent.thread}@bus.test", FOLLOWER]
        (at_beta,), (at_gamma,) = beta.inbox(), gamma.inbox()
        assert at_beta.message_id == at_gamma.message_id == sent.message_id
        assert beta.reply(at_beta, "Reproduced.", type="ack") is not None
        assert gamma.reply(at_gamma, "Not here.", type="question") is not None
        answers = alpha.inbox()
        assert sorted(x.sender for x in answers) == ["beta", "gamma"] and {x.thread for x in answers} == {sent.thread}
        (row,) = alpha.status(sync=False)
        assert {r["with"]: r["whose_move"] for r in row.recipients} == {"beta": "beta", "gamma": "me"}
    assert [message_from_bytes(m.data)["Message-ID"] for m in servers.store.messages(FOLLOWER)][0] == sent.message_id


def test_over_imap_a_new_agent_starts_at_the_platforms_position(home: Path, servers: MailServers) -> None:  # noqa: F811
    reg = make_bus(home, servers)
    with mailbox(reg, home, "alpha") as alpha, mailbox(reg, home, "beta") as beta:
        old = alpha.send("beta", "Old", OPENER)
        assert len(beta.inbox()) == 1
        with mailbox(reg, home, "beta", "newcomer") as newcomer:
            assert newcomer.inbox() == []
            fresh = alpha.send("beta", "Fresh", OPENER)
            assert [x.message_id for x in newcomer.inbox()] == [fresh.message_id]
            backlog = newcomer.inbox(from_start=True)
            assert sorted(x.message_id for x in backlog) == sorted([old.message_id, fresh.message_id])
