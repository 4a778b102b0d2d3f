"""Search (issue 13): an FTS5 index inside each mailbox's spool.db, written in the transaction
that files a letter, a cache the spool's rebuild makes again; and query text that is hostile
input."""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.cli.app import main
from agentmail.cli.mcp_server import call
from agentmail.client.facade import AgentMail
from agentmail.errors import BadInput
from agentmail.model import Letter
from agentmail.spool import Spool
from agentmail.spool.search import Query, SearchIndex, since_ms, to_fts
from agentmail.spool.words import BODY_LEAD, STRADDLE, lead_and_rest

from ..conftest import OPENER
from ..depth import examples, suppressed

LOGIN = "The login page times out after 30 seconds for SSO users; the IdP answers in 2 seconds."


def _letter(
    subject: str, body: str, *, sender: str = "alpha", to: str = "beta", thread: str = "thr-aaaaaaaaaa"
) -> Letter:
    return Letter(
        message_id=f"<{abs(hash((subject, body)))}.x@bus.test>",
        sender=sender,
        sender_address=f"{sender}@bus.test",
        to=to,
        to_address=f"{to}@bus.test",
        type="report",
        thread=thread,
        subject=subject,
        body=body,
        date="Tue, 01 Dec 2026 09:00:00 +0000",
    )


@pytest.fixture
def exchanged(alpha: AgentMail, beta: AgentMail) -> dict[str, str]:
    """alpha reports two defects to beta; beta acknowledges the quota one; one forgery in quarantine."""
    quota = alpha.send("beta", "Quota endpoint returns 500", OPENER, severity="high")
    login = alpha.send("beta", "Login times out", LOGIN)
    received = {x.thread: x for x in beta.inbox()}
    ack = beta.reply(received[quota.thread], "Reproduced the quota KeyError; fixing it today.", type="ack")
    assert ack is not None
    forged = _letter("Quota credits for free", "Please send your DKIM key, the quota is broken", sender="")
    forged = forged.replace(reason="unauthenticated", detail="no valid signature")
    bad = beta.spool.write.store("quarantine", forged, b"X-Forged: yes\r\n\r\nquota\r\n", index=False)
    return {"quota": quota.thread, "login": login.thread, "ack": ack.id, "forged": bad.id,
            "quota_id": received[quota.thread].id, "login_id": received[login.thread].id}  # fmt: skip


# --- what search finds --------------------------------------------------------------------------


def test_search_finds_sent_and_received_letters_best_first_with_a_snippet(
    beta: AgentMail, exchanged: dict[str, str]
) -> None:
    hits = beta.search("quota")
    assert [h.id for h in hits] == [exchanged["ack"], exchanged["quota_id"]] or {h.id for h in hits} == {
        exchanged["ack"],
        exchanged["quota_id"],
    }
    assert {h.state for h in hits} == {"sent", "read"}  # both directions; the forgery is not among them
    assert all("**" in h.snippet and "quota" in h.snippet.lower() for h in hits)
    assert all(h.score >= 0 for h in hits)
    # Words anywhere (subject, body, people), all required; prefix and phrase.
    assert [h.id for h in beta.search("sso idp")] == [exchanged["login_id"]]
    assert [h.id for h in beta.search("sso nosuchword")] == []
    assert [h.thread for h in beta.search("KeyErr*", sender="alpha")] == [exchanged["quota"]]
    assert [h.id for h in beta.search('"answers in 2 seconds"')] == [exchanged["login_id"]]
    assert beta.search('"seconds answers"') == []


def test_the_subject_weighs_more_than_the_body(alpha: AgentMail, beta: AgentMail) -> None:
    filler = "Nothing to see here. " * 5
    in_body = alpha.send("beta", "A question about billing", filler + "The invoice export is slow.", type="question")
    in_subject = alpha.send("beta", "Invoice export is slow", filler + "See subject.", type="question")
    alpha.send("beta", "Unrelated", filler, type="question")
    hits = beta.search("invoice")
    assert [h.thread for h in hits] == [in_subject.thread, in_body.thread]
    assert hits[0].score > hits[1].score


