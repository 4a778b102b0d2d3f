"""The least a signed, verified delivery can cost: figure 1's second floor.

    python signed_floor.py wait MAILDIR      # DKIM_RECORD in the environment: the key's TXT record

The writer (``deliver``, in the timing process) signs the letter with dkimpy exactly as
agentmail does (``signing.sign``: ed25519-sha256, relaxed/simple, the same headers) and delivers
it as ``bare.deliver`` does (tmp write + fsync + rename + dir fsync). The reader, another
process with dkimpy imported before it blocks, wakes on inotify, reads the file, has dkimpy
verify it against the pinned record, moves it to ``cur/`` durably (rename + fsync of the
folder: what showing a letter once needs) and prints its name. No registry, no guards, no
spool: what is left between this and figure 1 is agentmail's own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import dkim

try:
    from . import bare
except ImportError:  # run as a script
    import bare  # type: ignore[no-redef]

from agentmail.trust import signing


def deliver(maildir: Path, unsigned: bytes, domain: str, selector: str, private_b64: str) -> str:
    return bare.deliver(maildir, signing.sign(unsigned, domain, selector, private_b64))


def unsigned(raw: bytes) -> bytes:
    """``raw`` without its first header, the DKIM-Signature agentmail put on top (folded lines)."""
    assert raw.lower().startswith(b"dkim-signature:"), "the letter does not start with its signature"
    end = 0
    while True:
        end = raw.index(b"\r\n", end) + 2
        if raw[end : end + 1] not in (b" ", b"\t"):
            return raw[end:]


def wait_and_verify(maildir: Path, record: bytes) -> str:
    name, raw = bare.next_letter(maildir)
    if not dkim.verify(raw, dnsfunc=lambda _name, timeout=5: record):
        raise SystemExit(f"{name} does not verify")
    # Shown once: the letter moves to cur/ durably before it is shown (a reader that crashes
    # after printing must not show it again as new).
    os.rename(maildir / "new" / name, maildir / "cur" / name)
    bare.fsync_dir(maildir / "cur")
    return name


if __name__ == "__main__":
    if sys.argv[1:2] != ["wait"] or len(sys.argv) != 3:
        sys.exit(2)
    print(wait_and_verify(Path(sys.argv[2]), os.environ["DKIM_RECORD"].encode()), flush=True)
