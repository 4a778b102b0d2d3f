"""A proof bundle (``agentmail export`` / ``verify``): a thread's letters checked offline against
the registry entries in force when each was signed, taken from the registry's git history, so a
thread still proves itself after the keys rotated; and any bundle, however hostile, is read
without a traceback."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.archive import proof
from agentmail.archive.history import History
from agentmail.client.facade import AgentMail
from agentmail.config.registry import Registry
from agentmail.errors import BadInput

from ..conftest import OPENER, Cli
from ..depth import examples


def _git(root: Path, *args: str, when: float | None = None) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    if when is not None:
        env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"] = f"@{int(when)} +0000"
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)


def _commit(root: Path, message: str, when: float) -> None:
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", message, when=when)


def _thread(alpha: AgentMail, beta: AgentMail) -> str:
    opened = alpha.send("beta", "Quota", OPENER)
    (got,) = beta.inbox()
    beta.reply(got, "Reproduced; fixing it.", type="ack")
    alpha.inbox()
    return opened.thread


@pytest.fixture
def rotated(alpha: AgentMail, beta: AgentMail, registry: Registry, home: Path) -> str:
    """A thread of two letters, then both keys rotated (no overlap) in a later commit."""
    root = registry.root
    _git(root, "init", "-q")
    _commit(root, "the bus", time.time() - 86400)
    thread = _thread(alpha, beta)
    for name in ("alpha", "beta"):
        bus.keygen(home, registry, name)
    _commit(root, "keys rotated", time.time() + 3600)  # after the letters' dates
    return thread


def test_a_thread_proves_itself_after_its_keys_rotated(rotated: str, cli: Cli, tmp_path: Path) -> None:
    code, out, err = cli("--as", "alpha", "export", rotated, "-o", str(tmp_path / "proof.json"))
    assert code == 0, err
    code, out, err = cli("verify", str(tmp_path / "proof.json"))
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2 and all(line.startswith("verified ") for line in lines)
    assert "alpha@bus.test" in lines[0] and "beta@bus.test" in lines[1]
    assert all("[key: git " in line for line in lines)  # each key read from the history


def test_without_the_history_the_rotated_keys_prove_nothing(rotated: str, registry: Registry, cli: Cli,
                                                             tmp_path: Path) -> None:  # fmt: skip
    """The same export from a registry that is no git checkout: only today's keys, which signed nothing."""
    subprocess.run(["rm", "-rf", str(registry.root / ".git")], check=True)
    assert cli("--as", "alpha", "export", rotated, "-o", str(tmp_path / "p.json"))[0] == 0
    code, out, err = cli("verify", str(tmp_path / "p.json"))
    assert code == 4 and "2 of 2 letters" in err
    assert all(line.startswith("FAILED") and "[key: current registry]" in line for line in out.splitlines())


def test_a_letter_changed_in_the_bundle_fails_and_says_why(rotated: str, cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "proof.json"
    cli("--as", "alpha", "export", rotated, "-o", str(path))
    bundle = json.loads(path.read_text())
    raw = base64.b64decode(bundle["letters"][1]["raw"])
    bundle["letters"][1]["raw"] = base64.b64encode(raw.replace(b"Reproduced", b"Never saw")).decode()
    path.write_text(json.dumps(bundle))
    code, out, err = cli("--json", "verify", str(path))
    assert code == 4 and "1 of 2 letters" in err
    rows = json.loads(out)["letters"]
    assert [r["ok"] for r in rows] == [True, False] and "body changed" in rows[1]["detail"]


def _bundle_with_previous(alpha: AgentMail, registry: Registry, home: Path, until: str | None) -> bytes:
    """A bundle of alpha's opener whose entry pins a new key and keeps the signing key as
    ``[dkim.previous]`` (until ``until``, or as keygen wrote it)."""
    thread = alpha.send("beta", "Quota", OPENER).thread
    bus.keygen(home, registry, "alpha", overlap=3600)
    bundle = json.loads(proof.build([(x, alpha.raw(x.id)) for x in alpha.thread(thread)], History(registry.root),
                                    thread, "alpha"))  # fmt: skip
    if until is not None:
        (entry,) = bundle["entries"].values()
        entry["toml"] = re.sub(r'until = "[^"]*"', f'until = "{until}"', entry["toml"])
    return json.dumps(bundle).encode()


def test_a_letter_by_the_previous_key_verifies_inside_its_window(alpha: AgentMail, registry: Registry,
                                                                 home: Path) -> None:  # fmt: skip
    (checked,) = proof.verify(_bundle_with_previous(alpha, registry, home, None)).letters
    assert checked.ok and "the previous key" in checked.detail and checked.entry == "current registry"


def test_a_letter_by_the_previous_key_dated_after_its_window_fails(alpha: AgentMail, registry: Registry,
                                                                   home: Path) -> None:  # fmt: skip
    (checked,) = proof.verify(_bundle_with_previous(alpha, registry, home, "2001-01-01T00:00:00Z")).letters
    assert not checked.ok and "after its window ended at 2001-01-01T00:00:00Z" in checked.detail


def _one_letter_bundle(alpha: AgentMail, registry: Registry) -> dict[str, Any]:
    thread = alpha.send("beta", "Quota", OPENER).thread
    built = proof.build([(x, alpha.raw(x.id)) for x in alpha.thread(thread)], History(registry.root), thread, "alpha")
    bundle: dict[str, Any] = json.loads(built)
    return bundle


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda b: b["entries"].clear(), "no registry entry"),
        (lambda b: b["letters"][0].update(raw="!!not base64"), "not base64"),
        (lambda b: b["letters"][0].update(raw=base64.b64encode(b"Subject: x\r\n\r\nhi\r\n").decode()), "does not parse"),
        (lambda b: [e.update(toml="name = [") for e in b["entries"].values()], "does not read"),
        (lambda b: [e.update(toml=e["toml"].replace("alpha@bus.test", "gamma@bus.test")) for e in b["entries"].values()],
         "is not alpha's address"),
        (lambda b: [e.update(toml=e["toml"].replace('lookup = "pinned"', 'lookup = "dns"').replace("[dkim]", '[dkim]\nlookup = "dns"'))
                    for e in b["entries"].values()], "looked up in DNS"),
    ],
)  # fmt: skip
def test_a_letter_that_cannot_be_proved_says_why(alpha: AgentMail, registry: Registry, change: Any, why: str) -> None:
    bundle = _one_letter_bundle(alpha, registry)
    change(bundle)
    (checked,) = proof.verify(json.dumps(bundle).encode()).letters
    assert not checked.ok and why in checked.detail