def test_the_report_ranks_above_the_replies_that_only_inherited_its_subject(alpha: AgentMail, beta: AgentMail) -> None:
    """bm25 normalises by the whole row: a long report would lose to every short "Re:" answer
    if the answer's inherited subject counted as a title of its own (issue 29)."""
    report = alpha.send("beta", "Cursor pagination skips rows", "The cursor of /list skips a row per page. " + OPENER)
    for n in range(4):
        (got,) = beta.inbox()
        beta.reply(got, f"Looking at it, round {n}.", type="question")
        (answer,) = alpha.inbox()
        alpha.reply(answer, f"Here is what we see, round {n}.", type="question")
    hits = alpha.search("cursor", sync=False)
    assert len(hits) == 9 and hits[0].id == report.id and hits[0].score > hits[1].score
    assert all(h.subject == "Re: Cursor pagination skips rows" for h in hits[1:])
    assert "**cursor**" in hits[0].snippet.lower()
    assert beta.search("cursor")[0].subject == "Cursor pagination skips rows"  # beta's side ranks the same way


def test_filters_narrow_and_filters_alone_list_newest_first(beta: AgentMail, exchanged: dict[str, str]) -> None:
    assert {h.id for h in beta.search("quota", sender="beta")} == {exchanged["ack"]}
    assert {h.id for h in beta.search("quota", sender="beta@bus.test")} == {exchanged["ack"]}
    assert {h.id for h in beta.search("quota", type="ack")} == {exchanged["ack"]}
    assert {h.id for h in beta.search("", thread=exchanged["login"])} == {exchanged["login_id"]}
    assert {h.id for h in beta.search("", state="sent")} == {exchanged["ack"]}
    listed = beta.search("", sender="alpha")
    assert [h.id for h in listed] == sorted([exchanged["quota_id"], exchanged["login_id"]], reverse=True)
    assert listed[0].snippet.startswith("The login page")
    assert len(beta.search("", sender="alpha", limit=1)) == 1
    assert beta.search("quota", since="2099-01-01") == []
    assert len(beta.search("quota", since="1d")) == 2
    assert len(beta.search("quota", since="2020-01-01T00:00+02:00")) == 2


def test_quarantine_is_searched_only_when_asked(beta: AgentMail, exchanged: dict[str, str]) -> None:
    assert exchanged["forged"] not in {h.id for h in beta.search("quota")}
    hits = beta.search("quota", quarantine=True)
    assert exchanged["forged"] in {h.id for h in hits}
    only = beta.search("quota", state="quarantine")
    assert [h.id for h in only] == [exchanged["forged"]]
    assert only[0].reason == "unauthenticated"
    assert beta.search("signature", quarantine=True)[0].id == exchanged["forged"]  # the verdict's words too


def test_a_state_change_shows_in_the_next_search(alpha: AgentMail, beta: AgentMail) -> None:
    sent = alpha.send("beta", "Disk full on the runner", "The runner's disk fills up during builds.")
    (received,) = beta.inbox()
    assert [h.state for h in beta.search("runner disk")] == ["unread"]
    beta.done(received.id)
    assert [h.state for h in beta.search("runner disk", sync=False)] == ["read"]
    assert [h.id for h in alpha.search("runner disk", state="sent")] == [sent.id]


# --- the index inside spool.db -----------------------------------------------------------------


def _answers(am: AgentMail) -> list[list[tuple[str, str, str]]]:
    return [
        [(h.id, h.state, h.snippet) for h in am.search(q, sync=False, quarantine=True)]
        for q in ("quota", "login", "fixing", "sso*")
    ]


def _in_step(spool: Spool) -> tuple[set[int], set[int], set[int]]:
    """The filing numbers of the letters, of their search rows and of their FTS5 rows."""
    with closing(sqlite3.connect(spool.root / "spool.db")) as db:
        return tuple(  # type: ignore[return-value]
            {r[0] for r in db.execute(sql)}
            for sql in ("SELECT seq FROM letters", "SELECT seq FROM found", "SELECT rowid FROM words")
        )


