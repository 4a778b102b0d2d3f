"""The archive's pages, rendered by Jinja2 with autoescape on for every template (HTML, SVG and
Atom alike): every value from a letter is escaped by the engine, never by hand, and no letter's
HTML is ever rendered (bodies are the text agents are shown, in ``<pre>``). Each page carries a
strict Content-Security-Policy: nothing but its own stylesheet, inline and allowed by its hash;
no script, no image, no remote resource, no form but the live view's search (same origin).

File names of pages come from ids only (``page_name``, ``gather.permalink_name``), never from subjects."""

from __future__ import annotations

import base64
import functools
import hashlib
import re
import time
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from ..ages import age
from ..model import THREAD_RE
from .gather import LetterView, ThreadView

TEMPLATES = Path(__file__).parent / "templates"
QUARANTINE = "quarantine"  # the page of quarantined letters that name no thread
COLORS = ("#2563eb", "#d97706", "#059669", "#7c3aed", "#dc2626", "#0891b2", "#6b7280")
TYPE_COLORS = {"report": "#dc2626", "question": "#7c3aed", "ack": "#d97706", "fix-notice": "#2563eb",
               "verify-result": "#059669", "close": "#6b7280"}  # fmt: skip
AGE_BUCKETS = ((86400, "under a day"), (7 * 86400, "1 to 7 days"), (30 * 86400, "7 to 30 days"), (None, "over 30 days"))


# What XML 1.0 forbids though UTF-8 carries it (and ``text.visible`` lets through): one such
# character in a letter made the whole Atom feed unreadable.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _printable(value: Any) -> Any:
    """Every value a template prints, characters XML forbids written out as ``<U+…>`` (before
    escaping); the project's own markup (the stylesheet) as it is."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return _NOT_XML.sub(lambda m: f"<U+{ord(m.group()):04X}>", value)
    return value


@functools.cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # every template, whatever its extension
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        finalize=_printable,
    )


@functools.cache
def stylesheet() -> tuple[str, str]:
    """(the stylesheet, its CSP source: ``'sha256-…'``)."""
    css = (TEMPLATES / "style.css").read_text(encoding="utf-8").strip()
    digest = base64.b64encode(hashlib.sha256(css.encode("utf-8")).digest()).decode("ascii")
    return css, f"'sha256-{digest}'"


def csp(live: bool = False) -> str:
    """The policy of every page: nothing is allowed but the page's own stylesheet (and, live, the
    search form's submission to the same origin)."""
    form = "'self'" if live else "'none'"
    return f"default-src 'none'; style-src {stylesheet()[1]}; base-uri 'none'; form-action {form}"


def page_name(thread: str) -> str:
    """A thread's folder name: its id when it is one; ``quarantine`` for the quarantined letters that
    name no thread; else a hash (a quarantined letter's thread that is no id)."""
    if thread in ("", QUARANTINE):
        return QUARANTINE
    if THREAD_RE.fullmatch(thread):
        return thread
    return "q-" + hashlib.sha256(thread.encode("utf-8", "replace")).hexdigest()[:24]


