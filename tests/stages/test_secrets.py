"""No secret leaves in any field: the credential guard reads the subject, every body line (an
assignment mid-line too) and attachment text alike, on every surface (API, CLI, MCP)."""

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

# One of each kind the guard knows, written as it turns up in a shell, a config or a URL.
SECRETS = [
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "AKIAABCDEFGHIJKLMNOP",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB",
    "xoxb-1234567890-abcdef",
    "sk-proj-abcdefghijklmnopqrstuvwx",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "export DB_PASSWORD=hunter2",
    "DB_PASSWORD=hunter2",
    "NAME_TOKEN=value123",
    "GITHUB_TOKEN = 'abc123def'",
    "https://api.example.com/v1/items?api_key=abcdef123456",
    "https://example.com/cb?id=7&access_token=abcdef123456",
    "https://example.com/x?token=abcdef123456",
    "db_password=hunter22",
    "password: hunter2hunter2",
]

# Ordinary prose about passwords, tokens and keys: none of it is refused.
PROSE = [
    "The password reset endpoint returns 500.",
    "Tokens expire after 3600 s instead of 7200 s.",
    "the TOKEN: expired after a minute",
    "Set GITHUB_TOKEN=<your token> before running it.",
    "Pass the API key in the X-Api-Key header, not in the URL.",
    "The query string ?page=2&sort=asc is ignored.",
    "Our SECRET_ROTATION job ran at 03:00; see the log.",
    "x = compute(password_length, min=8)",
    "if token == expected: return True",
    "See https://example.com/docs?topic=auth for the flow.",
]

_WORD = st.sampled_from(["the", "quota", "endpoint", "fails", "with", "500", "since", "v2.4.1", "see:", "(", ")"])
_PROSE = st.lists(_WORD, max_size=12)


def _embedded(words: list[str], secret: str, at: int, separator: str) -> str:
    at = min(at, len(words))
    return separator.join([*words[:at], secret, *words[at:]])


@settings(max_examples=examples(300), deadline=None)
@given(
    secret=st.sampled_from(SECRETS),
    words=_PROSE,
    at=st.integers(0, 12),
    field=st.sampled_from(["subject", "body", "body-line", "attachment", "attachment-description"]),
)
def test_a_secret_anywhere_in_any_field_is_refused(secret: str, words: list[str], at: int, field: str) -> None:
    text = _embedded(words, secret, at, "\n" if field == "body-line" else " ")
    body, subject, attachments = "A body.", "A subject", ()
    if field == "subject":
        subject = text
    elif field == "attachment":
        attachments = (Attachment("notes.txt", "text/plain", text.encode()),)
    elif field == "attachment-description":
        attachments = (Attachment("notes.txt", "text/plain", b"plain notes", description=text),)
    else:
        body = text
    out = guards.Outbound("report", body, "alpha", subject=subject, attachments=attachments)
    reason = guards.refusal(out)
    assert reason is not None and "looks like it contains" in reason, (field, text)
    assert guards.refusal(out.replace(force=True)) is None  # --force lifts it, as for the body


@pytest.mark.parametrize("text", PROSE)
def test_ordinary_prose_is_never_refused_in_any_field(text: str) -> None:
    assert guards.credential_in(text) is None
    out = guards.Outbound(
        "report", text, "alpha", subject=text, attachments=(Attachment("a.txt", "text/plain", text.encode(), text),)
    )
    assert guards.refusal(out) is None


def test_the_subject_is_refused_through_the_api(alpha: AgentMail, beta: AgentMail) -> None:
    with pytest.raises(Refused, match="the subject looks like it contains"):
        alpha.send("beta", "deploy with DB_PASSWORD=hunter2", OPENER)
    with pytest.raises(Refused, match="the subject looks like it contains"):
        alpha.note("export API_TOKEN=abcdef123456", "a note to myself")
    assert alpha.sent() == []


def test_a_reply_does_not_echo_a_secret_subject(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "cb?access_token=abcdef123456", OPENER, force=True)  # the sender's own choice
    (letter,) = beta.inbox()
    assert beta.reply(letter, "Seen.", type="ack") is None
    assert "the subject looks like it contains" in (beta.why_refused(letter) or "")


def test_the_subject_and_a_mid_line_assignment_are_refused_by_the_cli(cli: Cli, alpha: AgentMail) -> None:
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "url?api_key=abcdef123456", "-b", OPENER)
    assert code == 4 and "the subject looks like it contains" in err and err.count("\n") == 1
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Deploy", "-b", "run: foo NAME_TOKEN=value123 now")
    assert code == 4 and "the body looks like it contains" in err


def test_the_subject_is_refused_over_mcp(home: Path, alpha: AgentMail, tmp_path: Path) -> None:
    async def scenario(client: object) -> None:
        failed, why = await call(client, "send", to="alpha", subject="export DB_PASSWORD=hunter2", body=OPENER)  # type: ignore[arg-type]
        assert failed and "the subject looks like it contains" in why

    session(home, tmp_path, "--as", "beta")(scenario)  # type: ignore[arg-type]