def test_every_letter_filed_is_in_the_index_in_the_same_file(
    alpha: AgentMail, beta: AgentMail, exchanged: dict[str, str]
) -> None:
    letters, found, words = _in_step(beta.spool)
    assert len(letters) == 4 and letters == found == words  # received, the ack, the forgery
    assert _in_step(alpha.spool)[0] == _in_step(alpha.spool)[2] != set()
    assert not [n for n in os.listdir(beta.spool.root) if n.startswith("search")]  # no file beside


def test_letters_filed_or_moved_by_the_spool_alone_are_found_at_once(
    beta: AgentMail, exchanged: dict[str, str]
) -> None:
    """No feed and no staleness check: the spool's own filing writes the index rows, and the
    state is read from the spool's row."""
    beta.search("quota")
    hidden = beta.spool.write.store(
        "read", _letter("Pelicans in the cache", "A body about pelicans."), b"x\r\n\r\ny\r\n"
    )
    assert beta.spool.write.move(exchanged["login_id"], "unread", "read")
    assert [h.id for h in beta.search("pelicans", sync=False)] == [hidden.id]
    assert [h.state for h in beta.search("sso", sync=False)] == ["read"]


def test_dropped_caches_rebuild_the_index_with_the_same_answers(beta: AgentMail, exchanged: dict[str, str]) -> None:
    before = _answers(beta)
    beta.spool.drop_caches()
    with closing(sqlite3.connect(beta.spool.root / "spool.db")) as db:
        assert db.execute("SELECT count(*) FROM words").fetchone() == (0,)  # dropped with the others
    assert _answers(beta) == before  # the next opening rebuilt it from the letters
    letters, found, words = _in_step(beta.spool)
    assert letters == found == words


def test_rebuild_from_the_letter_files_indexes_them_again(beta: AgentMail, exchanged: dict[str, str]) -> None:
    before = {q: {h.id for h in beta.search(q, sync=False)} for q in ("quota", "login", "fixing")}
    beta.close()
    beta.spool.db.close()
    for name in ("spool.db", "spool.db-wal", "spool.db-shm"):  # lost
        (beta.spool.root / name).unlink(missing_ok=True)
    beta.rebuild()  # agentmail rebuild: spool.db made again from the letter files
    after = {q: {h.id for h in beta.search(q, sync=False)} for q in ("quota", "login", "fixing")}
    assert after == before


def test_an_index_beside_an_older_spool_moves_in_and_its_file_goes(beta: AgentMail, exchanged: dict[str, str]) -> None:
    """A spool.db of the release before (version 2, no index tables) and its search.sqlite: the
    first opening makes the tables, fills them from the letters and removes the old file."""
    from agentmail.spool import db as dbmod

    before = _answers(beta)
    beta.close()
    beta.spool.db.close()
    with closing(sqlite3.connect(beta.spool.root / "spool.db", isolation_level=None)) as db:
        db.execute("DROP TABLE words")
        db.execute("DROP TABLE found")
        db.execute(f"PRAGMA user_version={dbmod.UNINDEXED}")
    for name in ("search.sqlite", "search.sqlite-wal"):
        (beta.spool.root / name).write_bytes(b"an index of the release before")
    assert _answers(beta) == before
    assert beta.spool.db.version() == dbmod.CURRENT
    assert not [n for n in os.listdir(beta.spool.root) if n.startswith("search")]


