"""The pure guards: credential and path-only bodies, reply refusals, opener advice."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.model import Letter
from agentmail.stages import guards

from ..depth import examples


@pytest.mark.parametrize(
    "body",
    [
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE...",
        "key id AKIAABCDEFGHIJKLMNOP leaked",
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789AB",
        "DATABASE_PASSWORD=s3cr3t-value",
        "export API_KEY='abcdef123456'",
        "login with password: hunter2hunter2",
        "sk-proj-abcdefghijklmnopqrstuvwx",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ],
)
def test_credential_looking_bodies_are_refused(body: str) -> None:
    assert "looks like it contains" in (guards.body_refusal(body) or "")


@pytest.mark.parametrize(
    "body", ["/var/log/app.log", "~/notes/report.md", "./out/trace.txt", "report.md", "@report.md"]
)
def test_path_only_bodies_are_refused(body: str) -> None:
    assert "only a path" in (guards.body_refusal(body) or "")


@pytest.mark.parametrize(
    "body",
    [
        "The password reset endpoint returns 500.",
        "See the attached output:\n/var/log/app.log: line 3: KeyError",
        "Tokens expire after 3600 s instead of 7200 s.",
    ],
)
def test_ordinary_bodies_pass(body: str) -> None:
    assert guards.body_refusal(body) is None


def _reply(parent: dict[str, str], answered_by: str | None = None, depth: int = 1, **kw: object) -> str | None:
    """The guard on a parent given as its ``--json`` record (the guards read a Letter)."""
    return guards.refusal(
        guards.Outbound(
            "question", "A body.", "beta", parent=Letter.from_json(parent), answered_by=answered_by, depth=depth, **kw
        )
    )  # type: ignore[arg-type]


def test_reply_refusals_in_order() -> None:
    base = {"id": "01x", "state": "read", "type": "report", "thread": "thr-abcdef", "from": "alpha"}
    assert _reply(base) is None
    assert "quarantined" in (_reply({**base, "state": "quarantine", "reason": "unauthenticated"}) or "")
    assert "one you sent" in (_reply({**base, "state": "sent"}) or "")
    assert "never answered" in (_reply({**base, "type": "close"}) or "")
    assert "never answered" in (_reply({**base, "type": "note"}) or "")
    assert "already answered (by beta@bob, letter 01y)" in (_reply(base, "beta@bob 01y") or "")
    assert "needs a human" in (_reply(base, depth=20) or "")
    assert _reply(base, depth=19) is None


def test_a_follow_up_continues_only_after_the_platforms_own_last_letter() -> None:
    mine = {"id": "01m", "state": "sent", "type": "ack", "thread": "thr-abcdef", "from": "beta"}
    theirs = {**mine, "id": "01t", "state": "read", "from": "alpha"}
    assert _reply(mine, follow_up=True) is None  # e.g. the fix-notice after my own ack
    assert "ends with alpha's ack" in (_reply(theirs, follow_up=True) or "")
    assert "answer it with reply" in (_reply({**theirs, "type": "report"}, follow_up=True) or "")
    assert "is closed" in (_reply({**mine, "type": "close"}, follow_up=True) or "")
    assert "is closed" in (_reply({**theirs, "type": "close"}, follow_up=True) or "")
    assert "needs a human" in (_reply(mine, depth=20, follow_up=True) or "")
    assert "already answered (by beta@alice" in (_reply(mine, "beta@alice 01z", follow_up=True) or "")


def test_the_body_guard_is_part_of_the_one_guard_and_force_only_lifts_it() -> None:
    base = {"id": "01x", "state": "read", "type": "report", "thread": "thr-abcdef", "from": "alpha"}
    secret = "DATABASE_PASSWORD=s3cr3t-value"
    assert "looks like it contains" in (guards.refusal(guards.Outbound("report", secret, "beta")) or "")
    assert guards.refusal(guards.Outbound("report", secret, "beta", force=True)) is None
    assert "never answered" in (
        guards.refusal(
            guards.Outbound("question", "ok", "beta", parent=Letter.from_json({**base, "type": "ack"}), force=True)
        )
        or ""
    )


def test_opener_advice_is_exempt_for_ack_and_close() -> None:
    assert guards.opener_warnings("ack", "ok") == []
    assert guards.opener_warnings("close", "done") == []
    assert len(guards.opener_warnings("report", "broken")) >= 6


# --- the literal prefilter: the same answers as searching every pattern --------------------

# Fragments that come near every pattern and its literals, in odd cases, and Unicode that re's
# case folding matches to ASCII letters (the Kelvin sign is a k, the long s an s).
_FRAGMENTS = st.sampled_from(
    [
        "password", "PassWord", "PA\u017fSWORD", "passwd", "pwd", "PWD", "=", ":", " = ", ": '", "secret",
        "API_KEY", "export ", "TOKEN", "AKIA", "ABCDEFGHIJKLMNOP", "ghp_", "gh", "xoxb-", "sk-", "sk-live_",
        "eyJ", "abcdefghij", ".", "-----BEGIN ", "RSA ", "PRIVATE KEY-----", "\n", " ", "as discussed",
        "AS MENTIONED", "see above", "see my last", "see my previous", "SEE MY", "you know the one",
        "the same bug as before", "my logs", "my terminal", "the issue from earlier", "\u212a", "\u017f",
        "\u0130", "\u00e9", "x", "github_pat_", "AIza", "sk_live_", "glpat-", "npm_", "\"", "'", "://", "@",
        "Authorization: Bearer ", "\uff1d", "\u200b", "pass", "PASSWD", "tokengate", "api-key", "Api_Key",
        "client-secret", "?token=", "&key=", "access_token", "SECRET_", "http://user:", "AUTHORIZATION",
    ]
)  # fmt: skip
_BODIES = st.one_of(
    st.text(max_size=200), st.lists(st.one_of(_FRAGMENTS, st.text(max_size=8)), max_size=30).map("".join)
)


def _searched_credential(body: str) -> str | None:
    """body_refusal's credential check as it was: every pattern searched."""
    body = guards.plain(body)  # lookalikes folded first, as the guard does
    return next((what for pattern, what, _ in guards._CREDENTIALS if re.search(pattern, body)), None)


