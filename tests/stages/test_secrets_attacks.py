"""Secrets a hostile letter (or a careless agent) could slip past the credential guard, each
tried on the field it would leave in: the vendors' token forms the guard did not know, a
password written as JSON or in a URL's user part, an Authorization header, a lookalike ``=``
or a zero-width character inside a name, a secret in the ``ref`` or in an attachment's name."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.client.facade import AgentMail
from agentmail.errors import Refused
from agentmail.letter.attach import Attachment
from agentmail.stages import guards

from ..cli.test_mcp import call, session
from ..conftest import OPENER, Cli
from ..depth import examples

# Each as it turns up in a config, a shell history or a log; none was refused before.
SLIPPED = [
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV",
    "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "sk_live_51H8abcdefghijklmnopqrstuvwx",
    "rk_live_51H8abcdefghijklmnopqrstuvwx",
    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789-_abcdefghijkl",
    "glpat-abcdefghijklmnopqrst",
    "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    '{"password": "hunter2hunter2"}',
    '{"api_key": "abcdef123456789"}',
    '  "client_secret": "abcdef123456789",',
    "postgres://admin:hunter2hunter2@db.example.com/prod",
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
    "-H 'Authorization: token ghx_abcdefghijklmnopqrstuvwxyz'",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    "DB_PASSWORD\uff1dhunter2hunter2",  # a fullwidth equals sign
    "DB_PASS\u200bWORD=hunter2hunter2",  # a zero-width space inside the name
]

# Prose near the new forms: none of it is refused.
PROSE = [
    "Fine-grained tokens start with github_pat_ and classic ones with ghp_.",
    "Google keys (AIza...) belong in the X-Goog-Api-Key header.",
    "Stripe's sk_live_ keys must never reach a test.",
    "Authorization: Bearer <token> is what the docs show.",
    "The header is Authorization: Bearer $TOKEN",
    "postgres://admin@db.example.com/prod and https://example.com:8443/x",
    "ssh://git@github.com:22/org/repo.git",
    '{"password": "", "token": null}',
    "-----BEGIN PGP PUBLIC KEY BLOCK-----",
    "a = b\uff1dc",
]

_WORD = st.sampled_from(["the", "deploy", "fails", "with", "500", "since", "v2.4.1", "see:", "(", ")"])


@settings(max_examples=examples(200), deadline=None)
@given(
    secret=st.sampled_from(SLIPPED),
    words=st.lists(_WORD, max_size=8),
    at=st.integers(0, 8),
    field=st.sampled_from(["subject", "body", "ref", "attachment", "attachment-name"]),
)
def test_a_secret_the_guard_did_not_know_is_refused_in_any_field(
    secret: str, words: list[str], at: int, field: str
) -> None:
    at = min(at, len(words))
    text = " ".join([*words[:at], secret, *words[at:]])
    body, subject, ref, attachments = "A body.", "A subject", "", ()
    if field == "subject":
        subject = text
    elif field == "ref":
        ref = text
    elif field == "attachment":
        attachments = (Attachment("notes.txt", "text/plain", text.encode()),)
    elif field == "attachment-name":
        attachments = (Attachment(f"{secret[:60]}.txt", "text/plain", b"plain notes"),)
    else:
        body = text
    out = guards.Outbound("report", body, "alpha", subject=subject, ref=ref, attachments=attachments)
    if field == "attachment-name" and not guards.credential_in(secret[:60]):
        return  # cut to a name's length, this one is no longer a whole secret
    reason = guards.refusal(out)
    assert reason is not None and "looks like it contains" in reason, (field, text)
    assert guards.refusal(out.replace(force=True)) is None  # --force lifts it, as for the body


@pytest.mark.parametrize("text", PROSE)
def test_prose_near_the_new_forms_is_never_refused(text: str) -> None:
    assert guards.credential_in(text) is None
    out = guards.Outbound("report", text, "alpha", subject=text, ref=text[:100])
    assert guards.refusal(out) is None


def test_a_secret_in_the_ref_is_refused_through_the_api(alpha: AgentMail, beta: AgentMail) -> None:
    with pytest.raises(Refused, match="the ref looks like it contains"):
        alpha.send("beta", "Quota fails", OPENER, ref="AKIAABCDEFGHIJKLMNOP")
    assert alpha.sent() == []


def test_a_secret_in_an_attachments_name_is_refused_through_the_api(alpha: AgentMail, beta: AgentMail) -> None:
    named = Attachment("ghp_abcdefghijklmnopqrstuvwxyz0123456789AB.txt", "text/plain", b"notes")
    with pytest.raises(Refused, match="looks like it contains a GitHub token"):
        alpha.send("beta", "Quota fails", OPENER, attachments=(named,))
    assert alpha.sent() == []


def test_a_secret_in_the_ref_is_refused_by_the_cli(cli: Cli, alpha: AgentMail) -> None:
    code, _, err = cli(
        "--as", "alpha", "send", "beta", "-s", "Deploy", "-b", OPENER, "--ref", "sk_live_51H8abcdefghijklmnopqrstuvwx"
    )
    assert code == 4 and "the ref looks like it contains" in err and err.count("\n") == 1


def test_a_json_password_is_refused_by_the_cli(cli: Cli, alpha: AgentMail) -> None:
    code, _, err = cli(
        "--as", "alpha", "send", "beta", "-s", "Deploy", "-b", OPENER + '\n{"password": "hunter2hunter2"}\n'
    )
    assert code == 4 and "the body looks like it contains" in err


def test_a_secret_in_the_ref_is_refused_over_mcp(home: Path, alpha: AgentMail, tmp_path: Path) -> None:
    async def scenario(client: object) -> None:
        failed, why = await call(
            client, "send", to="alpha", subject="Deploy", body=OPENER, ref="AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
        )  # type: ignore[arg-type]
        assert failed and "the ref looks like it contains" in why

    session(home, tmp_path, "--as", "beta")(scenario)  # type: ignore[arg-type]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_a_secret_in_a_utf16_or_utf32_attachment_is_refused(encoding: str) -> None:
    text = "deploy notes\nAWS key AKIAABCDEFGHIJKLMNOP\n"
    attachment = Attachment("notes.txt", "text/plain", text.encode(encoding))
    assert "an AWS access key id" in (guards.attachment_refusal((attachment,)) or "")
    plain = Attachment("notes.txt", "text/plain", "deploy notes, nothing else\n".encode(encoding))
    assert guards.attachment_refusal((plain,)) is None