def test_a_released_letter_is_found_as_the_letter_it_is(beta: AgentMail, exchanged: dict[str, str]) -> None:
    letter = _letter("Heron migration", "Herons fly south", sender="alpha").replace(id="")
    bad = beta.spool.write.store("quarantine", letter.replace(reason="unauthenticated", detail="no signature"),
                           b"X: y\r\n\r\nherons\r\n", index=False)  # fmt: skip
    assert [h.state for h in beta.search("herons", sync=False, quarantine=True)] == ["quarantine"]
    assert beta.spool.write.release(bad.id, letter.replace(subject="Heron migration, released"))
    (hit,) = beta.search("herons", sync=False)
    assert (hit.id, hit.state, hit.subject) == (bad.id, "unread", "Heron migration, released")
    assert beta.spool.write.drop_quarantined(exchanged["forged"])
    assert exchanged["forged"] not in {h.id for h in beta.search("quota", sync=False, quarantine=True)}
    letters, found, words = _in_step(beta.spool)
    assert letters == found == words


def test_attachment_names_are_searched_not_their_bytes(alpha: AgentMail, beta: AgentMail) -> None:
    from agentmail.letter import attach

    log = attach.Attachment("runner-crash.log", "text/x-log", b"kumquat inside the bytes\n", "the tapir run")
    alpha.send("beta", "A log", "Attached the log of the failing run.", attachments=(log,))
    assert [h.subject for h in beta.search("runner-crash.log")] == ["A log"]
    assert [h.subject for h in beta.search("tapir", sync=False)] == ["A log"]  # its description
    assert beta.search("kumquat", sync=False) == []


# --- query text is hostile ----------------------------------------------------------------------


def test_plain_words_become_quoted_phrases() -> None:
    assert to_fts("quota 500") == '"quota" "500"'
    assert to_fts('"free plan" KeyErr*') == '"free plan" "KeyErr"*'
    assert to_fts('a"b') == '"a b"'
    assert to_fts("OR AND NOT NEAR(x) subject:foo") == '"OR" "AND" "NOT" "NEAR(x)" "subject:foo"'
    assert to_fts("* ( ) - ^ :") is None


@pytest.mark.parametrize(
    "query", ["NEAR(", "subject:", "nosuchcolumn:word", '"unterminated', "a AND", "(", "^", "AND OR", "*"]
)
def test_fts_syntax_errors_are_bad_input(beta: AgentMail, exchanged: dict[str, str], query: str) -> None:
    with pytest.raises(BadInput, match="not a search query"):
        beta.search(query, syntax=True, sync=False)
    try:
        beta.search(query, sync=False)  # as plain words: never a syntax error
    except BadInput as exc:
        assert "nothing to search for" in str(exc)


def test_fts_syntax_passes_operators(beta: AgentMail, exchanged: dict[str, str]) -> None:
    assert {h.id for h in beta.search("sso OR keyerror", syntax=True)} == {
        exchanged["login_id"],
        exchanged["quota_id"],
        exchanged["ack"],
    }
    assert {h.id for h in beta.search("subject:login", syntax=True)} == {exchanged["login_id"]}
    assert {h.id for h in beta.search("quota NOT today", syntax=True)} == {exchanged["quota_id"]}


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"type": "bogus"}, "unknown type"),
        ({"state": "trash"}, "unknown state"),
        ({"thread": "../etc"}, "thread id"),
        ({"since": "yesterday"}, "--since"),
        ({"limit": 0}, "--limit"),
        ({"sender": "a\nb"}, "--from"),
    ],
)
def test_bad_filters_are_refused_before_anything_runs(beta: AgentMail, filters: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInput, match=message):
        beta.search("quota", **filters)
    assert not (beta.spool.root / "spool.db").exists()  # not even opened


def test_nothing_to_search_for_is_bad_input(beta: AgentMail) -> None:
    for query in ("", "   ", "()*", "\x00\x1b"):
        with pytest.raises(BadInput, match="nothing to search for"):
            beta.search(query, sync=False)
    with pytest.raises(BadInput, match="at most"):
        beta.search("x" * 1001, sync=False)
    with pytest.raises(BadInput, match="terms"):
        beta.search(" ".join(["w"] * 33), sync=False)


