"""Evidence and patches on disk: reading files and ``git format-patch`` output into
attachments, saving a letter's attachments, and ``git am`` of its patches.

Nothing here runs or opens an attachment: saving writes bytes (0600, never outside the chosen
directory, never over a file without ``force``); applying hands patch text to git, with every
hook off, first in a scratch worktree, then only what was checked into a clean checkout.
Reading a file to attach is confined: no symlink, no special file, nothing of the agentmail
home (DESIGN §10).
"""

from __future__ import annotations

import errno
import mimetypes
import os
import re
import stat
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from email.header import decode_header, make_header
from pathlib import Path

from .._value import Frozen
from ..config.registry import registry_dir
from ..errors import BadInput, ConfigError, NotFound
from ..home import agentmail_home
from ..letter.attach import Attachment, safe_name, unique_names
from ..text import one_line

PATCH_TYPE = "text/x-diff"
_GIT_TIMEOUT = 120
_EXTRA_TYPES = {".log": "text/x-log", ".har": "application/json", ".gz": "application/gzip", ".md": "text/markdown"}


def type_of(path: Path, data: bytes) -> str:
    """The MIME type an attachment is sent as: by extension, else text/plain for UTF-8 text
    without NUL bytes, else application/octet-stream."""
    suffix = path.suffix.lower()
    if suffix in _EXTRA_TYPES:
        return _EXTRA_TYPES[suffix]
    guessed, encoding = mimetypes.guess_type(path.name, strict=False)
    if guessed and not encoding:
        return guessed
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain" if b"\x00" not in data else "application/octet-stream"


