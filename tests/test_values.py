"""One letter, one shape: the typed values the spool, the guards and the views pass around
keep the documented ``--json`` shapes (field names are a public contract)."""

from __future__ import annotations

from agentmail.client import AgentMail
from agentmail.model import Letter, ThreadStatus

STATUS_FIELDS = {
    "delivery",
    "delivery_detail",
    "thread",
    "subject",
    "state",
    "last_type",
    "whose_move",
    "letters",
    "with",
    "last_id",
    "undeliverable",
}


def test_depth_is_a_field_the_spool_sets_and_json_carries(alpha: AgentMail, beta: AgentMail) -> None:
    sent = alpha.send("beta", "Quota", "Why 500s on /quota? Please say.", type="question")
    (got,) = beta.inbox()
    answer = beta.reply(got, "Because of the plan field.", type="question")
    assert answer is not None and (sent.depth, got.depth, answer.depth) == (0, 0, 1)
    assert "depth" not in answer.extra and answer.to_json()["depth"] == 1
    assert Letter.from_json(answer.to_json()) == answer  # the record reads back as the same letter
    assert alpha.show(sent.id).depth == 0 and alpha.inbox()[0].depth == 1


def test_a_quarantined_letter_has_a_reason_and_no_depth_in_json() -> None:
    letter = Letter.from_json({"id": "01q", "state": "quarantine", "reason": "malformed", "detail": "bad", "from": ""})
    data = letter.to_json()
    assert "depth" not in data and (data["reason"], data["detail"]) == ("malformed", "bad")
    assert "reason" not in Letter.from_json({"id": "01r", "state": "read"}).to_json()


def test_status_rows_are_typed_and_keep_the_json_row(alpha: AgentMail, beta: AgentMail) -> None:
    sent = alpha.send("beta", "Quota", "Why 500s on /quota? Please say.", type="question")
    (row,) = alpha.status()
    assert isinstance(row, ThreadStatus) and set(row.to_json()) == STATUS_FIELDS
    assert (row.thread, row.whose_move, row.with_, row.delivery, row.last_id) == (
        sent.thread,
        "beta",
        "beta",
        "sent",
        sent.id,
    )
    assert row["with"] == "beta" and row["thread"] == sent.thread  # the dict a caller indexed before