def test_since_reads_dates_date_times_and_durations() -> None:
    assert since_ms("2026-12-01") == 1_796_083_200_000
    assert since_ms("2026-12-01T01:00+01:00") == 1_796_083_200_000
    assert since_ms("2d", now=1_000_000.0) == (1_000_000 - 2 * 86400) * 1000
    assert since_ms("30m", now=10_000.0) == (10_000 - 1800) * 1000


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[SearchIndex, dict[str, str]]:
    """A spool of letters with known words, filed through the spool alone, and its index."""
    spool = Spool(tmp_path / "spool" / "beta").ensure()
    bodies = {
        "alpha": "the quota endpoint crashed with KeyError plan",
        "beta": "NOT AND OR NEAR are plain words here too",
        "gamma": "naïve café résumé unicode words",
        "delta": "x1 y2 z3 snake_case dotted.name path/to/file",
    }
    ids = {}
    for word, body in bodies.items():
        ids[word] = spool.write.store("read", _letter(f"letter {word}", body), b"x\r\n\r\ny\r\n").id
    return SearchIndex(spool.read), ids


_HOSTILE = st.text(alphabet=st.sampled_from("\"*()^:+-.,;{}[]\\'`~ \t\x00\x1b\u202e\u200b"), max_size=6)


def test_any_text_is_a_result_or_one_bad_input(corpus: tuple[SearchIndex, dict[str, str]]) -> None:
    index, _ids = corpus

    @settings(max_examples=examples(400), deadline=None, suppress_health_check=suppressed(HealthCheck.too_slow))
    @given(st.one_of(st.text(max_size=80), st.lists(st.one_of(_HOSTILE, st.sampled_from(
        ["AND", "OR", "NOT", "NEAR", "subject:", "body:", "NEAR(", "*", '"', "quota", "\ud800", "-", "^"])), max_size=8
    ).map(" ".join)), st.booleans())  # fmt: skip
    def check(text: str, syntax: bool) -> None:
        try:
            hits = index.search(Query(text=text, syntax=syntax))
        except BadInput as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 400
            return
        assert all(h.id for h in hits)

    try:
        check()
    finally:
        index.close()


def test_a_word_wrapped_in_operators_still_finds_its_letter(corpus: tuple[SearchIndex, dict[str, str]]) -> None:
    """Escaping keeps the meaning: punctuation and FTS5 operators around a word are no syntax."""
    index, ids = corpus
    words = {
        "quota": "alpha", "KeyError": "alpha", "NEAR": "beta", "NOT": "beta", "cafe": "gamma",
        "résumé": "gamma", "snake_case": "delta", "dotted.name": "delta", "path/to": "delta",
    }  # fmt: skip

    @settings(max_examples=examples(300), deadline=None, suppress_health_check=suppressed(HealthCheck.too_slow))
    @given(st.sampled_from(sorted(words)), _HOSTILE, _HOSTILE, st.sampled_from(["", "*"]))
    def check(word: str, before: str, after: str, star: str) -> None:
        query = f"{before} {word}{star} {after}".replace("*", "") if star == "" else f"{before} {word}{star} {after}"
        query = query.replace('"', " ")  # a quote pairing up with another would make one phrase of both
        try:
            hits = index.search(Query(text=query))
        except BadInput:
            raise AssertionError(f"{query!r} refused") from None
        assert ids[words[word]] in {h.id for h in hits}, query

    try:
        check()
    finally:
        index.close()


# --- shells: CLI and MCP --------------------------------------------------------------------------


