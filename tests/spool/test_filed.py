"""A sync's report holds the letters it filed by id (issue 11: a sync of 100,000 letters stays
under 100 MB): to a caller ``accepted`` and ``quarantined`` are still lists of letters."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail, SyncReport
from agentmail.model import Letter
from agentmail.spool.filed import Filed
from agentmail.transport.local import BATCH, deliver

from ..conftest import make_signed_letters


def _deliver(alpha: AgentMail, home: Path, n: int, label: str = "filed") -> list[str]:
    letters = make_signed_letters(alpha, "beta", n, label)
    for _mid, raw in letters:
        deliver(home / "postoffice" / "beta", raw)
    return [mid for mid, _raw in letters]


def _live_letters() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Letter))


def test_accepted_reads_like_the_list_of_letters_it_filed(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    sent = _deliver(alpha, home, 3)
    report = beta.sync()
    accepted = report.accepted
    assert isinstance(accepted, Filed) and len(accepted) == 3 and accepted
    assert [x.message_id for x in accepted] == sent  # iteration, in filing order
    assert accepted[0].message_id == sent[0] and accepted[-1].message_id == sent[2]
    assert [x.message_id for x in accepted[1:]] == sent[1:]
    assert accepted == beta.inbox(sync=False) == list(accepted)  # == with a list of the same letters
    assert accepted != beta.inbox(sync=False)[:2] and accepted != []
    assert accepted.ids == [x.id for x in beta.inbox(sync=False)]
    assert accepted.ids_since(2) == accepted.ids[2:]
    assert accepted[1].state == "unread" and accepted[1].depth == 0 and accepted[1].sender == "alpha"
    assert report.quarantined == [] and not report.quarantined and len(report.quarantined) == 0
    assert report.to_json()["accepted"] == 3
    with pytest.raises(IndexError):
        accepted[3]
    assert repr(accepted) == f"Filed({accepted.ids!r})"


def test_a_letter_read_later_shows_where_it_is_now(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    _deliver(alpha, home, 2)
    report = beta.sync()
    beta.done(report.accepted[0].id)
    assert [x.state for x in report.accepted] == ["read", "unread"]


def test_a_quarantined_letter_reads_with_its_reason(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    ((_mid, raw),) = make_signed_letters(alpha, "beta", 1, "tampered")
    deliver(home / "postoffice" / "beta", raw.replace(b"letter 0 of 1", b"letter 0 of 9"))
    (bad,) = beta.sync().quarantined
    assert bad.state == "quarantine" and bad.reason == "unauthenticated" and "body" in (bad.detail or "")


def test_a_report_made_by_hand_keeps_the_letters_it_is_given() -> None:
    letter = Letter("<m@x>", "alpha", "a@x", "beta", "b@x", "note", "thr-1", "s", "b", "d")
    report = SyncReport(accepted=[letter])  # type: ignore[arg-type]  # a list, as before issue 11
    assert isinstance(report.accepted, Filed) and report.accepted == [letter] and report.accepted[0] is letter
    assert SyncReport().accepted == [] and SyncReport().to_json()["accepted"] == 0
    assert Filed([letter]) == Filed([letter]) and Filed([letter]) != "not a list"


def test_a_sync_keeps_no_letter_alive_however_many_it_files(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    count = BATCH + 20  # more than one batch
    _deliver(alpha, home, count)
    before = _live_letters()
    report = beta.sync()
    assert len(report.accepted) == count
    # Before issue 11 the report held every Letter it filed: ``count`` more objects alive here.
    assert _live_letters() - before < 5
    first = report.accepted[0]  # read on demand, one at a time
    assert _live_letters() - before < 6 and first.id == report.accepted.ids[0]


def test_the_ids_of_a_big_sync_take_26_bytes_each_and_keep_their_order(tmp_path: Path) -> None:
    import tracemalloc

    from agentmail.model import new_ulid
    from agentmail.spool import Spool

    spool = Spool(tmp_path / "spool" / "beta")
    count = 20_000
    tracemalloc.start()
    try:
        filed = Filed(spool=spool.read)
        before = tracemalloc.get_traced_memory()[0]
        for n in range(count):  # as a sync files them: each letter gone once filed, its id kept
            filed.append(Letter.from_json({"id": new_ulid(), "message_id": f"<{n}@x>"}))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 32 * count  # a str each in a list: ~83 bytes an id
    ids = filed.ids
    assert len(filed) == len(ids) == len(set(ids)) == count and ids == sorted(ids)  # ULIDs: in filing order
    assert filed.ids_since(count - 2) == ids[-2:]
    odd = Letter.from_json({"id": "not-a-ulid", "message_id": "<odd@x>"})
    filed.append(odd)  # an id of another shape: the rest as a list, in the same order
    assert filed.ids[-2:] == [ids[-1], "not-a-ulid"] and len(filed) == count + 1 and filed.ids[:-1] == ids
    with pytest.raises(IndexError):
        Filed(spool=spool.read)[0]
