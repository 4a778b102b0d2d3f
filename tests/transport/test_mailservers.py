"""The hermetic mail servers behave like real ones, seen through plain client libraries.

Only aiosmtplib, smtplib and imapclient talk to the servers here; if these pass, the
agentmail transport can be tested against the same servers with confidence.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import imaplib
import smtplib
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import aiosmtplib
import pytest
from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientAbortError, IMAPClientError, LoginError

from tests.mailservers import MailServers, TlsMode

USERS = {"alpha@bus.test": "pw1", "beta@bus.test": "pw2"}
MESSAGE = (
    b"From: alpha@bus.test\r\n"
    b"To: beta+thr-9f2a@bus.test\r\n"
    b"Subject: rate limit ignored\r\n"
    b"Message-ID: <01J.alpha@bus.test>\r\n"
    b"\r\n"
    b"Fired 14 submits in 0.9s against a limit of 10.\r\n"
)


@pytest.fixture
def ms() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS) as servers:
        yield servers


def submit(
    ms: MailServers,
    recipients: list[str],
    data: bytes = MESSAGE,
    *,
    login: str = "alpha@bus.test",
    password: str = "pw1",
    tls_context: ssl.SSLContext | None = None,
) -> tuple[dict[str, Any], str]:
    """One aiosmtplib submission in the mode the servers were started in."""
    mode = ms.smtp_tls

    async def send() -> tuple[dict[str, Any], str]:
        try:
            return await aiosmtplib.send(
                data,
                sender=login,
                recipients=recipients,
                hostname="127.0.0.1",
                port=ms.smtp_port,
                username=login,
                password=password,
                use_tls=mode == "implicit",
                start_tls=mode == "starttls",
                tls_context=tls_context or ms.client_context(),
                timeout=5,
            )
        finally:
            # Let the TLS close_notify exchange finish: asyncio.run closing the loop
            # first leaves the socket to the garbage collector (a ResourceWarning).
            await asyncio.sleep(0.01)

    return asyncio.run(send())


def imap(
    ms: MailServers,
    login: str = "beta@bus.test",
    password: str = "pw2",
    *,
    mode: TlsMode = "implicit",
) -> IMAPClient:
    ctx = ms.client_context()
    client = IMAPClient("127.0.0.1", port=ms.imap_port, ssl=mode == "implicit", ssl_context=ctx, timeout=5)
    # imapclient sends a SEARCH line and its CRLF in two writes; with Nagle on, the
    # second waits for the server's delayed ACK: ~40 ms per command on Linux.
    client.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mode == "starttls":
        client.starttls(ctx)
    client.login(login, password)
    return client


# -- TLS ------------------------------------------------------------------------------


@pytest.mark.parametrize("smtp_tls", ["starttls", "implicit", "none"])
def test_submission_works_in_every_tls_mode(smtp_tls: TlsMode) -> None:
    with MailServers("bus.test", USERS, smtp_tls=smtp_tls) as ms:
        errors, reply = submit(ms, ["beta@bus.test"])
        assert errors == {}
        assert reply.startswith("2.0.0")
        assert len(ms.store.messages("beta@bus.test")) == 1


@pytest.mark.parametrize("imap_tls", ["implicit", "starttls", "none"])
def test_imap_login_works_in_every_tls_mode(imap_tls: TlsMode) -> None:
    with MailServers("bus.test", USERS, imap_tls=imap_tls) as ms:
        client = imap(ms, mode=imap_tls)
        assert client.select_folder("INBOX")[b"EXISTS"] == 0
        client.logout()


def test_servers_present_a_certificate_the_generated_ca_verifies(ms: MailServers) -> None:
    ctx = ms.client_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    with ctx.wrap_socket(
        socket.create_connection(("127.0.0.1", ms.imap_port), timeout=5),
        server_hostname="127.0.0.1",
    ) as tls:
        assert tls.recv(100).startswith(b"* OK")


def test_a_certificate_from_another_ca_is_refused_by_both_clients() -> None:
    with MailServers("bus.test", USERS, untrusted_cert=True) as ms:
        with pytest.raises((ssl.SSLCertVerificationError, aiosmtplib.SMTPException)) as smtp:
            submit(ms, ["beta@bus.test"])
        assert "CERTIFICATE_VERIFY_FAILED" in str(smtp.value)
        with pytest.raises(ssl.SSLCertVerificationError):
            imap(ms)
        assert ms.store.counts["imap.auth"] == 0


def test_a_client_without_the_test_ca_refuses_the_server(ms: MailServers) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        IMAPClient("127.0.0.1", port=ms.imap_port, ssl_context=ssl.create_default_context(), timeout=5)


def test_a_certificate_for_another_host_is_refused() -> None:
    with (
        MailServers("bus.test", USERS, cert_hosts=("mail.bus.test",)) as ms,
        pytest.raises(ssl.SSLCertVerificationError, match="mismatch"),
    ):
        imap(ms)


# -- SMTP -----------------------------------------------------------------------------


def test_wrong_password_is_answered_535(ms: MailServers) -> None:
    with pytest.raises(aiosmtplib.SMTPAuthenticationError) as exc:
        submit(ms, ["beta@bus.test"], password="nope")
    assert exc.value.code == 535
    # aiosmtplib tries each mechanism both sides support (PLAIN, then LOGIN).
    assert ms.store.counts["smtp.auth_failed"] >= 1
    assert ms.store.accepted == []


def test_mail_without_auth_is_refused(ms: MailServers) -> None:
    with smtplib.SMTP("127.0.0.1", ms.smtp_port, timeout=5) as smtp:
        smtp.starttls(context=ms.client_context())
        smtp.ehlo()
        code, _ = smtp.mail("alpha@bus.test")
    assert code == 530


def test_auth_before_starttls_is_not_offered(ms: MailServers) -> None:
    with smtplib.SMTP("127.0.0.1", ms.smtp_port, timeout=5) as smtp:
        smtp.ehlo()
        assert not smtp.has_extn("auth")
        assert smtp.has_extn("starttls")


def test_plus_address_lands_in_the_base_mailbox_with_delivered_to(ms: MailServers) -> None:
    submit(ms, ["beta+thr-9f2a@bus.test"])
    [stored] = ms.store.messages("beta@bus.test")
    assert stored.data == b"Delivered-To: beta+thr-9f2a@bus.test\r\n" + MESSAGE
    assert ms.store.messages("alpha@bus.test") == []


def test_delivery_follows_the_envelope_not_the_to_header(ms: MailServers) -> None:
    submit(ms, ["alpha@bus.test"])  # To: says beta
    assert len(ms.store.messages("alpha@bus.test")) == 1
    assert ms.store.messages("beta@bus.test") == []


def test_unknown_recipient_is_refused_550_and_the_rest_delivered(ms: MailServers) -> None:
    errors, _ = submit(ms, ["nobody@bus.test", "beta+thr-1@bus.test"])
    assert set(errors) == {"nobody@bus.test"}
    assert errors["nobody@bus.test"].code == 550
    assert len(ms.store.messages("beta@bus.test")) == 1
    [accepted] = ms.store.accepted
    assert accepted.rcpt_tos == ("beta+thr-1@bus.test",)


def test_all_recipients_unknown_refuses_the_message(ms: MailServers) -> None:
    with pytest.raises(aiosmtplib.SMTPRecipientsRefused):
        submit(ms, ["nobody@bus.test", "beta@elsewhere.test"])
    assert ms.store.accepted == []


def test_accepted_messages_are_recorded_with_envelope_bytes_and_login(ms: MailServers) -> None:
    submit(ms, ["beta@bus.test", "alpha+thr-2@bus.test"])
    [accepted] = ms.store.accepted
    assert accepted.mail_from == "alpha@bus.test"
    assert accepted.rcpt_tos == ("beta@bus.test", "alpha+thr-2@bus.test")
    assert accepted.data == MESSAGE
    assert accepted.login == "alpha@bus.test"


@pytest.mark.parametrize(("code", "error"), [(451, "4.3.0 Try later"), (554, "5.6.0 No")])
def test_injected_data_failures_hit_the_next_n_messages(ms: MailServers, code: int, error: str) -> None:
    ms.store.fail_next_data(2, code, error)
    for _ in range(2):
        with pytest.raises(aiosmtplib.SMTPDataError) as exc:
            submit(ms, ["beta@bus.test"])
        assert exc.value.code == code
    submit(ms, ["beta@bus.test"])
    assert len(ms.store.messages("beta@bus.test")) == 1
    assert len(ms.store.accepted) == 1


def test_smtp_goes_down_and_comes_back_on_the_same_port(ms: MailServers) -> None:
    port = ms.smtp_port
    ms.stop_smtp()
    with pytest.raises(aiosmtplib.SMTPConnectError):
        submit(ms, ["beta@bus.test"])
    ms.start_smtp()
    assert ms.smtp_port == port
    submit(ms, ["beta@bus.test"])
    assert len(ms.store.messages("beta@bus.test")) == 1


def test_stopping_smtp_drops_open_sessions(ms: MailServers) -> None:
    smtp = smtplib.SMTP("127.0.0.1", ms.smtp_port, timeout=5)
    smtp.starttls(context=ms.client_context())
    ms.stop_smtp()
    with pytest.raises((smtplib.SMTPServerDisconnected, ConnectionError, ssl.SSLError)):
        smtp.login("alpha@bus.test", "pw1")
    smtp.close()


# -- IMAP -----------------------------------------------------------------------------


def test_select_reports_uidvalidity_uidnext_and_exists(ms: MailServers) -> None:
    submit(ms, ["beta@bus.test"])
    client = imap(ms)
    info = client.select_folder("INBOX")
    assert info[b"EXISTS"] == 1
    assert info[b"UIDNEXT"] == 2
    assert info[b"UIDVALIDITY"] == ms.store.state("beta@bus.test", "INBOX").uidvalidity
    assert info[b"READ-WRITE"]
    assert client.select_folder("INBOX", readonly=True)[b"READ-ONLY"]
    client.logout()


def test_wrong_imap_password_fails_login(ms: MailServers) -> None:
    client = IMAPClient("127.0.0.1", port=ms.imap_port, ssl_context=ms.client_context(), timeout=5)
    with pytest.raises(LoginError, match="AUTHENTICATIONFAILED"):
        client.login("beta@bus.test", "nope")
    client.logout()
    assert ms.store.counts["imap.auth_failed"] == 1


def test_imap_login_before_starttls_is_refused() -> None:
    with MailServers("bus.test", USERS, imap_tls="starttls") as ms:
        client = IMAPClient("127.0.0.1", port=ms.imap_port, ssl=False, timeout=5)
        assert b"LOGINDISABLED" in client.capabilities()
        with pytest.raises(LoginError, match="PRIVACYREQUIRED"):
            client.login("beta@bus.test", "pw2")
        client.logout()


def test_authenticate_plain_and_quoted_passwords_work() -> None:
    users = {"gamma@bus.test": 'p "w\\ 3'}
    with MailServers("bus.test", users) as ms:
        imap(ms, "gamma@bus.test", 'p "w\\ 3').logout()
        client = IMAPClient("127.0.0.1", port=ms.imap_port, ssl_context=ms.client_context(), timeout=5)
        client.plain_login("gamma@bus.test", 'p "w\\ 3')
        client.logout()
        assert ms.store.counts["imap.auth"] == 2


def test_body_peek_leaves_seen_unset_and_body_sets_it(ms: MailServers) -> None:
    submit(ms, ["beta@bus.test"])
    client = imap(ms)
    client.select_folder("INBOX")
    [uid] = client.search(["UID", "1:*"])
    peeked = client.fetch([uid], ["BODY.PEEK[]", "FLAGS"])[uid]
    assert peeked[b"FLAGS"] == ()
    assert ms.store.messages("beta@bus.test")[0].flags == frozenset()
    read = client.fetch([uid], ["BODY[]"])[uid]
    assert read[b"BODY[]"] == peeked[b"BODY[]"]
    assert ms.store.messages("beta@bus.test")[0].flags == {"\\Seen"}
    client.logout()


def test_examine_never_sets_seen(ms: MailServers) -> None:
    submit(ms, ["beta@bus.test"])
    client = imap(ms)
    client.select_folder("INBOX", readonly=True)
    client.fetch([1], ["BODY[]"])
    assert ms.store.messages("beta@bus.test")[0].flags == frozenset()
    client.logout()


def test_size_is_known_before_download_and_bytes_come_back_exact(ms: MailServers) -> None:
    raw = b"Subject: 8bit \xc3\xa9\r\n\r\n" + b"line\r\n" * 1000 + b"{5}\r\n)\r\n"
    uid = ms.store.inject("beta@bus.test", raw)
    client = imap(ms)
    client.select_folder("INBOX")
    meta = client.fetch([uid], ["RFC822.SIZE", "INTERNALDATE", "FLAGS"])[uid]
    assert meta[b"RFC822.SIZE"] == len(raw)
    assert b"BODY[]" not in meta
    assert client.fetch([uid], ["BODY.PEEK[]"])[uid][b"BODY[]"] == raw
    client.logout()


def test_an_oversized_message_can_be_sized_without_downloading_it(ms: MailServers) -> None:
    huge = MESSAGE + b"x" * (8 * 1024 * 1024) + b"\r\n"
    uid = ms.store.inject("beta@bus.test", huge)
    client = imap(ms)
    client.select_folder("INBOX")
    assert client.fetch([uid], ["RFC822.SIZE"])[uid][b"RFC822.SIZE"] == len(huge)
    assert client.fetch([uid], ["BODY.PEEK[]"])[uid][b"BODY[]"] == huge
    client.logout()


def test_close_expunges_deleted_messages(ms: MailServers) -> None:
    for _ in range(2):
        ms.store.inject("beta@bus.test", MESSAGE)
    client = imap(ms)
    client.select_folder("INBOX")
    client.delete_messages([1])
    client.close_folder()
    assert [m.uid for m in ms.store.messages("beta@bus.test")] == [2]
    client.logout()


def test_header_sections_and_partial_fetches(ms: MailServers) -> None:
    uid = ms.store.inject("beta@bus.test", MESSAGE)
    client = imap(ms)
    client.select_folder("INBOX")
    got = client.fetch([uid], ["BODY.PEEK[HEADER.FIELDS (SUBJECT MESSAGE-ID)]", "BODY.PEEK[TEXT]<0.5>"])[uid]
    assert got[b"BODY[HEADER.FIELDS (SUBJECT MESSAGE-ID)]"] == (
        b"Subject: rate limit ignored\r\nMessage-ID: <01J.alpha@bus.test>\r\n\r\n"
    )
    assert got[b"BODY[TEXT]<0>"] == b"Fired"
    client.logout()


def test_append_to_sent_keeps_bytes_flags_and_date(ms: MailServers) -> None:
    client = imap(ms, "alpha@bus.test", "pw1")
    when = dt.datetime(2024, 5, 1, 12, 30, 5, tzinfo=dt.UTC)
    reply = client.append("Sent", MESSAGE, flags=[b"\\Seen"], msg_time=when)
    assert reply.startswith(b"[APPENDUID ")
    [stored] = ms.store.messages("alpha@bus.test", "Sent")
    assert stored.data == MESSAGE
    assert stored.flags == {"\\Seen"}
    assert stored.internaldate == when
    assert client.folder_status("Sent", ["MESSAGES", "UNSEEN"]) == {b"MESSAGES": 1, b"UNSEEN": 0}
    client.logout()


def test_list_create_and_append_to_a_missing_folder(ms: MailServers) -> None:
    client = imap(ms)
    names = {name: flags for flags, _, name in client.list_folders()}
    assert set(names) == {"INBOX", "Sent"}
    assert b"\\Sent" in names["Sent"]
    with pytest.raises(IMAPClientError, match="TRYCREATE"):
        client.append("Archive", MESSAGE)
    client.create_folder("Archive")
    client.append("Archive", MESSAGE)
    assert client.folder_status("Archive", ["MESSAGES"])[b"MESSAGES"] == 1
    client.logout()


def test_uid_search_from_a_checkpoint_follows_rfc_3501(ms: MailServers) -> None:
    for _ in range(3):
        ms.store.inject("beta@bus.test", MESSAGE)
    client = imap(ms)
    client.select_folder("INBOX")
    assert client.search(["UID", "2:*"]) == [2, 3]
    assert client.search("ALL") == [1, 2, 3]
    # "n:*" always names the last message, even past the end: filter uid > checkpoint.
    assert client.search(["UID", "4:*"]) == [3]
    client.logout()


def test_idle_wakes_within_100_ms_of_an_smtp_delivery(ms: MailServers) -> None:
    client = imap(ms)
    client.select_folder("INBOX")
    landed: list[float] = []
    ms.store.subscribe(lambda account, folder: landed.append(time.monotonic()))
    client.idle()
    sender = threading.Thread(target=submit, args=(ms, ["beta+thr-9f2a@bus.test"]))
    sender.start()
    responses = client.idle_check(timeout=3)
    woke = time.monotonic()
    sender.join()
    assert (1, b"EXISTS") in responses
    assert woke - landed[0] < 0.1
    client.idle_done()
    assert client.search(["UID", "1:*"]) == [1]
    client.logout()


def test_idle_delay_holds_back_the_notification(ms: MailServers) -> None:
    ms.store.idle_delay = 0.2
    client = imap(ms)
    client.select_folder("INBOX")
    client.idle()
    start = time.monotonic()
    ms.store.inject("beta@bus.test", MESSAGE)
    assert client.idle_check(timeout=0.1) == []
    assert (1, b"EXISTS") in client.idle_check(timeout=2)
    assert time.monotonic() - start >= 0.2
    client.idle_done()
    client.logout()


def test_changes_while_not_idling_arrive_with_the_next_command(ms: MailServers) -> None:
    client = imap(ms)
    client.select_folder("INBOX")
    ms.store.inject("beta@bus.test", MESSAGE)
    assert (1, b"EXISTS") in client.noop()[1]
    client.logout()


def test_uidvalidity_change_renumbers_and_drops_selected_sessions(ms: MailServers) -> None:
    for _ in range(3):
        ms.store.inject("beta@bus.test", MESSAGE)
    watcher = imap(ms)
    watcher.select_folder("INBOX")
    client = imap(ms)
    client.select_folder("INBOX")
    client.delete_messages([2])
    client.expunge()
    old = client.select_folder("INBOX")[b"UIDVALIDITY"]
    assert client.search("ALL") == [1, 3]
    client.logout()

    new = ms.store.set_uidvalidity("beta@bus.test")

    assert new != old
    assert [m.uid for m in ms.store.messages("beta@bus.test")] == [1, 2]
    with pytest.raises(IMAPClientAbortError):
        watcher.noop()
    watcher.shutdown()
    client = imap(ms)
    info = client.select_folder("INBOX")
    assert (info[b"UIDVALIDITY"], info[b"UIDNEXT"]) == (new, 3)
    assert client.search("ALL") == [1, 2]
    client.logout()


def test_injected_messages_and_flags_are_visible_in_the_store(ms: MailServers) -> None:
    bounce = b"From: MAILER-DAEMON@bus.test\r\nSubject: Undelivered\r\n\r\nsorry\r\n"
    uid = ms.store.inject("alpha@bus.test", bounce, flags=["\\Flagged"])
    client = imap(ms, "alpha@bus.test", "pw1")
    client.select_folder("INBOX")
    client.add_flags([uid], [b"\\Answered"])
    [stored] = ms.store.messages("alpha@bus.test")
    assert stored.data == bounce
    assert stored.flags == {"\\Flagged", "\\Answered"}
    client.logout()


def test_logins_and_commands_are_counted_for_batching_checks(ms: MailServers) -> None:
    for _ in range(5):
        ms.store.inject("beta@bus.test", MESSAGE)
    ms.store.reset_counts()
    client = imap(ms)
    client.select_folder("INBOX")
    uids = client.search(["UID", "1:*"])
    client.fetch(uids, ["RFC822.SIZE"])
    client.fetch(uids, ["BODY.PEEK[]"])
    client.logout()
    counts = ms.store.counts
    assert counts["imap.connect"] == 1
    assert counts["imap.auth"] == 1
    assert counts["imap.UID FETCH"] == 2
    assert counts["imap.UID SEARCH"] == 1


def test_imap_goes_down_and_comes_back_on_the_same_port(ms: MailServers) -> None:
    client = imap(ms)
    client.select_folder("INBOX")
    client.idle()
    port = ms.imap_port
    ms.stop_imap()
    with pytest.raises((IMAPClientAbortError, ConnectionError, OSError)):
        client.idle_check(timeout=2)
        client.idle_done()
    client.shutdown()
    with pytest.raises(ConnectionRefusedError):
        imap(ms)
    ms.start_imap()
    assert ms.imap_port == port
    imap(ms).logout()


# -- CONDSTORE (RFC 7162) -------------------------------------------------------------


def _conditional_store(client: IMAPClient, uid: int, modseq: int, keyword: str) -> tuple[str, list[Any]]:
    """``UID STORE uid (UNCHANGEDSINCE modseq) +FLAGS.SILENT (keyword)``: (tagged status, MODIFIED data)."""
    imap = client._imap
    imap.untagged_responses.pop("MODIFIED", None)
    typ, _ = imap.uid("STORE", str(uid), f"(UNCHANGEDSINCE {modseq})", "+FLAGS.SILENT", f"({keyword})")
    imap.untagged_responses.pop("FETCH", None)
    return typ, imap.untagged_responses.pop("MODIFIED", [])


def test_condstore_modseqs_grow_with_each_change_and_a_stale_conditional_store_is_refused(ms: MailServers) -> None:
    submit(ms, ["beta@bus.test"])
    client = imap(ms)
    assert b"CONDSTORE" in client.capabilities()
    info = client.select_folder("INBOX")
    first = client.fetch([1], ["MODSEQ"])[1][b"MODSEQ"][0]
    assert info[b"HIGHESTMODSEQ"] == first
    assert _conditional_store(client, 1, first, "$one") == ("OK", [])
    second = client.fetch([1], ["MODSEQ", "FLAGS"])[1]
    assert second[b"MODSEQ"][0] > first and b"$one" in second[b"FLAGS"]
    assert _conditional_store(client, 1, first, "$two") == ("OK", [b"1"])  # changed since: left as it was
    assert "$two" not in ms.store.messages("beta@bus.test")[0].flags
    client.add_flags([1], [b"$one"])  # a STORE that changes nothing changes no modseq
    assert client.fetch([1], ["MODSEQ"])[1][b"MODSEQ"][0] == second[b"MODSEQ"][0]
    client.logout()


def test_of_clients_racing_one_conditional_store_exactly_one_wins(ms: MailServers) -> None:
    submit(ms, ["beta@bus.test"])
    clients = [imap(ms) for _ in range(6)]
    for client in clients:
        client.select_folder("INBOX")
    modseq = clients[0].fetch([1], ["MODSEQ"])[1][b"MODSEQ"][0]
    start = threading.Barrier(len(clients))
    outcomes: list[tuple[str, list[Any]]] = [("", [])] * len(clients)

    def race(i: int) -> None:
        start.wait()
        outcomes[i] = _conditional_store(clients[i], 1, modseq, f"$won-{i}")

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [i for i, (typ, modified) in enumerate(outcomes) if typ == "OK" and not modified]
    assert len(winners) == 1
    assert {f for f in ms.store.messages("beta@bus.test")[0].flags if f.startswith("$won")} == {f"$won-{winners[0]}"}
    for client in clients:
        client.logout()


def test_a_server_without_condstore_offers_none_of_it(ms: MailServers) -> None:
    ms.store.condstore = False
    submit(ms, ["beta@bus.test"])
    client = imap(ms)
    try:
        assert b"CONDSTORE" not in client.capabilities()
        assert b"HIGHESTMODSEQ" not in client.select_folder("INBOX")
        with pytest.raises(IMAPClientError):
            client.fetch([1], ["MODSEQ"])
        with pytest.raises(imaplib.IMAP4.error, match="bad STORE modifier"):
            client._imap.uid("STORE", "1", "(UNCHANGEDSINCE 1)", "+FLAGS", "($x)")
    finally:
        client.logout()