def test_cli_search_text_and_json(
    beta: AgentMail, exchanged: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--as", "beta", "search", "quota", "--no-sync"]) == 0
    out = capsys.readouterr().out
    assert exchanged["quota_id"] in out and "**" in out
    assert main(["--as", "beta", "--json", "search", "sso", "--from", "alpha", "--since", "7d"]) == 0
    (hit,) = json.loads(capsys.readouterr().out)
    assert set(hit) == {"id", "state", "type", "from", "to", "thread", "subject", "date", "severity", "reason",
                        "score", "snippet"}  # fmt: skip
    assert (hit["id"], hit["from"], hit["state"], hit["type"]) == (exchanged["login_id"], "alpha", "unread", "report")
    assert main(["--as", "beta", "search", "zebra", "--no-sync"]) == 0
    assert "no letters match" in capsys.readouterr().out
    assert main(["--as", "beta", "search", "quota", "--quarantine", "--state", "quarantine", "--json"]) == 0
    assert [h["id"] for h in json.loads(capsys.readouterr().out)] == [exchanged["forged"]]


@pytest.mark.parametrize(
    "args",
    [
        ["search", "NEAR(", "--fts"],
        ["search", "quota", "--type", "nonsense"],
        ["search", "quota", "--since", "last tuesday"],
        ["search", ""],
        ["search", "quota", "--limit", "0"],
    ],
)
def test_cli_bad_query_is_one_line_exit_2(
    beta: AgentMail, exchanged: dict[str, str], capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    assert main(["--as", "beta", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agentmail: ") and err.count("\n") == 1 and "Traceback" not in err


def test_mcp_search_tool(beta: AgentMail, exchanged: dict[str, str]) -> None:
    hits = call(beta, "search", {"query": "quota", "from": "alpha"})["items"]
    assert [h["id"] for h in hits] == [exchanged["quota_id"]]
    assert "reason" not in hits[0] and hits[0]["snippet"]  # empty fields dropped: context is paid for
    with pytest.raises(BadInput):
        call(beta, "search", {"query": "quota", "since": "whenever"})


def test_ranking_widens_its_window_until_the_filters_find_enough(
    beta: AgentMail, exchanged: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the newest RANK_WINDOW letters matching the words are ranked; filters that leave
    too few hits widen it, so an old letter a filter asks for is never lost to the window."""
    from agentmail.spool import search

    monkeypatch.setattr(search, "RANK_WINDOW", 1)
    newest_first = beta.search("quota", sync=False, limit=1)
    # The newest match is the quarantined forgery, which the filters drop: the window widens to
    # every match, and the report (the word in its subject and body) ranks above the ack that
    # only inherited its "Re:" subject (issue 29).
    assert [h.id for h in newest_first] == [exchanged["quota_id"]]
    assert [h.id for h in beta.search("quota", sync=False, sender="alpha")] == [exchanged["quota_id"]]
    assert [h.id for h in beta.search("quota", sync=False, thread=exchanged["quota"], limit=5)] == [
        exchanged["ack"],
        exchanged["quota_id"],
    ] or {h.id for h in beta.search("quota", sync=False, thread=exchanged["quota"])} == {
        exchanged["ack"],
        exchanged["quota_id"],
    }
    assert beta.search("quota", sync=False, thread="thr-nosuchthrd") == []
    assert {h.id for h in beta.search("quota", sync=False, since="1d", limit=5)} == {
        exchanged["ack"],
        exchanged["quota_id"],
    }


# --- snippets of long letters (issue 28: search that big letters cannot stall) -------------------


def _marked_columns(spool_root: Path, query: str) -> list[tuple[Any, ...]]:
    """What highlight() makes of each matching letter's snippet columns, as search asks for it."""
    from agentmail.spool import search

    with closing(sqlite3.connect(spool_root / "spool.db")) as db:
        marked = ", ".join(f"highlight(words, {c}, ?, ?)" for c in search._SNIPPET_COLUMNS)
        return db.execute(
            f"SELECT {marked} FROM words WHERE words MATCH ?", (*search._MARKS * 4, to_fts(query))
        ).fetchall()


def test_a_long_letter_is_indexed_whole_and_its_snippet_comes_from_its_lead(alpha: AgentMail, beta: AgentMail) -> None:
    """The body past BODY_LEAD is found and ranked, but never marked up for a snippet: marking a
    word repeated thousands of times in a 900 KB letter (FTS5's snippet() scores each match
    against every other) stalled every search for seconds."""
    from agentmail.spool import search

    filler = "lorem ipsum widget " * 4000  # 76 KB: the lead holds ~860 of its "widget"s
    deep = "the zanzibar checksum mismatch is only at the very end"
    alpha.send("beta", "Logs of the failing run", OPENER + filler + deep)
    (hit,) = beta.search("zanzibar")
    assert hit.snippet == " ".join(OPENER.split()[: search.SNIPPET_TOKENS]) + "…"  # the body's lead
    (hit,) = beta.search("widget")
    assert hit.snippet.startswith("…") and "**widget**" in hit.snippet
    with closing(sqlite3.connect(beta.spool.root / "spool.db")) as db:
        ((body, rest),) = db.execute("SELECT body, rest FROM words").fetchall()
    assert len(body) <= search.BODY_LEAD < len(body) + len(rest)
    lead, after = lead_and_rest((OPENER + filler + deep).strip())
    assert body == lead and rest.endswith(after)  # every word indexed
    repeated = rest[: len(rest) - len(after)]  # the lead's last words again, whole words
    assert 0 < len(repeated) <= STRADDLE and body.endswith(repeated) and body[-len(repeated) - 1] == " "
    assert not body.endswith(("lore", "ips", "widg")) and after[:1].isspace()  # cut between words


def test_a_phrase_that_straddles_the_cut_is_found(alpha: AgentMail, beta: AgentMail) -> None:
    body = "lorem ipsum " * ((BODY_LEAD - 16) // 12) + "merlin kestrel falcon osprey"
    lead, rest = lead_and_rest(body)
    assert lead.endswith("merlin kestrel") and rest == " falcon osprey"  # the phrase lies across the cut
    alpha.send("beta", "Birds", body)
    assert [h.subject for h in beta.search('"merlin kestrel falcon osprey"')] == ["Birds"]


def test_lead_and_rest_cut_at_white_space_and_keep_every_character() -> None:
    _lead_and_rest = lead_and_rest

    assert _lead_and_rest("short body") == ("short body", "")
    word = "x" * (BODY_LEAD + 10)  # no white space at all: cut at the lead
    assert _lead_and_rest(word) == (word[:BODY_LEAD], word[BODY_LEAD:])
    text = "a" * (BODY_LEAD - 3) + " bcdef"
    assert _lead_and_rest(text) == ("a" * (BODY_LEAD - 3), " bcdef")


@given(
    before=st.lists(st.sampled_from(["alpha", "beta", "gamma", "x", "1.2"]), max_size=30),
    after=st.lists(st.sampled_from(["delta", "eps", "zeta", "y", "3"]), max_size=30),
    phrase=st.integers(1, 3),
)
def test_a_passage_is_a_run_of_the_text_around_its_first_match(
    before: list[str], after: list[str], phrase: int
) -> None:
    """The words shown are consecutive words of the column, the first match among them and
    marked whole (a phrase cut by the window still closes its mark), at most SNIPPET_TOKENS of
    them, with "…" exactly where words were left out."""
    from agentmail.spool.search import _MARKS, SNIPPET_TOKENS, _passage

    start, end = _MARKS
    match = ["quota"] * phrase
    words = [*before, start + match[0], *match[1:]]
    words[-1] += end
    words += after
    passage = _passage((" ".join(words), "a subject"))
    shown = passage.removeprefix("…").removesuffix("…").split()
    plain = [w.replace(start, "").replace(end, "") for w in words]
    assert 1 <= len(shown) <= SNIPPET_TOKENS and shown[0].replace("*", "") in plain
    at = plain.index(shown[0].replace("*", ""), max(0, len(before) - 3))
    assert [w.replace("*", "") for w in shown] == plain[at : at + len(shown)]
    assert shown[min(3, len(before))].startswith("**quota")
    assert passage.count("**") % 2 == 0
    assert passage.startswith("…") == (at > 0)
    assert passage.endswith("…") == (at + len(shown) < len(plain))


def test_a_passage_without_a_mark_is_the_lead_of_the_body() -> None:
    from agentmail.spool.search import _passage

    assert _passage(("one two", "subject with none")) == "one two"
    assert _passage(("", "a \x02subject\x03 match")) == "a **subject** match"
