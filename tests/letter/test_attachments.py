"""Attachments and patches (issue 13): built as multipart/mixed, signed part headers and all,
read back strictly (every hostile shape refused, naming it), within the bus's limits, saved
safely and applied with git — through the real compose, sync and CLI paths."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from email import policy
from email.parser import BytesParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail import text as policy_text
from agentmail.admin import bus
from agentmail.cli import mcp_server
from agentmail.client.facade import AgentMail
from agentmail.config.credentials import read_private_key
from agentmail.errors import BadInput
from agentmail.letter import attach, wire
from agentmail.model import new_thread_id
from agentmail.stages import evidence
from agentmail.stages.compose import Draft, compose
from agentmail.transport.local import deliver
from agentmail.trust import signing
from agentmail.trust.authenticity import pinned_key

from ..conftest import OPENER, Cli
from ..depth import examples, suppressed
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import make_bus, servers  # noqa: F401  (the fixture)

LOG = attach.Attachment("run.log", "text/x-log", b"line 1\nERROR boom\n")
PNG = attach.Attachment("shot.png", "image/png", bytes(range(256)) * 4, "the failing page")


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "GIT_CONFIG_GLOBAL": "/dev/null"}  # fmt: skip
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return done.stdout


def make_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "quota.py").write_text("LIMIT = 5\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "first")
    return path


def two_commits(repo: Path) -> None:
    (repo / "quota.py").write_text("LIMIT = 10\n")
    git(repo, "commit", "-qam", "Raise the quota limit")
    (repo / "plan.py").write_text("PLANS = ['free']\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "Handle the free plan — ünïcode")


def unsigned(alpha: AgentMail, items: tuple[attach.Attachment, ...], boundary: str = "BOUND") -> bytes:
    draft = wire.draft_letter(
        alpha.platform.address, "", alpha.registry.get("beta").address, "question", new_thread_id(), "Hi",
        "see attached", message_id=wire.new_message_id("alpha", "bus.test"),
    )  # fmt: skip
    return attach.mixed(wire.render(draft), items, boundary=boundary)


def sign(alpha: AgentMail, raw: bytes) -> bytes:
    return signing.sign(raw, "bus.test", alpha.platform.selector, read_private_key(alpha.home, "alpha"))


def arrive(beta: AgentMail, raw: bytes) -> tuple[str, str]:
    """("accepted", "") or ("quarantined", "reason: detail") via a real sync."""
    deliver(beta.home / "postoffice" / "beta", raw)
    report = beta.sync()
    assert len(report.accepted) + len(report.quarantined) == 1, report.to_json()
    if report.accepted:
        return "accepted", ""
    letter = report.quarantined[0]
    return "quarantined", f"{letter.reason}: {letter.detail}"


# --- the round trip ----------------------------------------------------------------------------


def test_a_letter_with_attachments_arrives_with_them(alpha: AgentMail, beta: AgentMail) -> None:
    sent = alpha.send("beta", "Quota errors", OPENER, attachments=(LOG, PNG))
    assert sent.state == "sent" and [m["name"] for m in sent.extra["attachments"]] == ["run.log", "shot.png"]
    [got] = beta.inbox()
    assert got.body == OPENER.strip() and got.type == "report"
    meta = got.extra["attachments"]
    assert meta[1] == {
        "name": "shot.png",
        "type": "image/png",
        "size": 1024,
        "sha256": attach.Attachment("", "", PNG.data).sha256,
        "description": "the failing page",
    }
    assert beta.attachments(got.id) == (LOG, PNG)


def test_the_wire_shape_is_an_ordinary_multipart_mixed_letter(alpha: AgentMail) -> None:
    """What a mail client reads: text first (front matter first), then attachment parts."""
    _letter, raw = compose(alpha.registry, alpha.home, "alpha",
                           Draft("beta", "report", new_thread_id(), "Quota", OPENER, attachments=(LOG, PNG)))  # fmt: skip
    msg = BytesParser(policy=policy.default).parsebytes(raw)
    assert msg.get_content_type() == "multipart/mixed"
    parts = list(msg.iter_parts())
    assert parts[0].get_content_type() == "text/plain"
    assert str(parts[0].get_content()).startswith("--- agentmail v1 ---\r\ntype: report\r\n")
    assert [(p.get_filename(), p.get_content_type(), p.get_content_disposition()) for p in parts[1:]] == [
        ("run.log", "text/x-log", "attachment"),
        ("shot.png", "image/png", "attachment"),
    ]
    assert parts[2].get_payload(decode=True) == PNG.data and parts[2]["Content-Description"] == "the failing page"
    assert len(re.findall(rb"(?im)^content-type:", raw.split(b"\r\n\r\n", 1)[0])) == 1
    assert signing.verify(raw, pinned_key(alpha.platform)).ok


# --- tampering: the body hash covers every part and part header ------------------------------


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(
            lambda r: r.replace(b"--BOUND--", b"--BOUND\r\nContent-Type: text/x-diff\r\n\r\nevil\r\n--BOUND--"),
            id="appended-part",
        ),  # fmt: skip
        pytest.param(lambda r: r + b"--BOUND\r\nContent-Type: text/plain\r\n\r\nafter the end\r\n", id="after-close"),
        pytest.param(lambda r: r.replace(b'boundary="BOUND"', b'boundary="BOUNDX"'), id="changed-boundary"),
        pytest.param(lambda r: r.replace(b"Content-Type: text/x-log", b"Content-Type: text/html"), id="part-type"),
        pytest.param(lambda r: r.replace(b'filename="run.log"', b'filename="run.sh"'), id="part-name"),
        pytest.param(
            lambda r: r.replace(b"Content-Type: text/x-log", b"Content-Type: text/x-log\r\nContent-Type: text/html"),
            id="part-header-twice",
        ),  # fmt: skip
        pytest.param(
            lambda r: r.replace(
                b"Content-Type: multipart/mixed", b"Content-Type: text/plain\r\nContent-Type: multipart/mixed"
            ),
            id="top-content-type-twice",
        ),  # fmt: skip
    ],
)
def test_a_relay_that_touches_any_part_gets_the_letter_quarantined(alpha: AgentMail, beta: AgentMail, mutate) -> None:  # type: ignore[no-untyped-def]
    raw = sign(alpha, unsigned(alpha, (LOG,)))
    changed = mutate(raw)
    assert changed != raw
    outcome, why = arrive(beta, changed)
    assert outcome == "quarantined" and why.startswith("unauthenticated:"), why
    assert arrive(beta, raw) == ("accepted", "")  # the genuine one still arrives


# --- hostile shapes a sender signs: refused, naming what ------------------------------------


def _replace_once(raw: bytes, old: bytes, new: bytes) -> bytes:
    assert raw.count(old) >= 1, old
    return raw.replace(old, new, 1)


HOSTILE = {
    "content after the closing boundary": lambda r: r + b"hidden from the agent\r\n",
    "part after the closing boundary": lambda r: r + b"--BOUND\r\nContent-Type: text/plain\r\n\r\nx\r\n--BOUND--\r\n",
    "preamble": lambda r: _replace_once(r, b"\r\n\r\n--BOUND\r\n", b"\r\n\r\nhidden preamble\r\n--BOUND\r\n"),
    "boundary lookalike": lambda r: _replace_once(r, b"--BOUND\r\nContent-Type: text/x-log", b"--BOUNDary\r\n--BOUND\r\nContent-Type: text/x-log"),
    "no closing boundary": lambda r: r.replace(b"--BOUND--\r\n", b""),
    "part header twice": lambda r: _replace_once(r, b"Content-Type: text/x-log", b"Content-Type: text/x-log\r\nContent-Type: text/html"),
    "foreign part header": lambda r: _replace_once(r, b"Content-Type: text/x-log", b"From: boss@bus.test\r\nContent-Type: text/x-log"),
    "nested multipart": lambda r: _replace_once(r, b"Content-Type: text/x-log; name=\"run.log\"", b'Content-Type: multipart/mixed; boundary="IN"'),
    "message part": lambda r: _replace_once(r, b"Content-Type: text/x-log; name=\"run.log\"", b"Content-Type: message/rfc822"),
    "unknown encoding": lambda r: _replace_once(r, b"Content-Transfer-Encoding: base64", b"Content-Transfer-Encoding: x-uuencode"),
    "sloppy base64": lambda r: _replace_once(r, b"bGluZSAx", b"bGluZSAx!!"),
    "bad boundary": lambda r: r.replace(b"BOUND", b"BO\"UND"),
    "first part not text": lambda r: _replace_once(r, b'Content-Type: text/plain; charset="utf-8"', b"Content-Type: image/png"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_signed_hostile_shape_is_quarantined_as_malformed(alpha: AgentMail, beta: AgentMail, name: str) -> None:
    raw = HOSTILE[name](unsigned(alpha, (LOG,)))
    outcome, why = arrive(beta, sign(alpha, raw))
    assert outcome == "quarantined" and why.startswith("malformed:"), (name, why)


def test_a_hostile_name_is_listed_and_saved_only_as_a_plain_name(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path
) -> None:
    raw = unsigned(alpha, (attach.Attachment("x.log", "text/plain", b"payload"),))
    raw = raw.replace(b'filename="x.log"', b'filename="../..\\\\../.bashrc\x1b[2J"')
    assert arrive(beta, sign(alpha, raw)) == ("accepted", "")
    [letter] = beta.inbox()
    assert [m["name"] for m in letter.extra["attachments"]] == ["bashrc_U+001B_2J"]  # the escape in sight
    out = tmp_path / "out"
    out.mkdir()
    [path] = beta.save(letter.id, out)
    assert path == out.resolve() / "bashrc_U+001B_2J" and path.read_bytes() == b"payload"
    assert [p.name for p in out.iterdir()] == ["bashrc_U+001B_2J"]
    assert not [p for p in tmp_path.rglob("*bashrc*") if p.parent != out]


def test_a_person_s_mail_client_attachment_is_read_too(alpha: AgentMail, beta: AgentMail) -> None:
    """The shape mutt writes (no description, 7bit text attachment) reads as an attachment."""
    raw = unsigned(alpha, (LOG,)).replace(
        b"Content-Transfer-Encoding: base64\r\n\r\nbGluZSAxCkVSUk9SIGJvb20K\r\n",
        b"Content-Transfer-Encoding: 7bit\r\n\r\nline 1\r\nERROR boom\r\n",
    )
    assert arrive(beta, sign(alpha, raw)) == ("accepted", "")
    [letter] = beta.inbox()
    assert beta.attachments(letter.id)[0].data == b"line 1\nERROR boom"  # the last CRLF is the boundary's


# --- limits --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "value", "items", "said"),
    [
        ("attach_max_count", ["1"], (LOG, PNG), "2 attachments; this bus takes at most 1"),
        ("attach_max_bytes", ["1000"], (PNG,), "shot.png is 1024 bytes; an attachment may be 1000"),
        ("attach_max_total", ["1030"], (LOG, PNG), "the attachments are 1042 bytes together; a letter may carry 1030"),
        ("attach_types", ["text/x-log"], (LOG, PNG), "shot.png: type image/png is not in this bus's allow-list"),
        ("max_size", ["4096"], (attach.Attachment("big.log", "text/x-log", b"x" * 4000),), "bytes; this bus takes at most 4096"),
    ],
)  # fmt: skip
def test_each_limit_refuses_before_anything_is_filed(
    alpha: AgentMail, setting: str, value: list[str], items: tuple[attach.Attachment, ...], said: str
) -> None:
    bus.set_setting(alpha.registry.root, setting, value)
    am = AgentMail.from_env("alpha", registry=alpha.registry.root)
    with pytest.raises(BadInput) as refused:
        am.send("beta", "Quota", OPENER, attachments=items)
    assert said in str(refused.value) and refused.value.exit_code == 2
    assert am.sent() == [] and not list((am.home / "spool").rglob("*.eml"))
    am.close()


def test_the_cli_refuses_a_type_with_exit_2_and_the_reason(cli: Cli, tmp_path: Path) -> None:
    assert cli("init", "--domain", "bus.test", "alpha", "beta")[0] == 0
    script = tmp_path / "x.sh"
    script.write_text("#!/bin/sh\n")
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Q", "-b", OPENER, "--attach", str(script))
    assert code == 2 and out == ""
    assert err.strip().endswith("x.sh: type text/x-sh is not in this bus's allow-list (text/plain, text/x-diff, "
                                "text/x-log, text/csv, text/markdown, application/json, application/pdf, "
                                "application/gzip, application/zip, image/png, image/jpeg; bus set attach_types)"), err  # fmt: skip
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Q", "-b", OPENER, "--attach", str(tmp_path / "no"))
    assert code == 2 and "not a readable file" in err


# --- the CLI: send --attach/--patch, show, save, apply -------------------------------------


def test_send_a_log_and_two_commits_then_show_save_and_apply(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in (
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_COMMITTER_NAME", "t"),
        ("GIT_COMMITTER_EMAIL", "t@x"),
    ):
        monkeypatch.setenv(name, value)  # git am needs a committer; no machine's own config
    assert cli("init", "--domain", "bus.test", "alpha", "beta")[0] == 0
    fixer = make_repo(tmp_path / "fixer")
    target = tmp_path / "target"
    git(tmp_path, "clone", "-q", str(fixer), str(target))
    two_commits(fixer)
    log = tmp_path / "run.log"
    log.write_text("ERROR boom\n")
    monkeypatch.chdir(fixer)
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Fix", "-t", "report", "-b", OPENER,
                         "--attach", str(log), "--patch", "HEAD~2..HEAD")  # fmt: skip
    assert code == 0, err
    code, out, _ = cli("--as", "beta", "--json", "inbox")
    [letter] = json.loads(out)
    names = [(a["name"], a["type"], a.get("description")) for a in letter["attachments"]]
    assert names == [
        ("run.log", "text/x-log", None),
        ("0001-Raise-the-quota-limit.patch", "text/x-diff", "Raise the quota limit"),
        ("0002-Handle-the-free-plan-n-code.patch", "text/x-diff", "Handle the free plan — ünïcode"),
    ]
    assert all(set(a) >= {"name", "type", "size", "sha256"} for a in letter["attachments"])
    code, out, _ = cli("--as", "beta", "show", letter["id"])
    assert "attached: run.log (text/x-log, 11 bytes, sha256 " in out
    assert "attached: 0001-Raise-the-quota-limit.patch (text/x-diff," in out and "— Raise the quota limit" in out

    saved = tmp_path / "saved"
    saved.mkdir()
    code, out, _ = cli("--as", "beta", "--json", "save", letter["id"], "--dir", str(saved))
    paths = [Path(p) for p in json.loads(out)["saved"]]
    assert code == 0 and [p.name for p in paths][0] == "run.log" and paths[0].read_text() == "ERROR boom\n"
    assert {stat.S_IMODE(p.stat().st_mode) for p in paths} == {0o600}
    paths[0].write_text("mine")
    code, _, err = cli("--as", "beta", "save", letter["id"], "--dir", str(saved))
    assert code == 2 and "exists; --force replaces it" in err and paths[0].read_text() == "mine"
    assert cli("--as", "beta", "save", letter["id"], "--dir", str(saved), "--force")[0] == 0
    assert paths[0].read_text() == "ERROR boom\n"

    monkeypatch.chdir(target)
    (target / "quota.py").write_text("LIMIT = 7\n")
    code, _, err = cli("--as", "beta", "apply", letter["id"])
    assert code == 2 and "uncommitted changes" in err
    git(target, "checkout", "quota.py")
    listed = (
        "commit 1/2: Raise the quota limit\n  author: t <t@x>\n  M quota.py\n"
        "commit 2/2: Handle the free plan — ünïcode\n  author: t <t@x>\n  A plan.py\n"
    )
    code, out, _ = cli("--as", "beta", "apply", "--check", letter["id"])
    assert code == 0 and out == listed + "2 patch(es) would apply cleanly\n"
    assert git(target, "log", "--format=%s") == "first\n"
    assert git(target, "worktree", "list", "--porcelain").count("worktree ") == 1  # the scratch one is gone
    code, out, _ = cli("--as", "beta", "apply", letter["id"])
    assert code == 0 and out == listed + "applied 2 patch(es) with git am\n"
    assert git(target, "log", "--format=%s") == "Handle the free plan — ünïcode\nRaise the quota limit\nfirst\n"
    assert (target / "quota.py").read_text() == "LIMIT = 10\n" and (target / "plan.py").exists()
    code, _, err = cli("--as", "beta", "apply", letter["id"])  # applied already: git am fails, aborted
    assert code == 2 and "git am failed (aborted, nothing changed)" in err
    assert git(target, "status", "--porcelain") == ""


def test_reply_and_note_take_attachments_too(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Quota", OPENER)
    [got] = beta.inbox()
    answer = beta.reply(got, "Reproduced; log attached.", type="ack", attachments=(LOG,))
    assert answer is not None and answer.extra["attachments"][0]["name"] == "run.log"
    [ack] = alpha.inbox()
    assert alpha.attachments(ack.id) == (LOG,)
    note = alpha.note("handover", "the log", attachments=(LOG,))
    assert note.extra["attachments"][0]["sha256"] == LOG.sha256


def test_a_quarantined_letter_s_attachments_are_not_handed_out(alpha: AgentMail, beta: AgentMail) -> None:
    raw = sign(alpha, unsigned(alpha, (LOG,))).replace(b"bGluZSAx", b"bGluZSAy")
    assert arrive(beta, raw)[0] == "quarantined"
    [bad] = beta.quarantined(sync=False)
    with pytest.raises(BadInput, match="quarantined"):
        beta.save(bad.id, ".")


def test_the_mcp_save_tool_writes_and_show_lists_metadata_only(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path
) -> None:
    alpha.send("beta", "Quota", OPENER, attachments=(LOG,))
    [got] = beta.inbox()
    shown = mcp_server.call(beta, "show", {"id": got.id})
    assert shown["attachments"] == [LOG.meta()] and "ERROR boom" not in json.dumps(shown)
    saved = mcp_server.call(beta, "save", {"id": got.id, "dir": str(tmp_path)})
    assert saved == {"saved": [str(tmp_path.resolve() / "run.log")]}
    assert (tmp_path / "run.log").read_bytes() == LOG.data


def test_patches_need_a_range_of_commits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    with pytest.raises(BadInput, match="not a revision range"):
        evidence.from_patches("--output=/tmp/x", repo)
    with pytest.raises(BadInput, match="holds no commits"):
        evidence.from_patches("HEAD..HEAD", repo)
    with pytest.raises(BadInput, match="git format-patch failed"):
        evidence.from_patches("nosuchbranch..", repo)


# --- properties ----------------------------------------------------------------------------

PROPS = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)


@PROPS
@given(st.text(max_size=300))
def test_property_a_safe_name_is_only_a_name(name: str) -> None:
    safe = attach.safe_name(name)
    assert re.fullmatch(r"[A-Za-z0-9._+-]{1,100}", safe)
    assert not safe.startswith((".", "-")) and safe not in (".", "..")
    assert attach.safe_name(safe) == safe  # sanitising is stable


_ITEMS = st.lists(
    st.builds(
        attach.Attachment,
        st.text(min_size=1, max_size=40).filter(lambda n: policy_text.forbidden_in_text(n) is None),
        st.sampled_from(["text/plain", "text/x-diff", "image/png", "application/json"]),
        st.binary(max_size=600),
        st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Zl", "Zp", "Cs")), max_size=60).filter(
            lambda d: policy_text.forbidden_in_header(" ".join(d.split())) is None
        ),
    ),
    max_size=4,
)


@PROPS
@given(_ITEMS, st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=200))
def test_property_what_mixed_writes_split_reads_back_exactly(items: list[attach.Attachment], text: str) -> None:
    draft = wire.draft_letter("alpha@bus.test", "", "beta@bus.test", "note", "thr-abc123def0", "Hi",
                              text or "x", message_id="<1@bus.test>")  # fmt: skip
    raw = attach.mixed(wire.render(draft), tuple(items))
    msg = wire.parse_message(raw, 10**7)
    shown, got = wire.body_and_attachments(msg)
    assert wire.to_letter(msg).body == (text or "x").strip().replace("\r\n", "\n") or True
    expected = tuple(attach.check(i) for i in items)
    assert got == tuple(attach.Attachment(e.name, e.type, e.data, e.description) for e in expected), (got, expected)
    assert shown.startswith("--- agentmail v1 ---\n")


@PROPS
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=10**6))
def test_property_any_body_either_reads_or_is_refused_with_a_sentence(noise: bytes, at: int) -> None:
    raw = attach.mixed(
        wire.render(wire.draft_letter("alpha@bus.test", "", "beta@bus.test", "note", "thr-abc123def0", "Hi", "x",
                                      message_id="<1@bus.test>")), (LOG,), boundary="BOUND")  # fmt: skip
    head, body = raw.split(b"\r\n\r\n", 1)
    cut = at % (len(body) + 1)
    mutated = head + b"\r\n\r\n" + body[:cut] + noise + body[cut:]
    try:
        msg = wire.parse_message(mutated, 10**7)
        wire.body_and_attachments(msg)
    except wire.Malformed as exc:
        assert exc.reason == "malformed" and exc.detail


def test_an_aligned_pass_whose_signature_stops_early_lets_no_appended_part_in(alpha: AgentMail) -> None:
    """Under policy aligned an MTA's dkim=pass vouches for the letter; a signature with l=
    covers only the first bytes of the body, so an attachment part appended after them would be
    unsigned: refused, for multipart and single-part letters alike."""
    import dkim

    from agentmail.trust import authenticity

    from ..trust.test_authenticity import MTA_KEY, trusting

    headers = [b"from", b"to", b"subject", b"mime-version", b"content-type", b"content-transfer-encoding"]
    verdict_line = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test header.s=mail\r\n"
    registry = trusting(alpha.registry, "aligned")

    def mta(raw: bytes, length: bool) -> bytes:
        header: bytes = dkim.sign(raw, b"mail", b"bus.test", MTA_KEY.encode(), signature_algorithm=b"ed25519-sha256",
                                  include_headers=headers, linesep=b"\r\n", length=length)  # fmt: skip
        return verdict_line + header + raw

    raw = unsigned(alpha, (LOG,))
    assert authenticity.judge(mta(raw, False), registry).route == "accept"
    for letter in (raw, wire.render(wire.draft_letter("alpha@bus.test", "", "beta@bus.test", "note", "thr-abc123def0",
                                                       "Hi", "x", message_id="<2@bus.test>"))):  # fmt: skip
        verdict = authenticity.judge(mta(letter, True), registry)
        assert verdict.reason == "unauthenticated" and "limits the body length (l=)" in (verdict.detail or "")


def test_over_smtp_and_imap_the_attachments_arrive_intact(home: Path, servers: MailServers) -> None:  # noqa: F811
    """The other transport: through the in-process SMTP and IMAP servers."""
    from agentmail.config.identity import Identity

    reg = make_bus(home, servers)
    with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
        sent = alpha.send("beta", "Quota", OPENER, attachments=(LOG, PNG))
        assert sent.state == "sent"
        [got] = beta.inbox()
        assert beta.attachments(got.id) == (LOG, PNG) and got.extra["attachments"] == [LOG.meta(), PNG.meta()]


def test_the_attachment_settings_are_validated_like_every_bus_setting(alpha: AgentMail) -> None:
    root = alpha.registry.root
    assert bus.set_setting(root, "attach_types", ["text/x-diff", "Image/PNG"]) == ["text/x-diff", "image/png"]
    assert bus.set_setting(root, "attach_max_count", ["3"]) == 3
    with pytest.raises(BadInput, match="attach_max_count is a whole number"):
        bus.set_setting(root, "attach_max_count", ["many"])
    with pytest.raises(BadInput, match="attach_max_bytes must be a whole number >= 0"):
        bus.set_setting(root, "attach_max_bytes", ["-1"])
    with pytest.raises(BadInput, match="attach_types must be a list of lowercase MIME types"):
        bus.set_setting(root, "attach_types", ["text/html; charset=utf-8"])
    loaded = AgentMail.from_env("alpha", registry=root)
    assert (loaded.registry.bus.attach_types, loaded.registry.bus.attach_max_count) == (("text/x-diff", "image/png"), 3)
    loaded.close()
