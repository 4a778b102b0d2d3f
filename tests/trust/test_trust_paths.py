"""The trust core's less travelled paths, each driven for real (issue 15: branch coverage of the
trust core, and mutants the broader tests let live)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.registry import Registry
from agentmail.errors import BadInput, ConfigError, NotFound, Timeout
from agentmail.letter import wire
from agentmail.model import Letter
from agentmail.stages import guards
from agentmail.transport import inotify, local
from agentmail.transport.base import Envelope, Outgoing
from agentmail.trust import authenticity, signing

from ..conftest import OPENER
from .test_authenticity import DATA, letter_bytes, sign_as

PLAIN = (
    b"From: Alpha <alpha@bus.test>\r\nTo: beta@bus.test\r\nSubject: Hi\r\nMessage-ID: <1.x@bus.test>\r\n"
    b"Date: Tue, 01 Dec 2026 00:00:00 +0000\r\n"
)


def _letter(raw: bytes) -> object:
    return wire.to_letter(wire.parse_message(raw, 1_000_000))


# --- wire ----------------------------------------------------------------------------------------


def test_render_refuses_a_reference_that_is_no_message_id() -> None:
    outline = wire.draft_letter(
        "alpha@bus.test",
        "",
        "beta@bus.test",
        "report",
        "thr-abc123def0",
        "Hi",
        "x",
        message_id="<1@bus.test>",
        references=("not-an-id",),
    )
    with pytest.raises(ValueError, match="not a Message-ID: 'not-an-id'"):
        wire.render(outline)


@pytest.mark.parametrize(
    "headers,body,detail",
    [
        (b"MIME-Version: 1.0\r\nContent-Type: image/png\r\n", b"\x89PNG", "the letter is image/png, not text"),
        (
            b'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b"\r\n',
            b"--b\r\nContent-Type: application/pdf\r\n\r\n%PDF\r\n--b--\r\n",
            "the letter is multipart/mixed and its first part, the text, is refused: the letter is application/pdf",
        ),
        (
            b"Content-Type: text/plain; charset=utf-8\r\n",
            b"hi\r\n",
            "the letter declares its content without MIME-Version",
        ),
        (
            b"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n",
            b"caf\xff\r\n",
            "the letter body is not valid utf-8",
        ),
        (b"Subject: Second\r\n", b"hi\r\n", "the letter has more than one Subject"),
        (
            b"",
            b"--- agentmail v1 ---\r\ntype: report\r\nseverity: apocalyptic\r\n--- end agentmail ---\r\n\r\nhi\r\n",
            "the agentmail block:",
        ),
    ],
)
def test_letters_the_wire_refuses(headers: bytes, body: bytes, detail: str) -> None:
    with pytest.raises(wire.Malformed) as caught:
        _letter(PLAIN + headers + b"\r\n" + body)
    assert caught.value.reason == "malformed" and detail in caught.value.detail


def test_a_subject_in_an_unknown_charset_is_malformed() -> None:
    raw = PLAIN.replace(b"Subject: Hi", b"Subject: =?x-no-such-charset?q?hi?=") + b"\r\nhi\r\n"
    with pytest.raises(wire.Malformed, match="Subject header cannot be decoded"):
        _letter(raw)


def test_a_letter_without_to_has_no_recipient_address() -> None:
    letter = _letter(PLAIN.replace(b"To: beta@bus.test\r\n", b"") + b"\r\nhi\r\n")
    assert letter.to_address == ""  # type: ignore[attr-defined]


# --- authenticity: delivery reports ----------------------------------------------------------------


def test_a_bounce_quoting_the_whole_letter_names_it(registry: Registry) -> None:
    raw = (DATA / "bounce-template.eml").read_bytes().replace(b"{MESSAGE_ID}", b"<01sent.alpha@bus.test>")
    raw = raw.replace(b"Content-Type: text/rfc822-headers", b"Content-Type: message/rfc822")
    verdict = authenticity.judge(raw, registry)
    assert (verdict.route, verdict.bounced_message_id) == ("bounce", "<01sent.alpha@bus.test>")


def test_a_bounce_without_status_or_diagnostic_gets_a_plain_reason(registry: Registry) -> None:
    raw = (DATA / "bounce-template.eml").read_bytes().replace(b"{MESSAGE_ID}", b"<01sent.alpha@bus.test>")
    raw = raw.replace(b"Status: 5.1.1\n", b"").replace(b"Status: 5.1.1\r\n", b"")
    raw = b"\n".join(line for line in raw.split(b"\n") if not line.startswith(b"Diagnostic-Code"))
    verdict = authenticity.judge(raw, registry)
    assert verdict.route == "bounce"
    assert verdict.detail == "the mail system reported the letter undeliverable"


def test_a_read_receipt_report_is_automated_not_a_bounce(registry: Registry) -> None:
    raw = (DATA / "bounce-template.eml").read_bytes().replace(b"{MESSAGE_ID}", b"<01sent.alpha@bus.test>")
    raw = raw.replace(b"report-type=delivery-status", b"report-type=disposition-notification")
    verdict = authenticity.judge(raw, registry)
    assert (verdict.route, verdict.reason) == ("quarantine", "automated")
    assert "(disposition-notification)" in (verdict.detail or "")


def test_a_quarantine_summary_has_no_control_characters(registry: Registry) -> None:
    raw = letter_bytes().replace(b"Subject: Burst", b"Subject: Burst\x07\x1b[31m")
    verdict = authenticity.judge(raw, registry)
    assert verdict.route == "quarantine" and verdict.summary is not None
    assert verdict.summary["subject"] == "Burst  [31m"


# --- signing ---------------------------------------------------------------------------------------


def test_an_unreadable_signature_is_reported_not_raised(registry: Registry, home: Path) -> None:
    entry = registry.platforms["alpha"]
    signed = sign_as(registry, home, "alpha", letter_bytes())
    garbage = b"DKIM-Signature: v=1; a=ed25519-sha256; d=bus.test\r\n"
    result = signing.verify(
        garbage + signed, signing.PinnedKey(entry.dkim_domain, entry.selector, "ed25519", entry.public_key)
    )
    assert result.ok  # the genuine signature below still counts
    result = signing.verify(
        garbage + letter_bytes(), signing.PinnedKey(entry.dkim_domain, entry.selector, "ed25519", entry.public_key)
    )
    assert not result.ok and "unreadable signature" in result.detail


# --- guards ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["", "   \n\t  \n"])
def test_an_empty_body_is_refused(body: str) -> None:
    assert guards.body_refusal(body) == "the body is empty"


# --- client: refusals and bad input --------------------------------------------------------------


def test_a_letter_id_that_is_not_alphanumeric_is_bad_input(beta: AgentMail) -> None:
    with pytest.raises(BadInput, match="is not a letter id"):
        beta.show("../../etc/passwd")


def test_notes_go_through_note_not_send_or_follow_up(alpha: AgentMail, beta: AgentMail) -> None:
    with pytest.raises(BadInput, match="use note()"):
        alpha.send("beta", "Hi", OPENER, type="note")
    report = alpha.send("beta", "Quota 500s", OPENER)
    with pytest.raises(BadInput, match="use note()"):
        alpha.follow_up(report.thread, "x", type="note")
    (got,) = beta.inbox()
    assert beta.reply(got, "Reproduced.", type="note") is None
    assert beta.why_refused(got) == "a note is not an answer; use note()"


def test_a_reply_to_a_sender_no_longer_registered_is_refused(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Quota 500s", OPENER)
    (got,) = beta.inbox()
    del beta.registry.platforms["alpha"]
    assert beta.reply(got, "Reproduced.") is None
    assert beta.why_refused(got) == f"the sender of {got.id} is no longer in the registry"


def test_an_unknown_thread_is_not_found(alpha: AgentMail) -> None:
    with pytest.raises(NotFound, match="no thread thr-000000000000"):
        alpha.thread("thr-000000000000")


def test_wait_with_nothing_coming_times_out(beta: AgentMail) -> None:
    with pytest.raises(Timeout, match="no matching letter within 0.05s"):
        beta.wait(0.05)


def test_a_damaged_signing_key_is_a_config_error(alpha: AgentMail, home: Path) -> None:
    from agentmail.config.credentials import read_private_key

    key_files = [p for p in (home / "secrets").iterdir() if read_private_key(home, "alpha") in p.read_text()]
    assert key_files, "the key file of alpha was not found"
    key_files[0].write_text(key_files[0].read_text().replace(read_private_key(home, "alpha"), "QUFBQQ=="))
    with pytest.raises(
        ConfigError,
        match=r"^the private key of alpha \(.*alpha\.key\) does not match the public key pinned in .*alpha\.toml",
    ):
        alpha.send("beta", "Hi", OPENER)
    assert alpha.sent() == []  # nothing half-made was filed


# --- spool -----------------------------------------------------------------------------------------


def test_spool_lookups_of_what_is_not_there(beta: AgentMail) -> None:
    spool = beta.spool
    assert spool.read.locate("../x") is None
    with pytest.raises(NotFound):
        spool.read.meta("01NOSUCHLETTER")
    assert (
        spool.read.thread_ids("thr-000000000000") == []
        and spool.read.threads() == []
        and spool.read.ids("unread") == []
    )
    assert spool.read.checkpoint("local") is None and spool.read.known("alpha", "<1@bus.test>") is None


def _reply(letter_id: str) -> Letter:
    return Letter(f"<{letter_id}@bus.test>", "beta", "beta@bus.test", "alpha", "alpha@bus.test", "ack",
                  "thr-0000000000", "Re: x", "", "", in_reply_to="<1@bus.test>", id=letter_id)  # fmt: skip


def test_a_reply_claim_is_taken_over_until_its_reply_is_filed_and_not_after(beta: AgentMail) -> None:
    spool = beta.spool.ensure()
    with spool.home_claims.claim_reply("<1@bus.test>", "01FIRST") as holder:
        assert holder is None  # ours: but its reply is never filed (a crash)
    with spool.home_claims.claim_reply("<1@bus.test>", "01SECOND") as holder:
        assert holder is None  # the claim names no letter: taken over
    spool.write.store("failed", _reply("01SECOND"), b"x")
    with spool.home_claims.claim_reply("<1@bus.test>", "01THIRD") as holder:
        assert holder is None  # a reply that failed answered nothing: taken over
    spool.write.store("sent", _reply("01THIRD"), b"x")
    with spool.home_claims.claim_reply("<1@bus.test>", "01FOURTH") as holder:
        assert holder == f"{spool.mailbox} 01THIRD"  # filed: the claim stands


def test_the_meta_of_a_quarantined_malformed_letter_is_rebuilt_with_its_reason(beta: AgentMail) -> None:
    # signed by alpha, so it passes authenticity and is held for its shape alone
    raw = sign_as(beta.registry, beta.home, "alpha", PLAIN + b"Content-Type: image/png\r\n\r\nx")
    local.deliver(beta.home / "postoffice" / "beta", raw)
    (held,) = beta.sync().quarantined
    assert (held.reason, held.detail) == ("malformed", "the letter declares its content without MIME-Version")
    beta.spool.db.conn().execute("UPDATE letters SET meta=NULL WHERE id=?", (held.id,))  # a lost cache
    meta = beta.spool.read.meta(held.id)
    assert (meta["state"], meta["reason"]) == ("quarantine", "malformed")


# --- the local transport ---------------------------------------------------------------------------


def test_local_submit_to_an_unknown_mailbox_fails_with_550(alpha: AgentMail) -> None:
    (result,) = alpha.transport.submit([Outgoing("k", b"x", Envelope("alpha@bus.test", ("nobody@bus.test",)))])
    assert (result.status, result.refused) == ("failed", (("nobody@bus.test", "550 no such mailbox on this bus"),))
    assert result.detail == "nobody@bus.test: 550 no such mailbox on this bus"


def test_a_letter_a_mail_client_flagged_is_still_read(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Quota 500s", OPENER)
    box = beta.transport.mailbox  # type: ignore[attr-defined]
    box.assign()
    (name,) = os.listdir(box.dir / "cur")
    os.rename(box.dir / "cur" / name, box.dir / "cur" / (name + "S"))
    assert [x.subject for x in beta.inbox()] == ["Quota 500s"]


def test_a_uid_missing_from_the_mailbox_is_skipped(alpha: AgentMail, beta: AgentMail) -> None:
    for n in range(3):
        alpha.send("beta", f"Letter {n}", OPENER)
    box = beta.transport.mailbox  # type: ignore[attr-defined]
    box.assign()
    os.unlink(box.dir / "cur" / f"{2:012d}:2,")  # removed by hand, or by a mail client
    assert sorted(x.subject for x in beta.inbox()) == ["Letter 0", "Letter 2"]


def test_without_inotify_the_local_wait_polls(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inotify, "watch", lambda directory: None)
    beta.sync()
    assert beta.transport.wait(beta.spool.read.checkpoint("local"), 0.05) is None
    alpha.send("beta", "Quota 500s", OPENER)
    assert beta.transport.wait(beta.spool.read.checkpoint("local"), 60) == "poll"


def test_an_inotify_watch_on_a_missing_directory_is_none(tmp_path: Path) -> None:
    assert inotify.watch(tmp_path / "missing") is None
    watch = inotify.Watch(tmp_path)
    watch.close()
    watch.close()  # closing twice is harmless
    assert watch.fd == -1


def test_a_letter_too_large_to_fetch_is_quarantined_once(alpha: AgentMail, beta: AgentMail) -> None:
    big = sign_as(beta.registry, beta.home, "alpha", letter_bytes(to_address="beta@bus.test", body="x" * 1_100_000))
    local.deliver(beta.home / "postoffice" / "beta", big)
    (held,) = beta.sync().quarantined
    assert held.reason == "too-large" and "bytes; this bus takes at most 1048576" in (held.detail or "")
    beta.spool.write.set_checkpoint("local", None)  # a lost checkpoint: the mailbox is read again
    report = beta.sync()
    assert (report.duplicates, report.quarantined) == (1, [])


def test_status_skips_a_thread_whose_letters_are_gone(alpha: AgentMail, beta: AgentMail) -> None:
    kept = alpha.send("beta", "Kept", OPENER)
    gone = alpha.send("beta", "Gone", OPENER)
    alpha.spool.db.conn().execute("DELETE FROM letters WHERE id=?", (gone.id,))  # its thread still listed open
    assert [row.thread for row in alpha.status(sync=False)] == [kept.thread]