def from_file(path: str | Path, max_bytes: int, *, home: str | Path | None = None) -> Attachment:
    """The file at ``path`` as an attachment (read at most ``max_bytes`` + 1 bytes: a larger
    file is refused without reading it whole). BadInput when it cannot be read, is a symbolic
    link, is not a regular file, or lies inside the agentmail home (``home``, default
    ``$AGENTMAIL_HOME``: its keys and spools are never evidence), however the path reaches it."""
    file = Path(path).expanduser()
    fd = _open_confined(file, Path(home).expanduser() if home is not None else agentmail_home(), str(path))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BadInput(f"--attach {path}: not a regular file")
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise BadInput(f"--attach {path}: {exc.strerror or exc.__class__.__name__}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > max_bytes:
        raise BadInput(
            f"attachment refused: {file.name} is larger than {max_bytes} bytes, what an attachment may be "
            "(bus set attach_max_bytes)"
        )
    return Attachment(safe_name(file.name), type_of(file, data), data)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _open_confined(file: Path, home: Path, shown: str) -> int:
    """A read-only descriptor of ``file``, opened so that what was checked is what is read:
    the final component never a symlink (O_NOFOLLOW), the directories resolved once
    (realpath) and checked to lie outside the home, then walked one component at a time
    with O_NOFOLLOW (a directory swapped for a symlink after the check fails the walk),
    and the file itself never one of the home's secrets under another name (a hard link)."""
    if file.name in ("", ".."):  # pathlib drops "." components: Path(".").name is ""
        raise BadInput(f"--attach {shown}: not a regular file")
    try:
        if file.is_symlink():
            raise BadInput(f"--attach {shown}: is a symbolic link; attach the file itself, not a link to it")
        parent = os.path.realpath(file.parent)
    except OSError as exc:
        raise BadInput(f"--attach {shown}: {exc.strerror or exc.__class__.__name__}") from None
    real = os.path.join(parent, file.name)
    real_home = os.path.realpath(home)
    if _inside(real, real_home):
        raise BadInput(f"--attach {shown}: lies inside the agentmail home ({real_home}); its keys, "
                       "logins and spools are never attached")  # fmt: skip
    try:
        fd = os.open(os.sep, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in [p for p in real.split(os.sep) if p][:-1]:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
            leaf = os.open(file.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise BadInput(f"--attach {shown}: not a readable file (it does not exist)") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise BadInput(f"--attach {shown}: a symbolic link appeared on its path while it was opened") from None
        raise BadInput(f"--attach {shown}: {exc.strerror or exc.__class__.__name__}") from None
    if _is_a_secret(os.fstat(leaf), real_home):
        os.close(leaf)
        raise BadInput(f"--attach {shown}: is a file of the agentmail home's secrets under another name (a hard link)")
    return leaf


def _is_a_secret(info: os.stat_result, real_home: str) -> bool:
    """Is the opened file one of ``$AGENTMAIL_HOME/secrets/*`` (same device and inode)?"""
    if info.st_nlink < 2:
        return False
    try:
        entries = list(os.scandir(os.path.join(real_home, "secrets")))
    except OSError:
        return False
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (info.st_dev, info.st_ino):
            return True
    return False


def _git(args: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, timeout=_GIT_TIMEOUT, stdin=subprocess.DEVNULL, check=False
        )
    except FileNotFoundError:
        raise ConfigError(f"{what} needs git, which is not installed") from None
    except subprocess.TimeoutExpired:
        raise BadInput(f"{what}: git did not finish within {_GIT_TIMEOUT} s") from None


_SUBJECT = re.compile(rb"^Subject: (.*(?:\n[ \t].*)*)", re.MULTILINE)


def _subject(patch: bytes) -> str:
    """The commit subject of one format-patch file (its Subject, unfolded, without [PATCH n/m])."""
    found = _SUBJECT.search(patch.split(b"\n\n", 1)[0])
    if not found:
        return ""
    value = re.sub(r"\s+", " ", found.group(1).decode("ascii", "replace"))
    try:
        value = str(make_header(decode_header(value)))
    except (LookupError, UnicodeError, ValueError):
        pass
    return re.sub(r"^\[PATCH[^\]]*\]\s*", "", value).strip()


def from_patches(rev_range: str, cwd: str | Path = ".") -> tuple[Attachment, ...]:
    """``git format-patch REV-RANGE`` in the checkout at ``cwd``: one text/x-diff attachment per
    commit, named as git names the file, described by the commit's subject."""
    if not rev_range or rev_range.startswith("-") or any(c.isspace() or ord(c) < 32 for c in rev_range):
        raise BadInput(f"--patch {rev_range!r}: not a revision range (e.g. HEAD~2..HEAD or origin/main..)")
    root = Path(cwd)
    with tempfile.TemporaryDirectory(prefix="agentmail-patch-") as out:
        proc = _git(["format-patch", "--no-signature", "-o", out, rev_range, "--"], root, f"--patch {rev_range}")
        if proc.returncode != 0:
            raise BadInput(f"--patch {rev_range}: git format-patch failed: {_git_words(proc)}")
        files = sorted(Path(out).glob("*.patch"))
        if not files:
            raise BadInput(f"--patch {rev_range}: the range holds no commits")
        patches = []
        for file in files:
            data = file.read_bytes()
            patches.append(Attachment(safe_name(file.name), PATCH_TYPE, data, _subject(data)))
    return tuple(patches)


def _write_new(path: Path, data: bytes, force: bool) -> None:
    """Write ``data`` to ``path`` (mode 0600): a new file, or with ``force`` replacing what is
    there by a rename (a symlink is replaced, never followed)."""
    if not force:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".agentmail-save-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(attachments: tuple[Attachment, ...], directory: str | Path, *, force: bool = False) -> list[Path]:
    """Write every attachment into ``directory`` under its safe, unique name (0600). Refuses, before
    writing anything, when a file of that name exists (unless ``force``) or when a name would
    land outside ``directory``. Returns the paths written."""
    if not attachments:
        raise NotFound("the letter carries no attachments")
    target = Path(directory).expanduser()
    if not target.is_dir():
        missing = not target.exists() and not target.is_symlink()
        raise BadInput(f"--dir {directory}: " + ("does not exist (create it first)" if missing else "not a directory"))
    root = target.resolve()
    paths = []
    for name in unique_names(attachments):
        path = root / name
        if path.parent != root or name in (".", ".."):  # safe_name makes this impossible; checked anyway
            raise BadInput(f"the attachment name {name!r} would leave {root}")
        if not force and (path.exists() or path.is_symlink()):
            raise BadInput(f"{path} exists; --force replaces it")
        if path.is_dir():
            raise BadInput(f"{path} is a directory")
        paths.append(path)
    for item, path in zip(attachments, paths, strict=True):
        try:
            _write_new(path, item.data, force)
        except FileExistsError:
            raise BadInput(f"{path} exists; --force replaces it") from None
    return paths


def patches_of(attachments: tuple[Attachment, ...]) -> tuple[Attachment, ...]:
    return tuple(a for a in attachments if a.type == PATCH_TYPE or a.name.endswith((".patch", ".diff")))


class Commit(Frozen):
    """One commit a letter's patches would land: who wrote it, its subject, and the paths it
    touches (``A``/``M``/``D``/``T`` and the path; a symlink shows its target). Letter text:
    each field made one printable line."""

    patch: str  # the attachment it came from
    author: str
    subject: str
    paths: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"patch": self.patch, "author": self.author, "subject": self.subject, "paths": list(self.paths)}


class Applied(Frozen):
    """What ``apply`` did or, checking, would do: every commit, in order, and one summary line
    (``detail``). ``str()`` is what the CLI prints: the commits, then the summary."""

    commits: tuple[Commit, ...]
    landed: bool
    detail: str

    def __str__(self) -> str:
        lines: list[str] = []
        for number, commit in enumerate(self.commits, 1):
            lines.append(f"commit {number}/{len(self.commits)}: {commit.subject}")
            lines.append(f"  author: {commit.author}")
            lines.extend(f"  {path}" for path in commit.paths)
        return "\n".join([*lines, self.detail])


def _quiet_git(hooks: Path) -> list[str]:
    """git with no hook of the checkout's (``core.hooksPath`` an empty folder: tracked hooks,
    husky, ``.git/hooks`` alike) and no pager or editor."""
    return ["-c", f"core.hooksPath={hooks}", "-c", "core.pager=cat", "-c", "core.editor=false"]


def _am_flags(root: Path) -> list[str]:
    """``--no-verify`` where this git's am has it (newer gits; 2.39 has none); hooksPath covers every git."""
    probe = _git(["am", "-h"], root, "apply")
    return ["--no-verify"] if b"--no-verify" in probe.stdout + probe.stderr else []


def _git_words(proc: subprocess.CompletedProcess[bytes]) -> str:
    """git's error, without its hints: 'git am --show-current-patch' and '--continue' mean
    nothing once agentmail has aborted (the scratch worktree is gone)."""
    lines = [x for x in proc.stderr.decode("utf-8", "replace").splitlines() if x.strip()]
    lines = [x for x in lines if not x.lstrip().lower().startswith("hint:") and "git am --" not in x]
    return " ".join(" ".join(lines[:3]).split())[:300] or f"exit {proc.returncode}"


def _leaves(link: str, target: str, scratch: Path, checkout: Path) -> bool:
    """Does the symlink ``link`` (a path in the tree) pointing at ``target`` lead outside the
    checkout? Absolute targets unless into the checkout itself; relative ones that climb out
    (``..`` past the top), on their own or through the links already in the tree."""
    if os.path.isabs(target):
        return not _inside(os.path.realpath(target), os.path.realpath(checkout))
    lexical = os.path.normpath(os.path.join(os.path.dirname(link), target))
    if lexical == ".." or lexical.startswith(".." + os.sep):
        return True
    top = os.path.realpath(scratch)
    return not _inside(os.path.realpath(scratch / link), top)


def _leading_out(links: list[tuple[str, str, str]], scratch: Path, checkout: Path) -> list[str]:
    """Each of ``links`` (patch, link, target as made) that leads outside the checkout, as made
    or as the scratch tree now resolves it."""
    out = []
    for patch, link, target in links:
        here = scratch / link
        current = os.readlink(here) if os.path.islink(here) else target
        if _leaves(link, target, scratch, checkout) or _leaves(link, current, scratch, checkout):
            out.append(f"{patch}: {one_line(link)} -> {one_line(target)}")
    return out


def _commit_of(git: Callable[[list[str]], bytes], sha: str,
               patch: str) -> tuple[Commit, list[tuple[str, str]], list[str]]:  # fmt: skip
    """The commit ``sha`` as shown, each symlink it creates or changes (path, target), and
    every path it touches (as git names it, relative to the checkout's top)."""
    head = git(["show", "-s", "--format=%an <%ae>%x00%s", sha]).decode("utf-8", "replace")
    author, _, subject = head.rstrip("\n").partition("\0")
    raw = git(["diff-tree", "--root", "--no-commit-id", "-r", "-z", "--no-renames", sha]).split(b"\0")
    paths: list[str] = []
    links: list[tuple[str, str]] = []
    touched: list[str] = []
    for meta, name in zip(raw[0::2], raw[1::2], strict=False):
        fields = meta.decode("ascii", "replace").lstrip(":").split()
        if len(fields) < 5:
            continue
        touched.append(name.decode("utf-8", "surrogateescape"))
        new_mode, new_sha, status = fields[1], fields[3], fields[4][:1]
        path = one_line(name.decode("utf-8", "replace"))
        if new_mode == "120000":
            target = git(["cat-file", "blob", new_sha]).decode("utf-8", "replace")
            shown = f"{status} {path} -> {one_line(target)} (symlink)"
            links.append((name.decode("utf-8", "surrogateescape"), target))
        else:
            shown = f"{status} {path}"
        paths.append(shown)
    return Commit(patch, one_line(author), one_line(subject), tuple(paths)), links, touched


def guarded_places(home: Path | None = None, registry: Path | None = None) -> tuple[tuple[Path, str], ...]:
    """What no letter's patch may change: the agentmail home (keys, logins, spools, post office)
    and the registry in use (every pinned key, address and hold). Default: ``$AGENTMAIL_HOME``
    and the registry it names (``AGENTMAIL_REGISTRY``, else ``$AGENTMAIL_HOME/registry``), which
    stays guarded when another registry is in use."""
    home = agentmail_home() if home is None else home
    named = registry_dir(None, home)
    places = [(home, "the agentmail home"), (named if registry is None else registry, "the registry in use")]
    # ``--registry`` picks the registry in use, and the agent can write one of its own: the one
    # the environment names (the operator's choice, no argument's) stays guarded as well.
    if registry is not None and os.path.realpath(named) != os.path.realpath(registry):
        places.append((named, "the registry the environment names"))
    return tuple(places)


# How far into a guarded place its links are looked for: the registry's entries lie two below
# it; a home's spools hold their letters deeper, and never a link agentmail reads through.
_LINK_DEPTH = 3
_LINK_LOOKS = 4096


def _real_places(place: Path) -> list[str]:
    """``place`` as it resolves, and every place a link inside it leads to: agentmail reads an
    entry the registry links to (one entry, or platforms/ itself, kept elsewhere in the checkout)
    as surely as one that lies in it."""
    found = [os.path.realpath(place)]
    folders, looked = [(str(place), 0)], 0
    while folders and looked < _LINK_LOOKS:
        folder, depth = folders.pop(0)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries[: _LINK_LOOKS - looked]:
            looked += 1
            if entry.is_symlink():
                found.append(os.path.realpath(entry.path))
            elif depth + 1 < _LINK_DEPTH and entry.is_dir(follow_symlinks=False):
                folders.append((entry.path, depth + 1))
    return found


def _guarded_paths(touched: list[tuple[str, str]], checkout: Path,
                   guarded: Sequence[tuple[Path, str]]) -> list[str]:  # fmt: skip
    """Each (patch, path) of ``touched`` that lies in a guarded place (``place_of``), the path
    as the checkout's top joins it."""
    top = os.path.realpath(checkout)
    place_of = places_of(guarded)
    found = []
    for patch, path in touched:
        what = place_of(os.path.normpath(os.path.join(top, path)))
        if what is not None:
            found.append(f"{patch}: {one_line(path)} ({what})")
    return found


def places_of(guarded: Sequence[tuple[Path, str]]) -> Callable[[str], str | None]:
    """Which guarded place (its description) an absolute path lies in, or None: as it is
    written, as its folders resolve (a tracked ``registry/`` reached through a link), where a
    link inside a guarded place leads (``_real_places``), or the same folder under another name
    (a bind mount, a case-folding file system: the folder's device and inode). Apply and the
    MCP ``save`` ask this one question."""
    places = [(real, what) for place, what in guarded for real in _real_places(place)]
    folders = {_identity(place): what for place, what in reversed(places) if os.path.isdir(place)}

    def place_of(path: str) -> str | None:
        resolved = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        what = next((w for place, w in places if _inside(path, place) or _inside(resolved, place)), None)
        if what is None:
            what = next(filter(None, (folders.get(_identity(f)) for f in _folders_above(path))), None)
        return what

    return place_of


def _identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _folders_above(path: str) -> list[str]:
    """``path`` and the folders that hold it, up to the root."""
    out = [path]
    while os.path.dirname(out[-1]) != out[-1]:
        out.append(os.path.dirname(out[-1]))
    return out


# The files a coding host reads the commands it runs unasked (at every session, at every stop)
# from: what agentmail's hooks are written into (admin/hosts.py), never a letter's to change.
HOST_HOOK_FILES = (".claude/settings.json", ".claude/settings.local.json", ".codex/hooks.json", ".gemini/settings.json")
_HOST_WHAT = "a coding host's hook settings"


def _host_hooks(touched: list[tuple[str, str]], scratch: Path) -> list[str]:
    """Each (patch, path) of ``touched`` that is a host's hook settings file or its folder: by its
    name in any letter case (a case-folding file system reads it so), or as the patched tree
    resolves it (a folder link the patches made, ``conf`` -> ``.claude``)."""
    top = os.path.realpath(scratch)

    def key(path: str) -> str:
        return os.path.relpath(os.path.realpath(os.path.join(top, path)), top).casefold()

    # the files, as named and as the tree resolves them, and their folders (a link made there)
    watched = {name.casefold() for name in HOST_HOOK_FILES} | {key(name) for name in HOST_HOOK_FILES}
    watched |= {os.path.dirname(name).casefold() for name in HOST_HOOK_FILES}
    return [
        f"{patch}: {one_line(path)} ({_HOST_WHAT})"
        for patch, path in touched
        if os.path.normpath(path).casefold() in watched or key(path) in watched
    ]


def apply(attachments: tuple[Attachment, ...], cwd: str | Path = ".", *, check_only: bool = False,
          series: bool = False, guarded: Sequence[tuple[Path, str]] | None = None) -> Applied:  # fmt: skip
    """``git am`` the letter's patches (text/x-diff parts, in letter order) in the checkout at
    ``cwd``. They are first applied, one by one as ``git am`` would, in a scratch worktree at
    the checkout's HEAD, so a series whose later commits build on earlier ones checks as it
    lands; with ``check_only`` nothing more happens. No hook runs (``core.hooksPath`` an empty
    folder, ``--no-verify`` where git has it). Refused, with nothing changed: a dirty tree, a
    symlink whose target leaves the checkout, a path in a ``guarded`` place (default:
    ``guarded_places()``, the agentmail home and the registry in use: a letter never changes
    the trust anchors it is judged by), and (unless ``series``) an attachment holding more
    than one commit. Then the checkout is fast-forwarded to exactly the commits checked.
    Returns every commit (author, subject, paths) and a summary line; BadInput with git's
    words (its hints dropped) when it fails."""
    patches = patches_of(attachments)
    if not patches:
        raise NotFound("the letter carries no patches (text/x-diff attachments)")
    root = Path(cwd)
    top = _git(["rev-parse", "--show-toplevel"], root, "apply")
    if top.returncode != 0:
        raise BadInput(f"{root.resolve()} is not a git checkout")
    checkout = Path(top.stdout.decode("utf-8", "surrogateescape").strip())
    dirty = _git(["status", "--porcelain", "--untracked-files=no"], root, "apply")
    if dirty.returncode != 0 or dirty.stdout.strip():
        raise BadInput("the checkout has uncommitted changes; commit or stash them first")
    base_proc = _git(["rev-parse", "--verify", "-q", "HEAD^{commit}"], root, "apply")
    if base_proc.returncode != 0:
        raise BadInput("the checkout has no commit yet; apply needs one to build on")
    base = base_proc.stdout.decode().strip()
    with tempfile.TemporaryDirectory(prefix="agentmail-apply-") as tmp:
        hooks = Path(tmp) / "no-hooks"
        hooks.mkdir()
        scratch = Path(tmp) / "tree"
        quiet = _quiet_git(hooks)
        added = _git([*quiet, "worktree", "add", "--quiet", "--detach", str(scratch), base], root, "apply")
        if added.returncode != 0:
            raise BadInput(f"apply could not make a scratch worktree: {_git_words(added)}")
        try:
            commits, head = _try_in(scratch, checkout, patches, quiet, _am_flags(root), series,
                                    guarded_places() if guarded is None else guarded)  # fmt: skip
        finally:
            _git([*quiet, "worktree", "remove", "--force", str(scratch)], root, "apply")
            _git(["worktree", "prune"], root, "apply")
        count = f"{len(commits)} patch(es)"
        if check_only:
            return Applied(commits, False, f"{count} would apply cleanly")
        now = _git(["rev-parse", "--verify", "-q", "HEAD^{commit}"], root, "apply")
        if now.stdout.decode().strip() != base:
            raise BadInput("the checkout's HEAD moved while the patches were checked; nothing applied, run apply again")
        landed = _git([*quiet, "merge", "--ff-only", "--no-verify", "--quiet", head], root, "apply")
        if landed.returncode != 0:
            raise BadInput(f"apply could not land the checked commits (nothing changed): {_git_words(landed)}")
    return Applied(commits, True, f"applied {count} with git am")


def _try_in(scratch: Path, checkout: Path, patches: tuple[Attachment, ...], quiet: list[str], am: list[str],
            series: bool, guarded: Sequence[tuple[Path, str]] = ()) -> tuple[tuple[Commit, ...], str]:  # fmt: skip
    """``git am`` each patch in the scratch worktree, in order; (the commits, the new HEAD), or
    BadInput for a patch that does not apply, several commits in one attachment (unless
    ``series``), a symlink that leaves the checkout, or a path in a guarded place."""

    def git(args: list[str]) -> bytes:
        proc = _git([*quiet, *args], scratch, "apply")
        if proc.returncode != 0:
            raise BadInput(f"apply: git {args[0]} failed in the scratch worktree: {_git_words(proc)}")
        return proc.stdout

    commits: list[Commit] = []
    links: list[tuple[str, str, str]] = []  # (patch, link, target) of every symlink the patches make
    touched: list[tuple[str, str]] = []  # (patch, path) of every path the patches change
    folder = scratch.parent / "patches"
    folder.mkdir()
    for number, (item, name) in enumerate(zip(patches, unique_names(patches), strict=True), 1):
        file = folder / f"{number:04d}-{name}"
        file.write_bytes(item.data)
        before = git(["rev-parse", "HEAD"]).decode().strip()
        proc = _git([*quiet, "am", "--quiet", *am, "--", str(file)], scratch, "apply")
        if proc.returncode != 0:
            raise BadInput(f"git am failed (aborted, nothing changed): {name}: {_git_words(proc)}")
        shas = git(["rev-list", "--reverse", f"{before}..HEAD"]).decode().split()
        if len(shas) > 1 and not series:
            raise BadInput(f"attachment {name} holds {len(shas)} commits (several in one file); nothing applied; "
                           "'apply --series' lists and lands each of them ('apply --check --series' only lists)")  # fmt: skip
        for sha in shas:
            commit, made, paths = _commit_of(git, sha, name)
            commits.append(commit)
            links.extend((name, link, target) for link, target in made)
            touched.extend((name, path) for path in paths)
        leaving = _leading_out(links, scratch, checkout)  # the tree as it stands: a link made later counts
        if leaving:
            raise BadInput(f"refused: the patches make symlinks that lead outside the checkout "
                           f"({'; '.join(leaving)}); nothing applied")  # fmt: skip
    trusted = _guarded_paths(touched, checkout, guarded)
    if trusted:
        raise BadInput(f"refused: the patches change what agentmail trusts ({'; '.join(trusted)}); nothing "
                       "applied: keys, addresses and holds are the operator's to change ('agentmail keygen', "
                       "'add', 'person', 'bus set'), never a letter's")  # fmt: skip
    hooked = _host_hooks(touched, scratch)
    if hooked:
        raise BadInput(f"refused: the patches change {'; '.join(hooked)}; nothing applied: a host runs the "
                       "commands they name unasked, at every session ('agentmail hook install HOST' writes "
                       "agentmail's; change the others by hand)")  # fmt: skip
    return tuple(commits), git(["rev-parse", "HEAD"]).decode().strip()