def _common(root: str, bus: str, live: bool, refresh: int | None) -> dict[str, Any]:
    css, _ = stylesheet()
    return {"root": root, "bus": bus, "csp": csp(live), "css": Markup(css), "live": live, "refresh": refresh,
            "written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip


def picture(views: list[ThreadView], now_ms: int) -> dict[str, Any]:
    """The bus at a glance: open threads by age of their opening, each bar split by whose move."""
    open_ = [v for v in views if v.state not in ("closed", "quarantined")]
    movers = [m for m, _ in sorted(_count(v.whose_move for v in open_).items(), key=lambda kv: -kv[1])]
    shown = movers[: len(COLORS) - 1]
    color = {who: COLORS[i] for i, who in enumerate(shown)}
    buckets: list[list[ThreadView]] = [[] for _ in AGE_BUCKETS]
    for view in open_:
        seconds = max(0, now_ms - view.opened_ms) / 1000
        index = next(i for i, (limit, _) in enumerate(AGE_BUCKETS) if limit is None or seconds < limit)
        buckets[index].append(view)
    widest = max((len(b) for b in buckets), default=0) or 1
    bars = []
    for row, (bucket, (_, label)) in enumerate(zip(buckets, AGE_BUCKETS, strict=True)):
        x, segments = 120.0, []
        for who, count in _count(v.whose_move if v.whose_move in color else "others" for v in bucket).items():
            width = 460 * count / widest
            segments.append({"x": round(x, 1), "width": round(width, 1), "who": who, "count": count,
                             "color": color.get(who, COLORS[-1])})  # fmt: skip
            x += width
        bars.append({"y": 8 + row * 28, "label": label, "segments": segments, "end": round(x, 1), "total": len(bucket)})
    legend = [{"x": 4 + i * 150, "who": who, "color": color.get(who, COLORS[-1])}
              for i, who in enumerate([*shown, *(["others"] if len(movers) > len(shown) else [])])]  # fmt: skip
    return {"width": 640, "height": 8 + len(AGE_BUCKETS) * 28 + 26, "bars": bars, "legend": legend}


def _count(items: Any) -> dict[str, int]:
    counted: dict[str, int] = {}
    for item in items:
        counted[item] = counted.get(item, 0) + 1
    return counted


def index(views: list[ThreadView], bus: str, *, now_ms: int, by_state: bool = False, root: str = "",
          live: bool = False, refresh: int | None = None) -> str:  # fmt: skip
    """index.html: every thread (by the time since its last move, or by state), the picture on top."""
    order = sorted(views, key=lambda v: (v.state, -v.moved_ms) if by_state else (-v.moved_ms, v.id))
    rows = [{"view": v, "page": page_name(v.id), "age": age(max(0, now_ms - v.opened_ms) / 1000),
             "idle": age(max(0, now_ms - v.moved_ms) / 1000)} for v in order]  # fmt: skip
    open_count = sum(1 for v in views if v.state not in ("closed", "quarantined"))
    return _env().get_template("index.html").render(
        **_common(root, bus, live, refresh), threads=rows, open_count=open_count, by_state=by_state,
        picture=picture(views, now_ms),
    )  # fmt: skip


def timeline(letters: tuple[LetterView, ...]) -> dict[str, Any]:
    """The lifecycle, one point a letter in order: its type, who moved, when."""
    step = 130
    points = [{"x": 70 + i * step, "type": x.type + (f" ({dict(x.headers)['outcome']})" if "outcome" in dict(x.headers) else ""),
               "who": x.sender, "color": TYPE_COLORS.get(x.type, "#6b7280"),
               "when": time.strftime("%m-%d %H:%M", time.gmtime(x.epoch)) if x.epoch else "?"}
              for i, x in enumerate(letters)]  # fmt: skip
    return {"width": max(300, 140 + (len(letters) - 1) * step), "points": points}


def thread(view: ThreadView, bus: str, *, root: str = "../../", live: bool = False, refresh: int | None = None) -> str:
    """A thread's page: every letter with its header table, body as text, attachments, authentication."""
    return _env().get_template("thread.html").render(
        **_common(root, bus, live, refresh), t=view, timeline=timeline(view.letters),
    )  # fmt: skip


def permalink(letter: LetterView, view: ThreadView, bus: str) -> str:
    """``m/<Message-ID>/index.html``: straight on to the letter in its thread."""
    target = f"../../t/{page_name(view.id)}/index.html#{letter.anchor}"
    return _env().get_template("permalink.html").render(
        **_common("../../", bus, False, None) | {"refresh": Markup(f"0; url={target}")}, target=target,
        message_id=letter.message_id, subject=view.subject, thread=view.id,
    )  # fmt: skip


def search(hits: list[dict[str, Any]], query: str, bus: str, problem: str = "") -> str:
    return _env().get_template("search.html").render(**_common("", bus, True, None), hits=hits, query=query,
                                                     problem=problem)  # fmt: skip


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def feed(title: str, feed_id: str, letters: list[tuple[LetterView, ThreadView]], root: str) -> str:
    """An Atom feed of ``letters`` (newest first), each entry linking to its letter."""
    entries = [{"title": f"{x.type}: {x.subject}", "id": f"urn:agentmail:letter:{x.id}", "updated": _iso(x.epoch),
                "author": x.sender, "href": f"{root}t/{page_name(v.id)}/index.html#{x.anchor}", "body": x.body}
               for x, v in letters]  # fmt: skip
    updated = max((x.epoch for x, _ in letters), default=0.0)
    return _env().get_template("feed.xml").render(title=title, feed_id=feed_id, updated=_iso(updated), entries=entries)
