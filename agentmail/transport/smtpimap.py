"""The ``smtp+imap`` transport: submit with aiosmtplib, pull with imapclient (DESIGN §2).

Submission: TLS as configured (certificates verified; ``ca_file`` adds a private CA), AUTH
(a password, or an OAuth2 token by SASL XOAUTH2 or OAUTHBEARER, RFC 7628: ``auth`` in
bus.toml), all queued letters over one connection. A 250 moves a letter to sent; a 4xx, a
timeout or an unreachable server leaves it queued; a 5xx fails it with the server's words.

Pull: ``BODY.PEEK[]`` (never sets \\Seen, so a human's mail client is undisturbed), sizes
checked with RFC822.SIZE before download, batched FETCH, and a checkpoint of UIDVALIDITY and
the last committed UID. A changed UIDVALIDITY re-reads the mailbox; the spool drops what it
already holds. Nothing from a letter is ever put into an IMAP command but the Message-ID a
reply claim searches for, and only one of printable ASCII without quotes or backslashes.

Reply claims: keywords on the answered letter, added with a conditional STORE
(CONDSTORE's ``UNCHANGEDSINCE``), so of several machines of a platform exactly one answers
(``claims.ImapClaim`` says what the keywords mean).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import re
import time
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosmtplib
import imapclient
from imapclient.exceptions import IMAPClientAbortError, IMAPClientError

from ..config.credentials import Login, mailbox_login
from ..config.registry import Endpoint, Registry, is_loopback
from ..errors import AgentmailError, ConfigError, TransportError
from . import checkup
from .base import Checkpoint, Claimed, Incoming, OnResult, Outgoing, SubmitResult, Transport, opener_header
from .claim_marks import STALE_AFTER, ImapClaim, keeps_keywords
from .imap_io import command_tag, holds_copy, raise_unreachable, store_unless_modified, until_readable
from .imap_uids import uid_batches
from .logins import (
    LOGIN_TIMEOUT,
    SASL,
    TIMEOUT,
    bearer_token,
    endpoint_name,
    imap_connect,
    login_timed_out,
    offered,
    problem,
    smtp_client,
    smtp_login,
    tls_context,
)
from .sent_record import imap_copies, imap_pending

# What asyncio (a TLS error on a connection being closed) and imapclient would log is told by this
# module as a TransportError, or is noise: a NullHandler on their loggers keeps logging's last
# resort from printing it on a user's terminal (DESIGN §8). An application that configures
# logging still receives their records (a NullHandler stops no propagation).
for _logger in ("asyncio", "imapclient"):
    logging.getLogger(_logger).addHandler(logging.NullHandler())

T = TypeVar("T")
BATCH = 200
SESSION_TRUSTED = 10.0  # s: a session this fresh is reused without a NOOP (a close it saw says so)
IDLE_RENEW = 25 * 60  # RFC 2177: servers may drop an IDLE after 30 minutes


# The keywords a person's mail client can show or filter on (RFC 3501 keywords, "$" by custom).
KEYWORDS = {"verified": b"$AgentmailVerified", "quarantined": b"$AgentmailQuarantined"}
# A Message-ID fit to search for: printable ASCII in angle brackets, no quote, no backslash.
SEARCHABLE_ID = re.compile(r"<[!#-\[\]-~]{1,250}>")
NO_CONDSTORE = (
    "the IMAP server does not offer CONDSTORE (RFC 7162): replies are claimed per machine only; "
    "run this platform on one machine, or on a server with CONDSTORE (Dovecot has it)"
)


class SmtpImapTransport(Transport):
    name = "imap"
    mails_people = True
    CLAIM_PLACES = 1024  # the claimed letters whose place a process remembers (for the mark)

    def __init__(
        self,
        smtp: Endpoint,
        imap: Endpoint,
        login: Login,
        *,
        ca_file: str | None = None,
        sent_folder: str | None = None,
        poll_interval: float | None = None,
        auth: str = "password",
        platform: str = "",
    ) -> None:
        for endpoint in (smtp, imap):
            if endpoint.tls == "none" and not is_loopback(endpoint.host):
                raise ConfigError(f"plaintext to {endpoint_name(endpoint)} is refused: tls = none is only for loopback")
        self.smtp, self.imap, self.login, self.auth = smtp, imap, login, auth
        self.platform = platform  # whose letters these are: a claim on one of them is made on its sent copy
        self._imap_offered: tuple[bytes, ...] = ()  # CAPABILITY before the last IMAP login
        self.context = tls_context(ca_file)
        self.sent_folder = sent_folder  # None: find the \\Sent folder; "": copy nowhere
        self._found_sent: str | None = None
        self._sent_ready = ""  # the sent folder this transport has seen exist: no LIST per copy
        self._looked: tuple[Any, int, str, int] | None = None  # (connection, tag number, UIDVALIDITY, UIDNEXT)
        self.poll_interval = poll_interval
        self._client: imapclient.IMAPClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._smtp_session: aiosmtplib.SMTP | None = None
        self._smtp_answered = 0.0  # time.monotonic() of the session's last reply
        self._uidvalidity: str = ""
        self._fetched_to = 0  # the UIDNEXT the last fetch read up to, once it had read them all
        self._copy_failures: dict[str, str] = {}
        # Reply claims: their clock (injectable: tests never sleep) and the takeover time; what
        # the claim being made could not do (no CONDSTORE: in its Claimed); round trips counted.
        self.now = time.time
        self.stale_after = STALE_AFTER
        self.claim_warning: str | None = None
        self.claim_commands = 0
        self._claim_places: dict[str, tuple[str, str, int]] = {}  # Message-ID -> (folder, UIDVALIDITY, UID)

    @property
    def keeps_sent_copy(self) -> bool:
        return self.sent_folder != ""  # None: the folder the server marks \\Sent

    @classmethod
    def from_registry(cls, registry: Registry, platform: str, home: Path) -> SmtpImapTransport:
        bus = registry.bus
        assert bus.smtp is not None and bus.imap is not None
        entry = registry.get(platform)
        return cls(
            bus.smtp,
            bus.imap,
            mailbox_login(home, platform, entry.address),
            ca_file=bus.ca_file,
            sent_folder=bus.sent_folder,
            poll_interval=bus.poll_interval,
            auth=registry.auth_of(platform),
            platform=platform,
        )

    # --- submission ------------------------------------------------------------------------

    def submit(self, messages: Sequence[Outgoing], on_result: OnResult | None = None) -> list[SubmitResult]:
        if not messages:
            return []
        self._copy_failures = {}
        results = self._run(self._submit(messages, on_result or (lambda _result: None)))
        if self.sent_folder != "":
            self._copy_failures = self._copy_to_sent(
                [m for m, r in zip(messages, results, strict=True) if r.status == "sent" and not m.copy_later]
            )
        return results

    def copy_sent(self, sent: Sequence[Outgoing], *, look_first: bool = False) -> dict[str, str]:
        if look_first and sent and self.sent_folder != "":
            try:
                client = self._connect()
                folder = self._sent_folder(client)
                if folder is not None and client.folder_exists(folder):
                    client.select_folder(folder, readonly=True)
                    sent = [item for item in sent if not holds_copy(client, item.raw)]
            except (IMAPClientError, OSError, AgentmailError) as exc:
                if isinstance(exc, OSError | IMAPClientAbortError):
                    self._drop()
                    raise_unreachable(self.imap, exc)
                why = f"not copied to the sent folder on {endpoint_name(self.imap)}: {exc.__class__.__name__}: {exc}"
                return {item.key: why[:300] for item in sent}
        return self._copy_to_sent(list(sent), later=True)

    def copy_failures(self) -> dict[str, str]:
        return dict(self._copy_failures)

    def _smtp_client(self) -> aiosmtplib.SMTP:
        return smtp_client(self.smtp, self.context)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run on this transport's own event loop, which outlives a call so a session can too."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coroutine)

    async def _session(self) -> aiosmtplib.SMTP:
        """The authenticated session, reused while the server keeps it open. A server that closed
        it (a restart, its idle timeout) sent a FIN the loop reads here without a round trip; one
        quiet for longer than SESSION_TRUSTED may have been cut without one, so a NOOP tells."""
        client = self._smtp_session
        if client is not None:
            for _ in range(3):  # the read of an EOF, then the close it schedules (TLS: one more)
                await asyncio.sleep(0)
            if client.is_connected and await self._still_answers(client):
                return client
            client.close()
        self._smtp_session = None
        client = self._smtp_client()
        await smtp_login(client, self.smtp, self.login, self.auth)
        client.timeout = TIMEOUT  # the handshake was short; a large DATA may take longer
        self._smtp_session = client
        self._smtp_answered = time.monotonic()
        return client

    async def _still_answers(self, client: aiosmtplib.SMTP) -> bool:
        """A reply under SESSION_TRUSTED ago vouches for the session; an older one, a NOOP."""
        if time.monotonic() - self._smtp_answered < SESSION_TRUSTED:
            return True
        try:
            await client.noop()
        except (TimeoutError, aiosmtplib.SMTPException, OSError):
            return False
        self._smtp_answered = time.monotonic()
        return True

    async def _submit(self, messages: Sequence[Outgoing], on_result: OnResult) -> list[SubmitResult]:
        results: list[SubmitResult] = []

        def record(result: SubmitResult) -> None:
            results.append(result)
            on_result(result)

        try:
            client = await self._session()
        except TransportError as exc:  # transient: queue; a ConfigError propagates (nothing to retry)
            for m in messages:
                record(SubmitResult(m.key, "queued", str(exc)))
            return results
        for index, item in enumerate(messages):
            try:
                refused, _response = await client.sendmail(
                    item.envelope.mail_from, list(item.envelope.rcpt_to), item.raw
                )
            except aiosmtplib.SMTPRecipientsRefused as exc:
                record(self._refused_all(item, [(r.recipient, r.code, r.message) for r in exc.recipients]))
                await self._reset(client)
            except aiosmtplib.SMTPResponseException as exc:
                status = "failed" if 500 <= exc.code < 600 else "queued"
                record(SubmitResult(item.key, status, f"{exc.code} {exc.message}"))
                await self._reset(client)
            except (TimeoutError, aiosmtplib.SMTPException, OSError) as exc:
                client.close()
                self._smtp_session = None
                why = f"the connection to {endpoint_name(self.smtp)} broke: {exc.__class__.__name__}"
                for m in messages[index:]:
                    record(SubmitResult(m.key, "queued", why))
                return results
            else:
                self._smtp_answered = time.monotonic()
                partial = tuple((addr, f"{code} {msg}") for addr, (code, msg) in refused.items())
                record(SubmitResult(item.key, "sent", "250 accepted", partial))
        return results

    @staticmethod
    def _refused_all(item: Outgoing, refusals: list[tuple[str, int, str]]) -> SubmitResult:
        detail = "; ".join(f"{addr}: {code} {msg}" for addr, code, msg in refusals)
        permanent = all(500 <= code < 600 for _, code, _ in refusals)
        return SubmitResult(
            item.key, "failed" if permanent else "queued", detail, tuple((a, f"{c} {m}") for a, c, m in refusals)
        )

    @staticmethod
    async def _reset(client: aiosmtplib.SMTP) -> None:
        try:
            await client.rset()
        except aiosmtplib.SMTPException:
            pass

    def _sent_folder(self, client: imapclient.IMAPClient) -> str | None:
        """``sent_folder`` from bus.toml, else the folder the server marks ``\\Sent`` (RFC 6154)."""
        if self.sent_folder is not None:
            return self.sent_folder or None
        if self._found_sent is None:
            found = ""
            if b"SPECIAL-USE" in client.capabilities():
                for flags, _delimiter, name in client.list_folders():
                    if b"\\Sent" in flags:
                        found = name
                        break
            self._found_sent = found
        return self._found_sent or None

    def _sent_exists(self, client: imapclient.IMAPClient, folder: str, *, make: bool = False) -> bool:
        """Does the sent folder exist? Asked once per transport (again after a failed copy or a
        read that found it deleted), not before each copy or read; ``make``: create it if not."""
        if self._sent_ready != folder:
            if not client.folder_exists(folder):
                if not make:
                    return False
                client.create_folder(folder)
            self._sent_ready = folder
        return True

    def _copy_to_sent(self, sent: list[Outgoing], *, later: bool = False) -> dict[str, str]:
        """So a human sees both directions in a mail client. A failure here never unsends: the
        letters not copied are returned (key -> why) for the client to record. ``later``: copies
        made after their submission, which can wait for a server that cannot be reached now
        (a TransportError; some of them may have been copied before it broke)."""
        if not sent or self.sent_folder == "":
            return {}
        copied = 0
        folder: str | None = self.sent_folder or "the sent folder"
        try:
            client = self._connect()
            folder = self._sent_folder(client)
            if folder is None:
                return {}
            self._sent_exists(client, folder, make=True)
            if len(sent) > 1 and b"MULTIAPPEND" in client.capabilities():
                # One command, one round trip for the whole flush (RFC 3502): all copied or
                # none, so a refusal leaves every letter of it noted as not copied.
                client.multiappend(folder, [{"msg": item.raw, "flags": (imapclient.SEEN,)} for item in sent])
                copied = len(sent)
            for item in sent[copied:]:
                client.append(folder, item.raw, flags=(imapclient.SEEN,))
                copied += 1
        except (IMAPClientError, OSError, AgentmailError) as exc:
            self._sent_ready = ""  # deleted meanwhile? the next copy looks again
            if isinstance(exc, OSError | IMAPClientAbortError):
                self._drop()  # the connection is gone: the next IMAP command opens a fresh one
                if later:
                    raise_unreachable(self.imap, exc)
            why = f"not copied to {folder} on {endpoint_name(self.imap)}: {exc.__class__.__name__}: {exc}"[:300]
            return {item.key: why for item in sent[copied:]}
        return {}

    def openers_since(self, cutoff_ms: int) -> dict[str, int] | None:
        """From the sent folder every machine of the platform copies to: one SEARCH SINCE (the
        window's day and the one before: dates have no hours) and one FETCH of a few header
        fields of what it found. None when there is no sent folder or the server cannot be
        asked now (the quota then counts this home's letters alone)."""
        if self.sent_folder == "":
            return None
        try:
            client = self._connect()
            folder = self._sent_folder(client)
            if folder is None or not client.folder_exists(folder):
                return None if folder is None else {}
            client.select_folder(folder, readonly=True)
            since = datetime.datetime.fromtimestamp(cutoff_ms / 1000, datetime.UTC).date() - datetime.timedelta(days=1)
            uids = client.search(["SINCE", since])
            fields = "BODY.PEEK[HEADER.FIELDS (MESSAGE-ID IN-REPLY-TO X-AGENTMAIL-TYPE DATE)]"
            rows = client.fetch(uids, [fields]) if uids else {}
        except (IMAPClientError, OSError, AgentmailError) as exc:
            if isinstance(exc, OSError | IMAPClientAbortError):
                self._drop()
            return None
        found: dict[str, int] = {}
        for row in rows.values():
            header = next((v for k, v in row.items() if k.startswith(b"BODY[HEADER")), None)
            opener = opener_header(bytes(header)) if isinstance(header, bytes | bytearray) else None
            if opener is not None and opener[1] >= cutoff_ms:
                found[opener[0]] = opener[1]
        return found

    def sent_copies(self, checkpoint: str | None, max_size: int) -> Iterator[tuple[list[Incoming], str]]:
        with self._imap_failures(" reading the sent folder"):
            folder = None if self.sent_folder == "" else self._sent_folder(self._connect())
            if folder is not None:
                client = self._connect()
                if not self._sent_exists(client, folder):
                    return
                if not self.sent_pending(checkpoint, refused=True):
                    return  # one STATUS, no EXAMINE: the INBOX look the fetch takes next still stands
                try:
                    yield from imap_copies(client, folder, checkpoint, max_size)
                except IMAPClientError as exc:
                    if isinstance(exc, IMAPClientAbortError) or client.folder_exists(folder):
                        raise
                    self._sent_ready = ""  # deleted since it was seen: nothing to read; a copy makes it

    def sent_pending(self, checkpoint: str | None, *, refused: bool = False) -> bool:
        """``refused``: what a NO to the STATUS says (a folder known to be there: read it as
        before, whose refusal then says why; a STATUS refused is no answer that nothing is new)."""
        looked = self._looked
        standing = looked is not None and looked[0] is self._client and looked[1] == command_tag(looked[0])
        try:
            return self._sent_pending(checkpoint, refused)
        finally:
            # LIST and STATUS leave the selected mailbox as it was (RFC 3501 §6.3.10): a look
            # at INBOX that stood before them stands after, so the fetch needs no new EXAMINE.
            if looked is not None and standing and self._looked is looked and looked[0] is self._client:
                self._looked = (looked[0], command_tag(looked[0]), looked[2], looked[3])

    def _sent_pending(self, checkpoint: str | None, refused: bool) -> bool:
        with self._imap_failures(" looking at the sent folder"):
            folder = None if self.sent_folder == "" else self._sent_folder(self._connect())
            try:
                return folder is not None and imap_pending(self._connect(), folder, checkpoint)
            except IMAPClientAbortError:
                raise  # the connection is gone: translated above
            except IMAPClientError:
                return refused  # a NO: no such folder yet (nothing sent), nothing to read

    # --- pulling ---------------------------------------------------------------------------

    def _connect(self) -> imapclient.IMAPClient:
        if self._client is not None:
            return self._client
        client = None
        try:
            client = imap_connect(self.imap, self.context)
            client.socket().settimeout(LOGIN_TIMEOUT)  # an auth penalty is a refusal coming late
            try:
                self._imap_login(client)
            except TimeoutError as exc:
                raise login_timed_out(self.imap) from exc
            client.socket().settimeout(TIMEOUT)
        except (TimeoutError, IMAPClientError, OSError, AgentmailError) as exc:
            if client is not None:
                try:
                    client.shutdown()
                except Exception:
                    pass
            raise problem(self.imap, "imap", exc, self.login, self.auth) from exc
        self._client = client
        return client

    def _imap_login(self, client: imapclient.IMAPClient) -> None:
        """LOGIN with the password, or AUTHENTICATE with a token asked for now (imapclient's
        ``oauth2_login`` / ``oauthbearer_login``), once the server says it takes that mechanism."""
        self._imap_offered = tuple(client.capabilities())
        if self.auth not in SASL:
            client.login(self.login.username, self.login.secret())
            return
        name = SASL[self.auth]
        if b"AUTH=" + name.encode() not in self._imap_offered:
            methods = [c.decode("ascii", "replace")[5:] for c in self._imap_offered if c.startswith(b"AUTH=")]
            raise ConfigError(
                f"{endpoint_name(self.imap)} does not offer AUTHENTICATE {name} (it offers {offered(methods)}): "
                f"set auth to what the server takes ('agentmail bus set auth ...')"
            )
        token = bearer_token(self.login, self.login.secret(), self.auth)
        if self.auth == "xoauth2":
            client.oauth2_login(self.login.username, token)
        else:
            client.oauthbearer_login(self.login.username, token)

    def _select(self) -> tuple[str, int]:
        """(UIDVALIDITY, UIDNEXT) of INBOX, read-only so no flag ever changes."""
        client = self._connect()
        info = client.select_folder("INBOX", readonly=True)
        validity = str(info.get(b"UIDVALIDITY", b""))
        self._uidvalidity = validity
        uidnext = int(info.get(b"UIDNEXT", 0) or 0)
        self._looked = (client, command_tag(client), validity, uidnext)
        return validity, uidnext

    def _last_look(self, checkpoint: str | None) -> tuple[str, int] | None:
        """The look a sync's ``pending`` just took, if no command went since (the same
        connection, INBOX still selected read-only) and it saw letters past ``checkpoint``:
        the fetch then needs no second EXAMINE. A look that saw nothing is never reused
        (letters may have come since: ``wait`` looks, then IDLEs)."""
        looked, self._looked = self._looked, None
        if looked is None or looked[0] is not self._client or looked[1] != command_tag(looked[0]):
            return None
        _, _, validity, uidnext = looked
        return (validity, uidnext) if uidnext > Checkpoint.parse(checkpoint).under(validity).last + 1 else None

    def tip(self) -> str:
        """A checkpoint at the INBOX's current end (what a fetch from it would skip: everything)."""
        validity, uidnext = self._select()
        return str(Checkpoint(validity, max(uidnext - 1, 0)))

    @contextmanager
    def _imap_failures(self, while_: str = "") -> Iterator[None]:
        """An IMAP or socket error in the block, or a server's answer that is no number where
        one must stand (UIDNEXT, RFC822.SIZE: ValueError): drop the connection (the next call
        opens a fresh one) and raise it as a TransportError, its cause kept."""
        try:
            yield
        except AgentmailError:
            raise  # already translated (a TransportError is an OSError too): never wrapped twice
        except (TimeoutError, IMAPClientError, OSError, ValueError) as exc:
            self._drop()
            raise TransportError(
                f"IMAP {endpoint_name(self.imap)} failed{while_}: {exc.__class__.__name__}: {exc}"
            ) from exc

    def fetch(self, checkpoint: str | None, max_size: int) -> Iterator[list[Incoming]]:
        with self._imap_failures():
            yield from self._fetch(checkpoint, max_size)

    def _fetch(self, checkpoint: str | None, max_size: int) -> Iterator[list[Incoming]]:
        self._fetched_to = 0
        validity, uidnext = self._last_look(checkpoint) or self._select()
        # The server renumbered the mailbox (new UIDVALIDITY): read it all, the spool drops duplicates.
        last = Checkpoint.parse(checkpoint).under(validity).last
        if uidnext and uidnext <= last + 1:
            self._fetched_to = uidnext
            return
        for chunk, sizes, bodies in uid_batches(self._connect(), last, max_size, BATCH, uidnext):
            batch = []
            for uid in chunk:
                size = int(sizes.get(uid, {}).get(b"RFC822.SIZE", 0))
                if uid in bodies:
                    raw = bodies[uid].get(b"BODY[]")
                    if raw is None:
                        continue  # expunged between the two FETCHes
                    batch.append(Incoming(str(uid), bytes(raw), size))
                elif uid in sizes:
                    batch.append(Incoming(str(uid), None, size))
            if batch:
                yield batch
        self._fetched_to = uidnext  # every UID below it was searched: what SEARCH missed is expunged

    def advance(self, checkpoint: str | None, committed: Sequence[Incoming]) -> str | None:
        seen = Checkpoint.parse(checkpoint).under(self._uidvalidity).past(committed)
        # The close of a whole fetch (nothing committed with it) also passes UIDs expunged
        # before anyone read them: UIDNEXT stays above them, and they would look pending forever.
        return str(seen if committed else seen.through(self._fetched_to))

    def mark(self, outcomes: Mapping[str, str]) -> None:
        """Set ``$AgentmailVerified`` / ``$AgentmailQuarantined`` on the server's copies: a
        writable SELECT only for this (it changes no flag by itself), UID STORE +FLAGS.SILENT of
        the keyword alone, so \\Seen stays as it was; the next look selects read-only again.
        Skipped where the server keeps no keywords (PERMANENTFLAGS without \\*: doctor says so)."""
        if not outcomes:
            return
        try:
            client = self._connect()
            info = client.select_folder("INBOX", readonly=False)
            if str(info.get(b"UIDVALIDITY", b"")) != self._uidvalidity or not keeps_keywords(info):
                return  # renumbered meanwhile: these keys name other letters now
            for outcome, keyword in KEYWORDS.items():
                uids = [int(key) for key, got in outcomes.items() if got == outcome and key.isdigit()]
                if uids:
                    client.add_flags(uids, [keyword], silent=True)
        except (TimeoutError, IMAPClientError, OSError, AgentmailError):
            self._drop()  # a mark is a courtesy: the letters are filed whatever happens here
        # INBOX stays selected read-write: every later look at it EXAMINEs first (``_select``).

    # --- reply claims -----------------------------------------------------------

    def claim_reply(self, message_id: str, key: str, holder: str) -> Claimed:
        self.claim_warning = None  # what this claim could not do, set by _claim
        with self._imap_failures(" while claiming the reply on the server"):
            who = self._claim(message_id, key, holder, sent=False)
        return Claimed(who, None if who is not None else self.claim_warning)

    def reply_sent(self, message_id: str, key: str, holder: str) -> bool:
        try:
            with self._imap_failures():
                return self._claim(message_id, key, holder, sent=True) is None
        except TransportError:
            return True  # the reply is out: unmarked, its claim can be taken over after the stated time (DESIGN)

    def release_reply(self, message_id: str, key: str, holder: str) -> None:
        try:
            with self._imap_failures():
                self._claim(message_id, key, holder, sent=True, kind="f")
        except TransportError:
            pass  # not freed: taken over after the stated time

    def _claim(self, message_id: str, key: str, holder: str, *, sent: bool, kind: str = "s") -> str | None:
        """Claim (or, ``sent``, mark answered) ``key`` on the letter ``message_id``: in INBOX,
        else in the sent folder. None: ours (or the server holds no such letter, or offers no
        CONDSTORE: ``claim_warning`` says so); a string: who holds it (``sent``: taken over)."""
        client = self._connect()
        if b"CONDSTORE" not in client.capabilities():
            self.claim_warning = NO_CONDSTORE
            return None
        if not SEARCHABLE_ID.fullmatch(message_id.strip()):
            return None  # not a Message-ID one can search for: the per-home claim alone holds
        uid = self._claim_place(client, message_id.strip())
        if uid is None:
            return None  # not on the server (deleted, or a letter never copied to sent)
        for _ in range(32):  # each round wins, loses, or sees the letter changed meanwhile
            self.claim_commands += 1
            got = client.fetch([uid], ["FLAGS", "MODSEQ"]).get(uid)
            if got is None:
                return None  # expunged meanwhile
            modseq = got[b"MODSEQ"][0] if isinstance(got.get(b"MODSEQ"), tuple) else got.get(b"MODSEQ")
            state = ImapClaim(key, got.get(b"FLAGS", ()), now=self.now(), stale_after=self.stale_after)
            if sent:
                keyword = state.sent_keyword(holder, kind)
                if keyword is None:
                    return state.who()
                keywords = [keyword]
            else:
                who, keywords = state.decide(holder)
                if who is not None or not keywords:
                    return who
            self.claim_commands += 1
            if store_unless_modified(client, uid, int(modseq or 0), keywords, self.imap):
                return None
        return "another machine"

    def _claim_place(self, client: imapclient.IMAPClient, message_id: str) -> int | None:
        """Select (writable) the folder holding ``message_id`` and return its UID there (the
        lowest, so racing machines pick the same copy); None when no folder holds it. A letter
        of this platform's (its Message-ID says so: agentmail makes it) is looked for in the sent
        folder first: only this platform writes there, while anyone can put a letter reusing its
        Message-ID in the INBOX after a machine claimed on the sent copy. The place is remembered
        (under the folder's UIDVALIDITY): the mark after sending skips the SEARCH. The folder
        stays selected: every other IMAP step here selects what it reads first."""
        folders = ["INBOX"]
        sent_folder = self._sent_folder(client)
        if sent_folder:
            mine = self.platform and f".{self.platform}@" in message_id
            folders.insert(0 if mine else 1, sent_folder)
        known = self._claim_places.get(message_id)
        if known is not None:
            folders = [known[0]]
        for folder in folders:
            self.claim_commands += 1
            info = client.select_folder(folder, readonly=False)
            if not keeps_keywords(info):
                self.claim_warning = "the IMAP server keeps no keywords: replies are claimed per machine only"
                return None
            validity = str(info.get(b"UIDVALIDITY", b""))
            if known is not None and known[1] == validity:
                return known[2]
            self.claim_commands += 1
            hits = [int(u) for u in client.search(["HEADER", "Message-ID", message_id])]
            if hits:
                if len(self._claim_places) >= self.CLAIM_PLACES:  # a long-lived process (watch, mcp): the oldest go
                    del self._claim_places[next(iter(self._claim_places))]
                self._claim_places[message_id] = (folder, validity, min(hits))
                return min(hits)
        return None

    def wait(self, checkpoint: str | None, timeout: float) -> str | None:
        with self._imap_failures(" while waiting"):
            return self._wait(checkpoint, timeout)

    def pending(self, checkpoint: str | None) -> bool:
        with self._imap_failures():
            return self._pending(checkpoint)

    def _pending(self, checkpoint: str | None) -> bool:
        validity, uidnext = self._select()
        seen = Checkpoint.parse(checkpoint)
        return validity != seen.validity or uidnext > seen.last + 1

    def _wait(self, checkpoint: str | None, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        if self._pending(checkpoint):
            return "pending"
        client = self._connect()
        if self.poll_interval or b"IDLE" not in client.capabilities():
            interval = self.poll_interval or 1.0
            while time.monotonic() < deadline:
                time.sleep(min(interval, max(deadline - time.monotonic(), 0)))
                client.noop()
                if self._pending(checkpoint):
                    return "poll"
            return None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            client.idle()
            try:
                until_readable(client, min(left, IDLE_RENEW))
            finally:
                _done, responses = client.idle_done()  # whole lines, read in blocking mode
            if any(isinstance(r, tuple) and len(r) > 1 and r[1] in (b"EXISTS", b"RECENT") for r in responses):
                return "idle"

    # --- lifecycle -------------------------------------------------------------------------

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.shutdown()
            except Exception:
                pass

    def close(self) -> None:
        session, self._smtp_session = self._smtp_session, None
        if session is not None and self._loop is not None:
            connection = session.transport
            try:
                self._loop.run_until_complete(session.quit())
            except Exception:
                session.close()
            if isinstance(connection, asyncio.Transport):
                # Closing a TLS transport only schedules the socket's close on the loop: abort
                # it and let the loop turn, or closing the loop leaves the socket open.
                connection.abort()
                self._loop.run_until_complete(asyncio.sleep(0))
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        client, self._client = self._client, None
        if client is not None:
            try:
                client.logout()
            except Exception:
                try:
                    client.shutdown()
                except Exception:
                    pass

    def doctor(self, address: str = "") -> list[tuple[str, bool, str]]:
        """Connectivity checks for ``agentmail doctor`` (``checkup``); never includes a secret."""
        return checkup.doctor(self, address)

    def __repr__(self) -> str:
        return (
            f"SmtpImapTransport(smtp={endpoint_name(self.smtp)}, imap={endpoint_name(self.imap)}, login={self.login!r})"
        )
