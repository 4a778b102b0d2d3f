"""A compact IMAP4rev1 server over a :class:`MailStore`, for imapclient/imaplib clients.

Supported: CAPABILITY NOOP LOGOUT STARTTLS LOGIN AUTHENTICATE(PLAIN XOAUTH2 OAUTHBEARER) SELECT EXAMINE
CREATE LIST LSUB STATUS APPEND SUBSCRIBE UNSUBSCRIBE NAMESPACE ID ENABLE IDLE CHECK
CLOSE UNSELECT EXPUNGE SEARCH FETCH STORE COPY MOVE and their UID forms, literals
(``{n}`` and ``{n+}``) both ways, with extensions IDLE, UIDPLUS, MOVE, UNSELECT,
LITERAL+, SASL-IR, SPECIAL-USE, CONDSTORE (RFC 7162: HIGHESTMODSEQ at SELECT, FETCH MODSEQ, STORE
(UNCHANGEDSINCE n) answered [MODIFIED uids] for what changed since; ``store.condstore = False``
takes it away). Everything else is answered BAD, loudly.

Behaviour worth knowing in tests:
- In STARTTLS mode LOGIN/AUTHENTICATE are refused until STARTTLS (LOGINDISABLED).
- AUTH= lists ``store.mechanisms``; a refused token gets RFC 7628's error challenge (``+ <base64
  JSON>``), the client's next line, then NO [AUTHENTICATIONFAILED].
- ``UID n:*`` includes the last message even when its UID is below ``n`` (RFC 3501).
- Changing a folder's UIDVALIDITY disconnects sessions that have it selected (BYE).
- IDLE pushes ``* n EXISTS`` as soon as a delivery lands (after ``store.idle_delay``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime as dt
import logging
import re
import ssl
from collections.abc import Awaitable, Callable

from .imapquery import compile_search, parse_fetch_items, render_fetch_item
from .imapwire import (
    LITERAL_AT_END,
    ParseError,
    Token,
    flag_list,
    in_ranges,
    literal_marker,
    parse_internaldate,
    parse_sequence_set,
    quote,
    tokenize,
)
from .smtp import TOKEN_ERROR, TlsMode, token_login
from .store import MailStore, StoredMessage

log = logging.getLogger(__name__)

_MAX_LITERAL = 64 * 1024 * 1024
_SYSTEM_FLAGS = "\\Answered \\Flagged \\Deleted \\Seen \\Draft"
_SPECIAL_USE = {"Sent": "\\Sent", "Drafts": "\\Drafts", "Trash": "\\Trash", "Junk": "\\Junk"}
_EXTENSIONS = "IMAP4rev1 LITERAL+ SASL-IR ID ENABLE IDLE NAMESPACE UIDPLUS MOVE UNSELECT SPECIAL-USE MULTIAPPEND"
# Commands whose untagged results carry sequence numbers: RFC 3501 forbids sending
# EXPUNGE responses after them, since numbers would shift under the client.
_NO_EXPUNGE_AFTER = {"FETCH", "STORE", "SEARCH"}


def _astring(token: Token) -> str:
    """An atom, quoted string or literal as text."""
    if isinstance(token, list):
        raise _Bad("expected a string, got a list")
    return token.decode("utf-8", "replace") if isinstance(token, bytes) else token


class _No(Exception):
    """Answer the command with NO and this text."""


class _Bad(Exception):
    """Answer the command with BAD and this text."""


class _Disconnect(Exception):
    """End the session now (the BYE, if any, has been sent)."""


class ImapServer:
    """Listens on ``host:port`` on the running loop, one :class:`_Session` per client."""

    def __init__(
        self,
        store: MailStore,
        *,
        tls: TlsMode,
        ssl_context: ssl.SSLContext,
        host: str = "127.0.0.1",
    ) -> None:
        self.store = store
        self.tls = tls
        self.ssl_context = ssl_context
        self.host = host
        self.port = 0
        self._server: asyncio.Server | None = None
        self._sessions: set[_Session] = set()

    async def start(self) -> int:
        """Listen (on the previous port after a stop); returns the port."""
        self._server = await asyncio.start_server(
            self._serve,
            host=self.host,
            port=self.port,
            ssl=self.ssl_context if self.tls == "implicit" else None,
            limit=1024 * 1024,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        """Stop listening and drop every session."""
        if self._server is None:
            return
        self._server.close()
        for session in list(self._sessions):
            session.writer.transport.abort()
        await self._server.wait_closed()
        self._server = None

    @property
    def running(self) -> bool:
        return self._server is not None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        session = _Session(self, reader, writer)
        self._sessions.add(session)
        try:
            await session.run()
        finally:
            self._sessions.discard(session)


Handler = Callable[["_Session", list[Token], bool], Awaitable[str]]


class _Session:
    def __init__(self, server: ImapServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.store = server.store
        self.reader = reader
        self.writer = writer
        self.tls_active = server.tls == "implicit"
        self.account: str | None = None
        self.selected: str | None = None
        self.readonly = False
        self.uidvalidity = 0
        self.view: list[int] = []  # UIDs as this client knows them; index = seq - 1
        self.uidnext_seen = 1
        self.condstore_on = False  # RFC 7162 §3.1: MODSEQ in FETCH responses once the client used CONDSTORE
        self._changed = asyncio.Event()
        # Work that must wait until the tagged OK is out (TLS upgrade, hang-up).
        self._after_ok: Callable[[], Awaitable[None]] | None = None

    # -- plumbing ---------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()

        def on_change(account: str, folder: str) -> None:
            if account == self.account and folder == self.selected:
                try:
                    loop.call_soon_threadsafe(self._changed.set)
                except RuntimeError:  # the loop is already closed
                    pass

        unsubscribe = self.store.subscribe(on_change)
        self.store.bump("imap.connect")
        try:
            await self._send(b"* OK [CAPABILITY " + self._capabilities() + b"] test IMAP ready")
            while True:
                command = await self._read_command()
                if command is None:
                    return
                await self._dispatch(*command)
        except (_Disconnect, ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            unsubscribe()
            self.writer.transport.abort()

    async def _send(self, line: bytes) -> None:
        self.writer.write(line + b"\r\n")
        await self.writer.drain()

    async def _read_command(self) -> tuple[bytes, list[bytes]] | None:
        """One command with its literals, or ``None`` at end of stream."""
        parts: list[bytes] = []
        literals: list[bytes] = []
        while True:
            line = await self.reader.readline()
            if not line.endswith(b"\n"):
                return None
            line = line.rstrip(b"\r\n")
            if b"\x00" in line:
                raise _Disconnect  # NUL is illegal outside literals; nothing sane follows
            m = LITERAL_AT_END.search(line)
            if m is None:
                parts.append(line)
                return b"".join(parts), literals
            size = int(m[1])
            if size > _MAX_LITERAL:
                await self._send(b"* BYE literal too large")
                raise _Disconnect
            parts.append(line[: m.start()] + literal_marker(len(literals)))
            if not m[2]:  # synchronising literal: the client waits for our go-ahead
                await self._send(b"+ Ready for literal data")
            literals.append(await self.reader.readexactly(size))

    async def _dispatch(self, line: bytes, literals: list[bytes]) -> None:
        tag = b"*"
        try:
            tokens = tokenize(line, literals)
            if len(tokens) < 2 or not all(isinstance(t, str) for t in tokens[:2]):
                raise _Bad("missing tag or command")
            tag = str(tokens[0]).encode()
            name = str(tokens[1]).upper()
            args = tokens[2:]
            uid = name == "UID"
            if uid:
                if not args or not isinstance(args[0], str):
                    raise _Bad("UID needs a command")
                name = args[0].upper()
                args = args[1:]
                if name not in ("FETCH", "SEARCH", "STORE", "COPY", "MOVE", "EXPUNGE"):
                    raise _Bad(f"UID {name} is not a command")
            self.store.bump("imap." + ("UID " if uid else "") + name)
            handler = self._handler(name)
            # Not before IDLE: imapclient insists its continuation comes first.
            if self.selected is not None and name not in ("IDLE", "LOGOUT"):
                await self._sync(expunges=False)
            text = await handler(self, args, uid)
            if self.selected is not None and name != "LOGOUT":
                await self._sync(expunges=uid or name not in _NO_EXPUNGE_AFTER)
            await self._send(tag + b" OK " + text.encode())
            after, self._after_ok = self._after_ok, None
            if after is not None:
                await after()
        except ParseError as exc:
            await self._send(tag + b" BAD " + str(exc).encode())
        except _Bad as exc:
            await self._send(tag + b" BAD " + str(exc).encode())
        except _No as exc:
            await self._send(tag + b" NO " + str(exc).encode())
        except (_Disconnect, ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            raise
        except Exception as exc:  # a bug here must show up in the test, not hang it
            log.exception("IMAP test server failed on %r", line[:200])
            await self._send(tag + b" BAD [SERVERBUG] " + repr(exc).encode())

    def _handler(self, name: str) -> Handler:
        handler = _COMMANDS.get(name)
        if handler is None:
            raise _Bad(f"{name} not supported by the test server")
        state, func = handler
        if state == "nonauth" and self.account is not None:
            raise _Bad(f"{name} is only valid before LOGIN")
        if state == "auth" and self.account is None:
            raise _Bad(f"{name} needs LOGIN first")
        if state == "selected" and self.selected is None:
            raise _Bad(f"{name} needs SELECT first")
        return func

    def _capabilities(self) -> bytes:
        caps = _EXTENSIONS + (" CONDSTORE" if self.store.condstore else "")
        if self.account is None:
            if self.server.tls == "starttls" and not self.tls_active:
                caps += " STARTTLS LOGINDISABLED"
            else:
                caps += "".join(f" AUTH={m}" for m in self.store.mechanisms if m != "LOGIN")
        return caps.encode()

    async def _sync(self, *, expunges: bool = True) -> None:
        """Tell the client what changed in the selected folder since it last heard."""
        assert self.account is not None and self.selected is not None
        self._changed.clear()  # before reading: a later change sets it again
        state = self.store.state(self.account, self.selected)
        if state.uidvalidity != self.uidvalidity:
            # What Dovecot does when a mailbox is rebuilt under a session.
            await self._send(b"* BYE [UNAVAILABLE] UIDVALIDITY changed, reconnect")
            raise _Disconnect
        if expunges:
            present = set(state.uids)
            for i in range(len(self.view) - 1, -1, -1):
                if self.view[i] not in present:
                    del self.view[i]
                    await self._send(b"* %d EXPUNGE" % (i + 1))
        new = [u for u in state.uids if u >= self.uidnext_seen]
        self.uidnext_seen = state.uidnext
        if new:
            self.view.extend(new)
            await self._send(b"* %d EXISTS" % len(self.view))

    def _targets(self, set_text: Token, uid: bool) -> list[tuple[int, int]]:
        """(seq, uid) pairs of the selected folder that a sequence set names."""
        if not isinstance(set_text, str):
            raise _Bad("expected a sequence set")
        if uid:
            ranges = parse_sequence_set(set_text, self.view[-1] if self.view else 0)
            return [(i, u) for i, u in enumerate(self.view, 1) if in_ranges(u, ranges)]
        ranges = parse_sequence_set(set_text, len(self.view))
        return [(i, u) for i, u in enumerate(self.view, 1) if in_ranges(i, ranges)]

    def _mailbox(self, token: Token) -> str:
        name = _astring(token)
        return name.rstrip("/") if name != "/" else name

    def _existing(self, token: Token) -> str:
        assert self.account is not None
        name = self._mailbox(token)
        if not self.store.has_folder(self.account, name):
            raise _No("[TRYCREATE] no such mailbox")
        return name

    # -- any state ----------------------------------------------------------------------

    async def cmd_capability(self, args: list[Token], uid: bool) -> str:
        await self._send(b"* CAPABILITY " + self._capabilities())
        return "CAPABILITY completed"

    async def cmd_noop(self, args: list[Token], uid: bool) -> str:
        return "NOOP completed"

    async def cmd_logout(self, args: list[Token], uid: bool) -> str:
        await self._send(b"* BYE logging out")

        async def hang_up() -> None:
            raise _Disconnect

        self._after_ok = hang_up
        return "LOGOUT completed"

    async def cmd_id(self, args: list[Token], uid: bool) -> str:
        await self._send(b'* ID ("name" "agentmail-test-imapd")')
        return "ID completed"

    # -- not authenticated --------------------------------------------------------------

    async def cmd_starttls(self, args: list[Token], uid: bool) -> str:
        if self.server.tls != "starttls" or self.tls_active:
            raise _Bad("STARTTLS not available")

        async def upgrade() -> None:  # the OK goes out in clear text, then the handshake
            await self.writer.start_tls(self.server.ssl_context)
            self.tls_active = True

        self._after_ok = upgrade
        return "Begin TLS negotiation now"

    async def cmd_login(self, args: list[Token], uid: bool) -> str:
        if len(args) != 2:
            raise _Bad("LOGIN user password")
        user, password = (_astring(a) for a in args)
        await self.store.auth_penalty(self.writer.transport.is_closing)
        return self._login(user, password)

    async def cmd_authenticate(self, args: list[Token], uid: bool) -> str:
        mechanism = args[0].upper() if args and isinstance(args[0], str) else ""
        if mechanism not in self.store.mechanisms or mechanism == "LOGIN":
            raise _No(f"AUTHENTICATE {mechanism or '?'} is not offered")
        if len(args) > 1 and isinstance(args[1], str):
            response = args[1].encode()
        else:
            await self._send(b"+ ")
            response = (await self.reader.readline()).strip()
        if response == b"*":
            raise _Bad("AUTHENTICATE cancelled")
        try:
            decoded = base64.b64decode(response, validate=True)
        except (binascii.Error, ValueError):
            raise _Bad(f"malformed {mechanism} response") from None
        await self.store.auth_penalty(self.writer.transport.is_closing)
        if mechanism != "PLAIN":
            return await self._token_login(mechanism, decoded)
        try:
            _authz, user, password = decoded.split(b"\0")
        except ValueError:
            raise _Bad("malformed PLAIN response") from None
        return self._login(user.decode("utf-8", "replace"), password.decode("utf-8", "replace"))

    async def _token_login(self, mechanism: str, payload: bytes) -> str:
        if self.account is not None:
            raise _Bad("already authenticated")
        if self.server.tls == "starttls" and not self.tls_active:
            raise _No("[PRIVACYREQUIRED] STARTTLS first")
        parsed = token_login(mechanism, payload)
        account = self.store.authenticate_token(*parsed, "imap", mechanism) if parsed else None
        if account is None:
            self.store.bump("imap.auth_failed")
            # RFC 7628 §3.2.2: the error as a challenge; whatever the client answers, it failed
            await self._send(b"+ " + base64.b64encode(TOKEN_ERROR))
            await self.reader.readline()
            raise _No("[AUTHENTICATIONFAILED] Authentication failed.")
        self.account = account
        self.store.bump("imap.auth")
        self.store.bump(f"imap.auth.{mechanism}")
        return "[CAPABILITY " + self._capabilities().decode() + "] Logged in"

    def _login(self, user: str, password: str) -> str:
        if self.account is not None:
            raise _Bad("already authenticated")
        if self.server.tls == "starttls" and not self.tls_active:
            raise _No("[PRIVACYREQUIRED] STARTTLS first")
        account = self.store.authenticate(user, password)
        if account is None:
            self.store.bump("imap.auth_failed")
            raise _No("[AUTHENTICATIONFAILED] Authentication failed.")
        self.account = account
        self.store.bump("imap.auth")
        return "[CAPABILITY " + self._capabilities().decode() + "] Logged in"

    # -- authenticated ------------------------------------------------------------------

    async def cmd_select(self, args: list[Token], uid: bool) -> str:
        return await self._open(args, readonly=False)

    async def cmd_examine(self, args: list[Token], uid: bool) -> str:
        return await self._open(args, readonly=True)

    async def _open(self, args: list[Token], *, readonly: bool) -> str:
        assert self.account is not None
        if len(args) != 1:
            raise _Bad("SELECT mailbox")
        self.selected = None  # RFC 3501: a failed SELECT leaves nothing selected
        name = self._mailbox(args[0])
        if not self.store.has_folder(self.account, name):
            raise _No("[NONEXISTENT] no such mailbox")
        state = self.store.state(self.account, name)
        messages = self.store.get(self.account, name, state.uids)
        self.selected, self.readonly = state.name, readonly
        self.uidvalidity, self.uidnext_seen = state.uidvalidity, state.uidnext
        self.view = list(state.uids)
        await self._send(b"* FLAGS (" + _SYSTEM_FLAGS.encode() + b")")
        keywords = b" \\*" if self.store.keywords else b""
        await self._send(b"* OK [PERMANENTFLAGS (" + _SYSTEM_FLAGS.encode() + keywords + b")] ok")
        await self._send(b"* %d EXISTS" % len(self.view))
        await self._send(b"* 0 RECENT")
        unseen = [i for i, m in enumerate(messages, 1) if "\\Seen" not in m.flags]
        if unseen:
            await self._send(b"* OK [UNSEEN %d] first unseen" % unseen[0])
        await self._send(b"* OK [UIDVALIDITY %d] UIDs valid" % state.uidvalidity)
        await self._send(b"* OK [UIDNEXT %d] predicted next UID" % state.uidnext)
        if self.store.condstore:
            await self._send(b"* OK [HIGHESTMODSEQ %d] modseqs valid" % self.store.highest_modseq(self.account, name))
        return "[READ-ONLY] EXAMINE completed" if readonly else "[READ-WRITE] SELECT completed"

    async def cmd_create(self, args: list[Token], uid: bool) -> str:
        assert self.account is not None
        if len(args) != 1:
            raise _Bad("CREATE mailbox")
        if not self.store.create_folder(self.account, self._mailbox(args[0])):
            raise _No("[ALREADYEXISTS] mailbox exists")
        return "CREATE completed"

    async def cmd_subscribe(self, args: list[Token], uid: bool) -> str:
        self._existing(args[0] if args else "")
        return "SUBSCRIBE completed"  # every folder counts as subscribed

    async def cmd_unsubscribe(self, args: list[Token], uid: bool) -> str:
        return "UNSUBSCRIBE completed"

    async def cmd_namespace(self, args: list[Token], uid: bool) -> str:
        await self._send(b'* NAMESPACE (("" "/")) NIL NIL')
        return "NAMESPACE completed"

    async def cmd_enable(self, args: list[Token], uid: bool) -> str:
        wanted = {str(a).upper() for a in args}
        if self.store.condstore and wanted & {"CONDSTORE", "QRESYNC"}:
            self.condstore_on = True
            await self._send(b"* ENABLED CONDSTORE")
        else:
            await self._send(b"* ENABLED")  # nothing else this server could enable
        return "ENABLE completed"

    async def cmd_list(self, args: list[Token], uid: bool) -> str:
        return await self._list(args, b"LIST")

    async def cmd_lsub(self, args: list[Token], uid: bool) -> str:
        return await self._list(args, b"LSUB")

    async def _list(self, args: list[Token], kind: bytes) -> str:
        assert self.account is not None
        if len(args) != 2:
            raise _Bad("LIST reference pattern")
        reference, pattern = (_astring(a) for a in args)
        if pattern == "":
            await self._send(b'* %s (\\Noselect) "/" ""' % kind)
            return f"{kind.decode()} completed"
        regex = "".join(".*" if c == "*" else "[^/]*" if c == "%" else re.escape(c) for c in reference + pattern)
        folders = self.store.folders(self.account)
        for name in folders:
            # INBOX is case-insensitive, so "inbox" as a pattern must still find it.
            if not re.fullmatch(regex, name, re.IGNORECASE if name == "INBOX" else 0):
                continue
            has_children = any(f.startswith(name + "/") for f in folders)
            attrs = ["\\HasChildren" if has_children else "\\HasNoChildren"]
            if name in _SPECIAL_USE:
                attrs.append(_SPECIAL_USE[name])
            await self._send(b'* %s (%s) "/" %s' % (kind, " ".join(attrs).encode(), quote(name)))
        return f"{kind.decode()} completed"

    async def cmd_status(self, args: list[Token], uid: bool) -> str:
        assert self.account is not None
        if len(args) != 2 or not isinstance(args[1], list):
            raise _Bad("STATUS mailbox (items)")
        name = self._mailbox(args[0])
        if not self.store.has_folder(self.account, name):
            raise _No("[NONEXISTENT] no such mailbox")
        state = self.store.state(self.account, name)
        values = {
            "MESSAGES": len(state.uids),
            "RECENT": 0,
            "UIDNEXT": state.uidnext,
            "UIDVALIDITY": state.uidvalidity,
            "UNSEEN": state.unseen,
        }
        items = []
        for item in args[1]:
            key = str(item).upper()
            if key not in values:
                raise _Bad(f"unknown STATUS item {key}")
            items.append(f"{key} {values[key]}")
        await self._send(b"* STATUS " + quote(name) + b" (" + " ".join(items).encode() + b")")
        return "STATUS completed"

    async def cmd_append(self, args: list[Token], uid: bool) -> str:
        """APPEND, and MULTIAPPEND (RFC 3502): several ``[(flags)] [date-time] {literal}``
        groups in one command, appended all or none."""
        assert self.account is not None
        if len(args) < 2 or not isinstance(args[-1], bytes):
            raise _Bad("APPEND mailbox [(flags)] [date-time] {literal}")
        name = self._existing(args[0])
        messages: list[tuple[bytes, list[str], dt.datetime | None]] = []
        flags: list[str] = []
        when: dt.datetime | None = None
        for extra in args[1:]:
            if isinstance(extra, list):
                flags = [str(f) for f in extra]
            elif isinstance(extra, str):
                when = parse_internaldate(extra)
            else:
                messages.append((extra, flags, when))
                flags, when = [], None
        if self.store.take_append_refusal():
            raise _No("[OVERQUOTA] Quota exceeded (injected)")
        added = [self.store.append(self.account, name, raw, flags=f, internaldate=w) for raw, f, w in messages]
        validity = added[0][0]
        uids = ",".join(str(u) for _, u in added)
        return f"[APPENDUID {validity} {uids}] APPEND completed"

    async def cmd_idle(self, args: list[Token], uid: bool) -> str:
        # imapclient raises if anything but the continuation comes first. Changes since
        # the last sync left _changed set, so the loop pushes them right after it.
        await self._send(b"+ idling")
        line_task = asyncio.ensure_future(self.reader.readline())
        try:
            while not line_task.done():
                wake = asyncio.ensure_future(self._changed.wait())
                await asyncio.wait({line_task, wake}, return_when=asyncio.FIRST_COMPLETED)
                if not wake.done():
                    wake.cancel()
                elif self.selected is not None:
                    if self.store.idle_delay:
                        await asyncio.sleep(self.store.idle_delay)
                    await self._sync()
        finally:
            line_task.cancel()
        line = line_task.result()
        if not line:
            raise _Disconnect
        if line.strip().upper() != b"DONE":
            raise _Bad("expected DONE")
        return "IDLE terminated"

    # -- selected -----------------------------------------------------------------------

    async def cmd_check(self, args: list[Token], uid: bool) -> str:
        return "CHECK completed"

    async def cmd_close(self, args: list[Token], uid: bool) -> str:
        assert self.account is not None and self.selected is not None
        if not self.readonly:
            self.store.expunge(self.account, self.selected)  # silently, as RFC 3501 says
        self.selected = None
        return "CLOSE completed"

    async def cmd_unselect(self, args: list[Token], uid: bool) -> str:
        self.selected = None
        return "UNSELECT completed"

    async def cmd_expunge(self, args: list[Token], uid: bool) -> str:
        assert self.account is not None and self.selected is not None
        if self.readonly:
            raise _No("[READ-ONLY] mailbox is read-only")
        limit = [u for _, u in self._targets(args[0], True)] if uid and args else None
        self.store.expunge(self.account, self.selected, limit)
        return "EXPUNGE completed"  # the EXPUNGE responses come from the sync after it

    async def cmd_search(self, args: list[Token], uid: bool) -> str:
        assert self.account is not None and self.selected is not None
        predicate = compile_search(args, largest_uid=self.view[-1] if self.view else 0, largest_seq=len(self.view))
        seq_of = {u: i for i, u in enumerate(self.view, 1)}
        hits = [
            m.uid if uid else seq_of[m.uid]
            for m in self.store.get(self.account, self.selected, self.view)
            if predicate(seq_of[m.uid], m)
        ]
        await self._send(b"* SEARCH" + b"".join(b" %d" % h for h in hits))
        return "SEARCH completed"

    async def cmd_fetch(self, args: list[Token], uid: bool) -> str:
        assert self.account is not None and self.selected is not None
        if len(args) != 2:
            raise _Bad("FETCH set items")
        items = parse_fetch_items(args[1])
        if any(i.name == "MODSEQ" for i in items):
            if not self.store.condstore:
                raise _Bad("fetch item MODSEQ needs CONDSTORE")
            self.condstore_on = True
        if uid and not any(i.name == "UID" for i in items):
            items.insert(0, parse_fetch_items("UID")[0])  # UID FETCH always reports UID
        targets = self._targets(args[0], uid)
        seq_of = {u: s for s, u in targets}
        mark_seen = not self.readonly and any(i.sets_seen for i in items)
        for m in self.store.get(self.account, self.selected, [u for _, u in targets]):
            shown = items
            if mark_seen and "\\Seen" not in m.flags:
                m = self.store.set_flags(self.account, self.selected, [m.uid], "+", ["\\Seen"])[0]
                if not any(i.name == "FLAGS" for i in items):
                    shown = [*items, parse_fetch_items("FLAGS")[0]]
            body = b" ".join(render_fetch_item(i, m) for i in shown)
            await self._send(b"* %d FETCH (%s)" % (seq_of[m.uid], body))
        return "FETCH completed"

    async def cmd_store(self, args: list[Token], uid: bool) -> str:
        assert self.account is not None and self.selected is not None
        if self.readonly:
            raise _No("[READ-ONLY] mailbox is read-only")
        unchangedsince = None
        if len(args) > 1 and isinstance(args[1], list):  # STORE set (UNCHANGEDSINCE n) item flags
            modifier = [str(t).upper() for t in args[1]]
            if (
                not self.store.condstore
                or len(modifier) != 2
                or modifier[0] != "UNCHANGEDSINCE"
                or not modifier[1].isdigit()
            ):
                raise _Bad(f"bad STORE modifier {args[1]}")
            unchangedsince = int(modifier[1])
            self.condstore_on = True
            args = [args[0], *args[2:]]
        if len(args) < 3 or not isinstance(args[1], str):
            raise _Bad("STORE set (+|-)FLAGS[.SILENT] flags")
        m = re.fullmatch(r"([+-]?)FLAGS(\.SILENT)?", args[1].upper())
        if not m:
            raise _Bad(f"bad STORE item {args[1]}")
        flags = [str(f) for f in (args[2] if isinstance(args[2], list) else args[2:])]
        if not self.store.keywords:
            flags = [f for f in flags if f.startswith("\\")]  # keywords are not kept (RFC 3501 §7.1)
        targets = self._targets(args[0], uid)
        seq_of = {u: s for s, u in targets}
        changed, modified = self.store.store_unless_modified(
            self.account, self.selected, [u for _, u in targets], m[1] or "=", flags, unchangedsince
        )
        if not m[2] or unchangedsince is not None:  # RFC 7162 §3.1.3: the new MODSEQ even when silent
            for msg in changed:
                await self._send(self._flags_response(seq_of[msg.uid], msg, uid, silent=bool(m[2])))
        if modified:
            listed = ",".join(str(u if uid else seq_of[u]) for u in modified)
            return f"[MODIFIED {listed}] Conditional STORE failed"
        return "STORE completed"

    def _flags_response(self, seq: int, msg: StoredMessage, uid: bool, *, silent: bool = False) -> bytes:
        uid_part = b"UID %d " % msg.uid if uid else b""
        modseq = b" MODSEQ (%d)" % msg.modseq if self.condstore_on else b""
        if silent:
            return b"* %d FETCH (%s%s)" % (seq, uid_part, modseq.lstrip())
        return b"* %d FETCH (%sFLAGS %s%s)" % (seq, uid_part, flag_list(msg.flags), modseq)

    async def cmd_copy(self, args: list[Token], uid: bool) -> str:
        code = await self._copy(args, uid)
        return f"{code} COPY completed"

    async def cmd_move(self, args: list[Token], uid: bool) -> str:
        assert self.account is not None and self.selected is not None
        if self.readonly:
            raise _No("[READ-ONLY] mailbox is read-only")
        code = await self._copy(args, uid)
        await self._send(b"* OK " + code.encode())
        moved = [u for _, u in self._targets(args[0], uid)]
        self.store.set_flags(self.account, self.selected, moved, "+", ["\\Deleted"])
        self.store.expunge(self.account, self.selected, moved)
        return "MOVE completed"

    async def _copy(self, args: list[Token], uid: bool) -> str:
        assert self.account is not None and self.selected is not None
        if len(args) != 2:
            raise _Bad("COPY set mailbox")
        target = self._existing(args[1])
        uids = [u for _, u in self._targets(args[0], uid)]
        validity, pairs = self.store.copy(self.account, self.selected, uids, target)
        if not pairs:
            return ""
        old = ",".join(str(a) for a, _ in pairs)
        new = ",".join(str(b) for _, b in pairs)
        return f"[COPYUID {validity} {old} {new}]"


_COMMANDS: dict[str, tuple[str, Handler]] = {
    "CAPABILITY": ("any", _Session.cmd_capability),
    "NOOP": ("any", _Session.cmd_noop),
    "LOGOUT": ("any", _Session.cmd_logout),
    "ID": ("any", _Session.cmd_id),
    "STARTTLS": ("nonauth", _Session.cmd_starttls),
    "LOGIN": ("nonauth", _Session.cmd_login),
    "AUTHENTICATE": ("nonauth", _Session.cmd_authenticate),
    "SELECT": ("auth", _Session.cmd_select),
    "EXAMINE": ("auth", _Session.cmd_examine),
    "CREATE": ("auth", _Session.cmd_create),
    "SUBSCRIBE": ("auth", _Session.cmd_subscribe),
    "UNSUBSCRIBE": ("auth", _Session.cmd_unsubscribe),
    "NAMESPACE": ("auth", _Session.cmd_namespace),
    "ENABLE": ("auth", _Session.cmd_enable),
    "LIST": ("auth", _Session.cmd_list),
    "LSUB": ("auth", _Session.cmd_lsub),
    "STATUS": ("auth", _Session.cmd_status),
    "APPEND": ("auth", _Session.cmd_append),
    "IDLE": ("auth", _Session.cmd_idle),
    "CHECK": ("selected", _Session.cmd_check),
    "CLOSE": ("selected", _Session.cmd_close),
    "UNSELECT": ("selected", _Session.cmd_unselect),
    "EXPUNGE": ("selected", _Session.cmd_expunge),
    "SEARCH": ("selected", _Session.cmd_search),
    "FETCH": ("selected", _Session.cmd_fetch),
    "STORE": ("selected", _Session.cmd_store),
    "COPY": ("selected", _Session.cmd_copy),
    "MOVE": ("selected", _Session.cmd_move),
}
