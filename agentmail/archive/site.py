"""``agentmail archive DIR``: the static site, written incrementally.

Layout (every name from an id, never a subject)::

    DIR/index.html, by-state.html      every thread (by last move; by state), the bus's picture
    DIR/atom.xml                       the newest letters of the whole archive
    DIR/t/<thread>/index.html          one thread: every letter, its authentication, the timeline
    DIR/t/<thread>/thread.mbox         the letters' raw bytes, still signed (mboxrd)
    DIR/t/<thread>/atom.xml            the thread's letters
    DIR/m/<Message-ID>/index.html      a permalink: on to the letter in its thread
    DIR/.agentmail-archive.json        the manifest: per thread, what its pages were made from

A thread's pages are written again only when its fingerprint (its letters' ids and states, read
from the spool without reading a letter) changed since the last run; the index and the bus feed
are made from the manifest's summaries every time. Pages are written atomically and not
fsynced: the archive is made again from the spools at any time."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._fs import write_atomic
from .._value import Frozen
from ..ages import now_ms
from ..errors import BadInput
from . import gather, pages

if TYPE_CHECKING:
    from ..client.facade import AgentMail

MANIFEST = ".agentmail-archive.json"
# Pages made by another version of the templates are made again.
VERSION = "agentmail-archive/2"
FEED_PER_THREAD = 5
FEED_SIZE = 50
MAX_FEED_BODY = 4000


class Written(Frozen):
    threads: int  # threads in the archive
    rewritten: int  # threads whose pages were written this run
    letters: int  # letters on the pages written this run
    removed: int  # threads whose pages were removed (nothing of them left to show)


def mbox(letters: tuple[gather.LetterView, ...]) -> bytes:
    """The letters as an mboxrd file: each raw letter with LF line ends behind its ``From `` line,
    body lines that start with ``>*From `` quoted once more (readers unquote them)."""
    out = bytearray()
    for letter in letters:
        when = time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(letter.epoch))
        out += f"From agentmail {when}\n".encode("ascii")
        for line in letter.raw.replace(b"\r\n", b"\n").split(b"\n"):
            if line.lstrip(b">").startswith(b"From "):
                line = b">" + line
            out += line + b"\n"
        if not out.endswith(b"\n\n"):
            out += b"\n"
    return bytes(out)


def _manifest(directory: Path) -> dict[str, Any]:
    """The last run's manifest; an empty one when there is none, it is damaged or of another version."""
    try:
        data = json.loads((directory / MANIFEST).read_bytes())
    except (OSError, ValueError):
        return {"threads": {}}
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("threads"), dict):
        return {"threads": {}}
    return data


def _check_directory(directory: Path) -> None:
    """DIR is new, empty or an archive made before: never a folder of someone's other files."""
    if directory.exists() and not directory.is_dir():
        raise BadInput(f"{directory} is not a directory")
    if directory.is_dir() and not (directory / MANIFEST).is_file() and any(directory.iterdir()):
        raise BadInput(f"{directory} holds files and is no agentmail archive: choose a new or empty folder")


def _write(directory: Path, path: Path, text: str | bytes) -> None:
    """``path`` (inside ``directory``) written atomically; never through a folder that is a symlink
    (one planted in the archive would take the pages anywhere its planter chose)."""
    for folder in path.relative_to(directory).parents:
        if folder != Path(".") and (directory / folder).is_symlink():
            raise BadInput(f"{directory / folder} is a symlink: the archive is written only into its own folders")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode("utf-8") if isinstance(text, str) else text, mode=0o644, durable=False)


def _feed_rows(view: gather.ThreadView) -> list[dict[str, Any]]:
    return [{"id": x.id, "message_id": x.message_id, "type": x.type, "subject": x.subject, "sender": x.sender, "epoch": x.epoch,
             "body": x.body[:MAX_FEED_BODY], "thread": view.id}
            for x in sorted(view.letters, key=lambda x: (x.epoch, x.id))[-FEED_PER_THREAD:]]  # fmt: skip


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@-]{0,199}")


def _remove(directory: Path, entry: dict[str, Any]) -> None:
    """A thread's folder and its permalinks, by the names the manifest keeps: only names this
    module could have made (a manifest is a file in DIR anyone may have edited: never a path)."""
    names = entry.get("permalinks", [])
    folders = [("t", entry.get("page")), *(("m", name) for name in (names if isinstance(names, list) else []))]
    for parent, name in folders:
        if isinstance(name, str) and _NAME.fullmatch(name) and ".." not in name:
            target = directory / parent / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)