def test_an_unsent_letter_is_left_out_and_an_empty_thread_refused(alpha: AgentMail, registry: Registry) -> None:
    thread = alpha.send("beta", "Quota", OPENER).thread
    (letter,) = alpha.thread(thread)
    with pytest.raises(BadInput, match="nothing to prove"):
        proof.build([(letter.replace(state="held"), b"")], History(registry.root), thread, "alpha")


@pytest.mark.parametrize(
    "data",
    [b"\xff", b"[]", b'{"format": "x"}', b'{"format": "agentmail-proof/1", "thread": "nope"}',
     b'{"format": "agentmail-proof/1", "thread": "thr-abcdef", "entries": {}, "letters": []}',
     b'{"format": "agentmail-proof/1", "thread": "thr-abcdef", "entries": {"a": 1}, "letters": [{}]}',
     b'{"format": "agentmail-proof/1", "thread": "thr-abcdef", "entries": {"a": {}}, "letters": [{}]}',
     b'{"format": "agentmail-proof/1", "thread": "thr-abcdef", "entries": {}, "letters": [1]}',
     b'{"format": "agentmail-proof/1", "thread": "thr-abcdef", "entries": {}, "letters": [{"raw": 1}]}',
     b"[" * 100_000],
)  # fmt: skip
def test_no_bundle_is_bad_input(data: bytes) -> None:
    with pytest.raises(BadInput, match="proof bundle|thread id"):
        proof.verify(data)


def test_verify_of_a_missing_file_or_no_bundle_is_one_line(cli: Cli, tmp_path: Path) -> None:
    code, out, err = cli("verify", str(tmp_path / "none.json"))
    assert code == 2 and "cannot read" in err and len(err.splitlines()) == 1
    (tmp_path / "bad.json").write_bytes(b"\x00\x01")
    code, out, err = cli("verify", str(tmp_path / "bad.json"))
    assert code == 2 and "not a proof bundle" in err


def test_export_into_a_missing_folder_is_bad_input(alpha: AgentMail, cli: Cli, tmp_path: Path) -> None:
    thread = alpha.send("beta", "Quota", OPENER).thread
    code, out, err = cli("--as", "alpha", "export", thread, "-o", str(tmp_path / "no" / "such" / "p.json"))
    assert code == 2 and "cannot write" in err


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(400), deadline=None)
@given(
    thread=st.sampled_from(["thr-abcdef", "thr-0123456789", "x"]),
    entries=st.dictionaries(st.text(max_size=8), _json, max_size=3)
    | st.dictionaries(st.text(max_size=8), st.fixed_dictionaries(
        {k: st.text(max_size=80) for k in ("platform", "toml", "source", "commit", "committed")}), max_size=2),
    letters=st.lists(_json | st.fixed_dictionaries({"raw": st.text(max_size=200) | st.binary(max_size=200).map(
        lambda b: base64.b64encode(b).decode()), "entry": st.text(max_size=8)}), max_size=3),
    junk=st.binary(max_size=40),
)  # fmt: skip
def test_a_hostile_bundle_is_refused_or_judged_never_a_crash(thread: str, entries: Any, letters: Any,
                                                             junk: bytes) -> None:  # fmt: skip
    for data in (json.dumps({"format": proof.FORMAT, "thread": thread, "entries": entries, "letters": letters}).encode(),
                 junk):  # fmt: skip
        try:
            checked = proof.verify(data).letters
        except BadInput:
            continue
        assert checked and not any(c.ok for c in checked)  # nothing made up verifies
