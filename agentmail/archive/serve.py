"""``agentmail serve``: the archive's pages served live (the ``agentmail[web]`` extra: Starlette,
the ASGI framework the MCP SDK is built on, and uvicorn, its server).

Read-only: every route answers GET (and HEAD) only, the one form is the search (a GET), and the
mailboxes are synced (at most every ``SYNC_EVERY`` seconds) and read, never changed. Each page
refreshes itself (``<meta http-equiv="refresh">``: no script) so new letters appear. Every
response carries the pages' Content-Security-Policy as a header too, with ``frame-ancestors
'none'``. Off loopback a token is required (``?token=`` once, then a same-site cookie, or an
``Authorization: Bearer`` header), compared in constant time. Without a token (loopback) the
Host must be a loopback name: a web page whose own name was rebound to 127.0.0.1 (DNS rebinding)
is refused, so only the person's browser, asking for this machine by name, reads the letters."""

from __future__ import annotations

import hmac
import socket
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..client.facade import AgentMail
from ..errors import BadInput, ConfigError
from ..text import visible, visible_line
from . import gather, pages, site

SYNC_EVERY = 2.0  # seconds: a page load syncs at most this often
REFRESH = 15  # seconds between a page's own reloads
COOKIE = "agentmail_token"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


class Live:
    """The mailboxes behind the pages, read under one lock (a client is no thread-safe object);
    thread views kept while their fingerprint holds."""

    def __init__(self, clients: list[AgentMail], bus: str, quarantine: bool) -> None:
        self.clients, self.bus, self.quarantine = clients, bus, quarantine
        self.lock = threading.Lock()
        self._synced = 0.0
        self._views: dict[str, tuple[str, gather.ThreadView]] = {}

    def _sync(self) -> None:
        if time.monotonic() - self._synced < SYNC_EVERY:
            return
        for client in self.clients:
            try:
                client.sync()
            except ConfigError:  # another platform's login is not here: shown as last synced
                pass
        self._synced = time.monotonic()

    def views(self) -> list[gather.ThreadView]:
        with self.lock:
            self._sync()
            found: dict[str, tuple[str, gather.ThreadView]] = {}
            for item in gather.threads(self.clients, self.quarantine):
                kept = self._views.get(item.thread)
                if kept is not None and kept[0] == item.fingerprint:
                    found[item.thread] = kept
                    continue
                view = gather.thread_view(self.clients, item)
                if view is not None:
                    found[item.thread] = (item.fingerprint, view)
            self._views = found
            return [view for _, view in found.values()]

    def thread(self, page: str) -> gather.ThreadView | None:
        return next((v for v in self.views() if pages.page_name(v.id) == page), None)

    def search(self, query: str) -> list[dict[str, Any]]:
        with self.lock:
            found = [(client, hit) for client in self.clients for hit in client.search(query, sync=False, limit=100)]
            shown = {(h.thread, client.show(h.id).message_id): h for client, h in found}  # one hit a letter
        return [{"thread": pages.page_name(h.thread), "anchor": gather.permalink_name(visible_line(mid)), "subject": visible_line(h.subject),
                 "type": h.type, "sender": h.sender, "date": h.date, "snippet": visible(h.snippet)}
                for (_, mid), h in shown.items()]  # fmt: skip


def _html(text: str) -> Response:
    return Response(text, media_type="text/html; charset=utf-8")