def _view_of(summary: dict[str, Any]) -> gather.ThreadView:
    return gather.ThreadView(
        id=str(summary["id"]), subject=str(summary["subject"]), state=str(summary["state"]),
        last_type=str(summary["last_type"]), whose_move=str(summary["whose_move"]),
        opened_ms=int(summary["opened_ms"]), moved_ms=int(summary["moved_ms"]),
        parties=tuple(str(p) for p in summary["parties"]), severity=str(summary["severity"]),
        ref=str(summary["ref"]), letters=(), outcome=str(summary["outcome"]), count=int(summary["count"]),
    )  # fmt: skip


def _entry_view(thread_pages: dict[str, Any], thread: str, fingerprint: str) -> dict[str, Any] | None:
    entry = thread_pages.get(thread)
    if isinstance(entry, dict) and entry.get("fingerprint") == fingerprint:
        try:
            _view_of(entry["summary"])
            return entry
        except (KeyError, TypeError, ValueError):
            return None
    return None


def write(clients: list[AgentMail], directory: Path, *, bus: str, quarantine: bool = False) -> Written:
    """Write (or bring up to date) the archive of ``clients``' mailboxes in ``directory``."""
    _check_directory(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot make {directory}: {exc.strerror or exc}") from None
    before = _manifest(directory)["threads"]
    after: dict[str, Any] = {}
    rewritten = letters = 0
    for found in gather.threads(clients, quarantine):
        thread, fingerprint = found.thread, found.fingerprint
        kept = _entry_view(before, thread, fingerprint)
        if kept is not None:
            after[thread] = kept
            continue
        view = gather.thread_view(clients, found)
        if view is None:
            continue
        if thread in before and isinstance(before[thread], dict):
            _remove(directory, before[thread])  # its permalinks may have changed
        page = pages.page_name(thread)
        folder = directory / "t" / page
        _write(directory, folder / "index.html", pages.thread(view, bus))
        _write(directory, folder / "thread.mbox", mbox(view.letters))
        newest = sorted(view.letters, key=lambda x: (x.epoch, x.id), reverse=True)
        _write(directory, folder / "atom.xml", pages.feed(f"{bus}: {view.subject}", f"urn:agentmail:thread:{page}",
                                               [(x, view) for x in newest], "../../"))  # fmt: skip
        links = []
        for letter in view.letters:
            name = letter.anchor
            links.append(name)
            _write(directory, directory / "m" / name / "index.html", pages.permalink(letter, view, bus))
        after[thread] = {"fingerprint": fingerprint, "page": page, "permalinks": links, "summary": view.summary(),
                         "feed": _feed_rows(view)}  # fmt: skip
        rewritten += 1
        letters += len(view.letters)
    removed = [t for t in before if t not in after and isinstance(before[t], dict)]
    for thread in removed:
        _remove(directory, before[thread])
    _index(directory, after, bus)
    _write(directory, directory / MANIFEST, json.dumps({"version": VERSION, "threads": after}, sort_keys=True))
    return Written(len(after), rewritten, letters, len(removed))


def _feed_row(row: Any) -> bool:
    """A feed row of the manifest as ``_feed_rows`` writes it (the manifest may have been edited)."""
    fields = ("id", "message_id", "type", "subject", "sender", "body", "thread")
    return (isinstance(row, dict) and isinstance(row.get("epoch"), int | float)
            and all(isinstance(row.get(name), str) for name in fields))  # fmt: skip


def _index(directory: Path, entries: dict[str, Any], bus: str) -> None:
    views = [_view_of(entry["summary"]) for entry in entries.values()]
    now = now_ms()
    _write(directory, directory / "index.html", pages.index(views, bus, now_ms=now))
    _write(directory, directory / "by-state.html", pages.index(views, bus, now_ms=now, by_state=True))
    rows = sorted((row for entry in entries.values() for row in entry.get("feed", []) if _feed_row(row)),
                  key=lambda r: (r["epoch"], r["id"]), reverse=True)[:FEED_SIZE]  # fmt: skip
    by_id = {v.id: v for v in views}
    feed = [(gather.LetterView(id=r["id"], message_id=r["message_id"], sender=r["sender"], to="", type=r["type"], date="",
                               epoch=r["epoch"], subject=r["subject"], body=r["body"], headers=(), attachments=(),
                               auth="", auth_detail="", raw=b""), by_id[r["thread"]])
            for r in rows if r["thread"] in by_id]  # fmt: skip
    _write(directory, directory / "atom.xml", pages.feed(f"{bus}: new letters", f"urn:agentmail:bus:{bus}", feed, ""))