@settings(max_examples=examples(400), deadline=None)
@given(_BODIES)
def test_the_literal_prefilter_never_changes_a_credential_verdict(body: str) -> None:
    what = _searched_credential(body)
    refusal = guards.body_refusal(body)
    if what is None:
        assert refusal is None or "looks like it contains" not in refusal
    else:
        assert refusal == f"the body looks like it contains {what}; remove it (or pass --force if it is not a secret)"


@settings(max_examples=examples(400), deadline=None)
@given(_BODIES)
def test_the_literal_prefilter_never_changes_a_subject_verdict(subject: str) -> None:
    what = _searched_credential(subject)
    refusal = guards.subject_refusal(subject)
    assert (refusal is None) == (what is None) and (what is None or what in str(refusal))


def test_prose_that_holds_colons_and_pass_is_searched_by_no_credential_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every group of a pattern's literals must be in the body: "Observed:" and "requests pass"
    hold ":" and "pass" but no "password", so neither assignment pattern walks the body."""
    body = "".join(
        f"{i:02d} Observed: the burst limit never releases; new requests pass after 61 s.\n" for i in range(25)
    )
    searched: list[str] = []
    real = re.search

    def search(pattern: str, text: str, *args: object) -> object:
        searched.append(pattern)
        return real(pattern, text, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(re, "search", search)
    assert guards.body_refusal(body) is None
    assert searched == []
    assert guards.body_refusal(body + "db_password: hunter2hunter2\n") is not None and searched


@settings(max_examples=examples(400), deadline=None)
@given(_BODIES)
def test_the_literal_prefilter_never_changes_the_invisible_context_advice(body: str) -> None:
    found = re.search(guards._INVISIBLE, body)
    invisible = [w for w in guards.opener_warnings("report", body) if "leans on something" in w]
    assert invisible == ([] if found is None else [f"'{found.group(0)}' leans on something the reader cannot see"])


def test_a_secret_spelt_with_a_long_s_is_still_refused() -> None:
    # re folds "\u017f" to "s"; str.lower does not: the prefilter must not skip the search
    assert "a password assignment" in (guards.body_refusal("my pa\u017fsword: hunter2hunter2") or "")


def _prefiltered_as_it_was(text: str) -> str | None:
    """credential_in with its pre-check as generators (``_may_match`` for every group)."""
    text = guards.plain(text)
    folded = text.lower() if text.isascii() else None
    for pattern, what, groups in guards._CREDENTIALS:
        if all(guards._may_match(text, folded, needles, fold) for needles, fold in groups) and re.search(pattern, text):
            return what
    return None


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(_BODIES, st.lists(_FRAGMENTS, max_size=30).map("".join).map(str.upper)))
def test_the_pre_check_written_as_loops_gives_the_verdict_of_the_generators(text: str) -> None:
    assert guards.credential_in(text) == _prefiltered_as_it_was(text)