def app(live: Live, token: str | None = None) -> ASGIApp:
    """The ASGI app of ``live``: the archive's routes, read-only, behind the token when one is set."""

    def index(request: Request) -> Response:
        by_state = request.url.path.endswith("by-state.html")
        return _html(pages.index(live.views(), live.bus, now_ms=int(time.time() * 1000), by_state=by_state,
                                 live=True, refresh=REFRESH))  # fmt: skip

    def thread(request: Request) -> Response:
        view = live.thread(request.path_params["page"])
        if view is None:
            return PlainTextResponse("no such thread", status_code=404)
        what = request.path_params.get("file", "index.html")
        if what == "thread.mbox":
            return Response(site.mbox(view.letters), media_type="application/mbox",
                            headers={"Content-Disposition": f'attachment; filename="{pages.page_name(view.id)}.mbox"'})  # fmt: skip
        if what == "atom.xml":
            newest = sorted(view.letters, key=lambda x: (x.epoch, x.id), reverse=True)
            return Response(pages.feed(f"{live.bus}: {view.subject}", f"urn:agentmail:thread:{view.id}",
                                       [(x, view) for x in newest], "../../"), media_type="application/atom+xml")  # fmt: skip
        if what != "index.html":
            return PlainTextResponse("not found", status_code=404)
        return _html(pages.thread(view, live.bus, live=True, refresh=REFRESH))

    def permalink(request: Request) -> Response:
        wanted = request.path_params["mid"].removesuffix("/index.html").strip("/")
        names = {wanted, gather.permalink_name(wanted), gather.permalink_name(f"<{wanted.strip('<>')}>")}
        for view in live.views():
            for letter in view.letters:
                if letter.anchor in names:
                    target = f"/t/{quote(pages.page_name(view.id))}/index.html#{letter.anchor}"  # the anchor is URL-safe as it is
                    return RedirectResponse(target, status_code=303)
        return PlainTextResponse("no letter with that Message-ID here", status_code=404)

    def feed(request: Request) -> Response:
        letters = sorted(((x, v) for v in live.views() for x in v.letters), key=lambda p: (p[0].epoch, p[0].id),
                         reverse=True)[: site.FEED_SIZE]  # fmt: skip
        return Response(pages.feed(f"{live.bus}: new letters", f"urn:agentmail:bus:{live.bus}", letters, ""),
                        media_type="application/atom+xml")  # fmt: skip

    def search(request: Request) -> Response:
        query = request.query_params.get("q", "")[:500]
        hits: list[dict[str, Any]] = []
        problem = ""
        if query.strip():
            try:
                hits = live.search(query)
            except BadInput as exc:
                problem = str(exc)
        return _html(pages.search(hits, visible_line(query), live.bus, problem))

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/index.html", index, methods=["GET"]),
        Route("/by-state.html", index, methods=["GET"]),
        Route("/atom.xml", feed, methods=["GET"]),
        Route("/search", search, methods=["GET"]),
        Route("/t/{page}/", thread, methods=["GET"]),
        Route("/t/{page}/{file}", thread, methods=["GET"]),
        Route("/m/{mid:path}", permalink, methods=["GET"]),
    ]
    return _Guarded(Starlette(routes=routes), token)


class _Guarded:
    """Every response with the pages' policy as headers; every request checked for the token."""

    def __init__(self, inner: ASGIApp, token: str | None) -> None:
        self.inner, self.token = inner, token

    def _allowed(self, scope: Scope) -> tuple[bool, bool]:
        """(may it pass, should the cookie be set)."""
        if self.token is None:
            return True, False
        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            return True, True
        header = request.headers.get("authorization", "")
        cookie = request.cookies.get(COOKIE, "")
        for candidate in (header.removeprefix("Bearer ").strip(), cookie):
            if candidate and hmac.compare_digest(candidate.encode(), self.token.encode()):
                return True, False
        return False, False

    def _host_ok(self, scope: Scope) -> bool:
        """With no token, only a loopback name in Host (a rebound name is another site's page)."""
        if self.token is not None:
            return True
        host = Request(scope).headers.get("host", "").strip().lower()
        name = host.rpartition(":")[0] if host.rpartition(":")[2].isdigit() else host
        return name in LOOPBACK_HOSTS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        allowed, set_cookie = self._allowed(scope)
        policy = pages.csp(live=True) + "; frame-ancestors 'none'"

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", policy.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer"), (b"cache-control", b"no-store")]  # fmt: skip
                if set_cookie and self.token is not None:
                    value = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                    headers.append((b"set-cookie", value.encode()))
                message = {**message, "headers": headers}
            await send(message)

        if not self._host_ok(scope):
            await PlainTextResponse("this address serves only a loopback name (localhost, 127.0.0.1, [::1])", 421)(
                scope, receive, with_headers
            )
            return
        if not allowed:
            await PlainTextResponse("a token is needed: open the address 'agentmail serve' printed", 401)(
                scope, receive, with_headers
            )
            return
        await self.inner(scope, receive, with_headers)


def listen(host: str, port: int) -> socket.socket:
    """The listening socket (bound here, so the port in use is known before serving)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(64)
    return sock


def run(asgi: ASGIApp, sock: socket.socket) -> None:
    """Serve ``asgi`` on ``sock`` until interrupted (Ctrl-C, SIGTERM)."""
    config = uvicorn.Config(asgi, log_level="warning", lifespan="off", access_log=False, server_header=False)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def read_token(token: str | None, token_file: str | None) -> str | None:
    """``--token`` or the first line of ``--token-file``; BadInput for an empty or unreadable one."""
    if token_file:
        try:
            token = Path(token_file).expanduser().read_text(encoding="utf-8").strip().splitlines()[0]
        except (OSError, UnicodeError, IndexError):
            raise BadInput(f"cannot read a token from {token_file}") from None
    if token is not None and (len(token) < 16 or not token.isprintable() or not token.isascii()):
        raise BadInput("a token must be at least 16 printable characters")
    return token
