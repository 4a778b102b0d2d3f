"""Evidence and patches on disk: reading files and ``git format-patch`` output into
attachments, saving a letter's attachments, and ``git am`` of its patches.

Nothing here runs or opens an attachment: saving writes bytes (0600, never outside the chosen
directory, never over a file without ``force``); applying hands patch text to git in the
current checkout, and only when the tree is clean.
"""

from __future__ import annotations

import mimetypes
import os
import re
import subprocess
import tempfile
from pathlib import Path

from .attach import Attachment, safe_name, unique_names
from .errors import BadInput, ConfigError, NotFound

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


def from_file(path: str | Path, max_bytes: int) -> Attachment:
    """The file at ``path`` as an attachment (read at most ``max_bytes`` + 1 bytes: a larger
    file is refused without reading it whole). BadInput when it cannot be read."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise BadInput(f"--attach {path}: not a readable file")
    try:
        with file.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise BadInput(f"--attach {path}: {exc.strerror or exc.__class__.__name__}") from None
    if len(data) > max_bytes:
        raise BadInput(
            f"attachment refused: {file.name} is larger than {max_bytes} bytes, what an attachment may be "
            "(bus set attach_max_bytes)"
        )
    return Attachment(safe_name(file.name), type_of(file, data), data)


def _git(args: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, timeout=_GIT_TIMEOUT, stdin=subprocess.DEVNULL, check=False
        )
    except FileNotFoundError:
        raise ConfigError(f"{what} needs git, which is not installed") from None
    except subprocess.TimeoutExpired:
        raise BadInput(f"{what}: git did not finish within {_GIT_TIMEOUT} s") from None


def _error(proc: subprocess.CompletedProcess[bytes]) -> str:
    lines = [x for x in proc.stderr.decode("utf-8", "replace").splitlines() if x.strip()]
    return " ".join(" ".join(lines[:3]).split())[:300] or f"exit {proc.returncode}"


_SUBJECT = re.compile(rb"^Subject: (.*(?:\n[ \t].*)*)", re.MULTILINE)


def _subject(patch: bytes) -> str:
    """The commit subject of one format-patch file (its Subject, unfolded, without [PATCH n/m])."""
    from email.header import decode_header, make_header

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
            raise BadInput(f"--patch {rev_range}: git format-patch failed: {_error(proc)}")
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
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
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


def apply(attachments: tuple[Attachment, ...], cwd: str | Path = ".", *, check_only: bool = False) -> str:
    """``git am`` the letter's patches (text/x-diff parts, in letter order) in the checkout at
    ``cwd``; with ``check_only``, ``git apply --check`` them instead and change nothing. Refuses
    a dirty tree. Returns what happened, one line; BadInput with git's words when it fails (a
    failed ``git am`` is aborted, leaving the tree as it was)."""
    patches = patches_of(attachments)
    if not patches:
        raise NotFound("the letter carries no patches (text/x-diff attachments)")
    root = Path(cwd)
    top = _git(["rev-parse", "--show-toplevel"], root, "apply")
    if top.returncode != 0:
        raise BadInput(f"{root.resolve()} is not a git checkout")
    dirty = _git(["status", "--porcelain", "--untracked-files=no"], root, "apply")
    if dirty.returncode != 0 or dirty.stdout.strip():
        raise BadInput("the checkout has uncommitted changes; commit or stash them first")
    with tempfile.TemporaryDirectory(prefix="agentmail-apply-") as tmp:
        files = []
        for number, (item, name) in enumerate(zip(patches, unique_names(patches), strict=True), 1):
            file = Path(tmp) / f"{number:04d}-{name}"
            file.write_bytes(item.data)
            files.append(str(file))
        if check_only:
            proc = _git(["apply", "--check", *files], root, "apply --check")
            if proc.returncode != 0:
                raise BadInput(f"the patches do not apply: {_error(proc)}")
            return f"{len(files)} patch(es) would apply cleanly"
        proc = _git(["am", "--", *files], root, "apply")
        if proc.returncode != 0:
            _git(["am", "--abort"], root, "apply")
            raise BadInput(f"git am failed (aborted, nothing changed): {_error(proc)}")
    return f"applied {len(files)} patch(es) with git am"
