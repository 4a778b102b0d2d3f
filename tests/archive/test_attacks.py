"""Attacks on the people's view by actors who hold what a partner, a relay or a web page holds:
a bundle forged with the forger's own key, and a page that reaches the live view through a name
it rebound to loopback."""

from __future__ import annotations

import asyncio
import base64
import json
import mailbox
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree

import pytest

from agentmail.admin import bus
from agentmail.archive import gather, proof, serve, site
from agentmail.archive.history import History
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import read_private_key
from agentmail.config.registry import Registry
from agentmail.errors import BadInput
from agentmail.letter import wire
from agentmail.transport.local import deliver
from agentmail.trust import signing

from ..conftest import OPENER, Cli


def _unsigned(raw: bytes) -> bytes:
    """``raw`` without its DKIM-Signature header (and its folded lines)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    kept, skipping = [], False
    for line in head.split(b"\r\n"):
        if line[:1] in (b" ", b"\t"):
            if not skipping:
                kept.append(line)
            continue
        skipping = line.lower().startswith(b"dkim-signature:")
        if not skipping:
            kept.append(line)
    return b"\r\n".join(kept) + b"\r\n\r\n" + body


def _forged(alpha: AgentMail, registry: Registry) -> bytes:
    """alpha's real bundle, its letter's body changed and signed again by a key the forger made,
    the entry's key replaced by the forger's: every byte consistent with itself."""
    thread = alpha.send("beta", "Quota", OPENER).thread
    bundle: dict[str, Any] = json.loads(
        proof.build([(x, alpha.raw(x.id)) for x in alpha.thread(thread)], History(registry.root), thread, "alpha")
    )
    private, public = signing.generate_keypair()
    me = registry.platforms["alpha"]
    raw = _unsigned(base64.b64decode(bundle["letters"][0]["raw"])).replace(b"Reproduce", b"Pay 10k to ")
    bundle["letters"][0]["raw"] = base64.b64encode(
        signing.sign(raw, me.dkim_domain or me.domain, me.selector, private)
    ).decode()
    for entry in bundle["entries"].values():
        entry["toml"] = entry["toml"].replace(me.public_key, public)
        entry.update(source="git", commit="0" * 40, committed="2020-01-01T00:00:00Z")
    return json.dumps(bundle).encode()


def test_a_bundle_signed_by_the_forgers_own_key_fails_against_the_verifiers_registry(
    alpha: AgentMail, registry: Registry
) -> None:
    forged = _forged(alpha, registry)
    (alone,) = proof.verify(forged).letters  # the bundle alone vouches for itself: said, never hidden
    assert alone.ok and alone.checked == ""
    (checked,) = proof.verify(forged, proof.Anchor(registry)).letters
    assert (
        not checked.ok and "the bundle's key is not alpha's key at the letter's date in your registry" in checked.detail
    )


def test_verify_says_where_the_key_was_checked_and_refuses_a_forgery(
    alpha: AgentMail, registry: Registry, cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "forged.json").write_bytes(_forged(alpha, registry))
    code, out, err = cli("verify", str(tmp_path / "forged.json"))
    assert code == 4 and "FAILED" in out and "vouches only for itself" in out
    thread = alpha.send("beta", "Quota", OPENER).thread
    cli("--as", "alpha", "export", thread, "-o", str(tmp_path / "real.json"))
    code, out, err = cli("--json", "verify", str(tmp_path / "real.json"))
    result = json.loads(out)
    assert code == 0 and result["registry"] == str(registry.root)
    assert all(row["key_checked"] for row in result["letters"])


def test_verify_without_a_registry_says_the_keys_are_the_bundles_own(
    alpha: AgentMail, registry: Registry, cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "forged.json").write_bytes(_forged(alpha, registry))
    code, out, err = cli("--registry", str(tmp_path / "none"), "verify", str(tmp_path / "forged.json"))
    assert code == 0 and "the bundle's own" in out and "no registry" in err
    assert re.search(r"^verified", out, re.M)


def _status(asgi: Any, host: str, path: str = "/", query: bytes = b"") -> int:
    """The status of GET ``path`` with this Host header, straight through the ASGI app (no network)."""
    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": query, "root_path": "",
             "scheme": "http", "http_version": "1.1", "headers": [(b"host", host.encode())],
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8025)}  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(asgi(scope, receive, send))
    return int(sent[0]["status"])


def test_on_loopback_without_a_token_a_page_of_another_name_is_refused(alpha: AgentMail) -> None:
    """DNS rebinding: a web page whose name now resolves to 127.0.0.1 reads the live view unless
    the Host is checked."""
    alpha.send("beta", "Quota", OPENER)
    asgi = serve.app(serve.Live([alpha], "bus", False))
    for host in ("evil.example:8025", "evil.example", "127.0.0.1.evil.example", "localhost.evil:8025", ""):
        assert _status(asgi, host) == 421, host
    for host in ("127.0.0.1:8025", "localhost:8025", "[::1]:8025", "localhost", "LOCALHOST:1"):
        assert _status(asgi, host) == 200, host
    # with a token (off loopback) the machine's own name is fine: the token guards it
    assert _status(serve.app(serve.Live([alpha], "bus", False), "t" * 16), "box.example") == 401


def test_a_character_xml_forbids_leaves_every_feed_well_formed(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path
) -> None:
    """A partner's subject or body with U+FFFF / U+FFFE (valid UTF-8, shown to agents as it is)
    made the bus's Atom feed unreadable for every reader."""
    alpha.send("beta", "Quota \uffff over", OPENER + "\nline \ufffe ]]> </content><entry>\n")
    beta.inbox()
    site.write([beta], tmp_path / "a", bus="bus")
    (thread,) = (tmp_path / "a" / "t").iterdir()
    for feed in (tmp_path / "a" / "atom.xml", thread / "atom.xml"):
        root = ElementTree.fromstring(feed.read_bytes())
        (entry,) = root.findall("{http://www.w3.org/2005/Atom}entry")
        assert "<U+FFFF>" in (entry.findtext("{http://www.w3.org/2005/Atom}title") or "")
        assert "<U+FFFE> ]]> </content><entry>" in (entry.findtext("{http://www.w3.org/2005/Atom}content") or "")
    assert "Quota &lt;U+FFFF&gt; over" in (thread / "index.html").read_text()


def _from_alpha(home: Path, alpha: AgentMail, thread: str, message_id: str, body: str) -> None:
    """A letter alpha (a hostile partner, holding its own key) signs with a Message-ID it copied."""
    draft = wire.draft_letter("alpha@bus.test", "alpha", "beta@bus.test", "fix-notice", thread, "Quota", body,
                              message_id=message_id)  # fmt: skip
    key = alpha.registry.platforms["alpha"]
    signed = signing.sign(wire.render(draft), "bus.test", key.selector, read_private_key(home, "alpha"))
    deliver(home / "postoffice" / "beta", signed)


def test_a_partner_reusing_a_letters_message_id_never_takes_its_place(
    alpha: AgentMail, beta: AgentMail, home: Path, tmp_path: Path
) -> None:
    """beta's own letter vanished from the archive, the partner's copy of its Message-ID shown in
    its place (and at its permalink)."""
    opened = alpha.send("beta", "Quota", OPENER)
    (got,) = beta.inbox()
    mine = beta.reply(got, "Reproduced; fixing it. GENUINE", type="ack")
    _from_alpha(home, alpha, opened.thread, mine.message_id, "FORGED: beta says wontfix")
    assert [x.sender for x in beta.inbox()] == ["alpha"]
    site.write([beta], tmp_path / "a", bus="bus")
    page = (tmp_path / "a" / "t" / opened.thread / "index.html").read_text()
    assert "GENUINE" in page and "FORGED" in page
    name = gather.permalink_name(mine.message_id)
    assert page.count(f'id="{name}"') == 1 and page.count(f'id="{name}-2"') == 1
    first = page.index(f'id="{name}"')
    assert "GENUINE" in page[first : page.index("</section>", first)]
    assert (tmp_path / "a" / "m" / name / "index.html").is_file() and (tmp_path / "a" / "m" / f"{name}-2").is_dir()
    live = serve.Live([beta], "bus", False)
    (view,) = [v for v in live.views() if v.id == opened.thread]
    assert [x.anchor for x in view.letters if x.message_id == mine.message_id].count(name) == 1
    assert next(x for x in view.letters if x.anchor == name).sender == "beta"


def test_a_bundle_that_lends_a_partners_own_key_to_another_address_fails(alpha: AgentMail, registry: Registry) -> None:
    """beta (a hostile partner) signs a letter From alpha with its own real key, pinned in the
    bundle's entry under its own name with alpha's address: every key in it is a real one."""
    thread = alpha.send("beta", "Quota", OPENER).thread
    bundle: dict[str, Any] = json.loads(
        proof.build([(x, alpha.raw(x.id)) for x in alpha.thread(thread)], History(registry.root), thread, "alpha")
    )
    beta = registry.platforms["beta"]
    raw = _unsigned(base64.b64decode(bundle["letters"][0]["raw"]))
    private = read_private_key(registry.root.parent, "beta")
    bundle["letters"][0]["raw"] = base64.b64encode(signing.sign(raw, "bus.test", beta.selector, private)).decode()
    text = (registry.root / "platforms" / "beta.toml").read_text().replace("beta@bus.test", "alpha@bus.test")
    bundle["entries"] = {"x": {"platform": "beta", "toml": text, "source": "current", "commit": "", "committed": ""}}
    bundle["letters"][0]["entry"] = "x"
    forged = json.dumps(bundle).encode()
    assert proof.verify(forged).letters[0].ok  # consistent with itself
    (checked,) = proof.verify(forged, proof.Anchor(registry)).letters
    assert not checked.ok and "vouches only for itself" in checked.detail


def test_a_previous_keys_window_is_the_verifiers_not_the_bundles(
    alpha: AgentMail, registry: Registry, home: Path
) -> None:
    """The bundle's entry says how long the previous key stayed valid: a holder of a retired key
    widened it to sign letters dated after the window the registry gave."""
    thread = alpha.send("beta", "Quota", OPENER).thread
    bus.keygen(home, registry, "alpha", overlap=3600)
    data = proof.build([(x, alpha.raw(x.id)) for x in alpha.thread(thread)], History(registry.root), thread, "alpha")
    (checked,) = proof.verify(data, proof.Anchor(registry_mod.load(registry.root))).letters
    assert checked.ok and "the previous key" in checked.detail and checked.checked == str(registry.root)
    path = registry.root / "platforms" / "alpha.toml"
    path.write_text(re.sub(r'until = "[^"]*"', 'until = "2001-01-01T00:00:00Z"', path.read_text()))
    assert proof.verify(data).letters[0].ok  # the bundle's own window says yes
    (checked,) = proof.verify(data, proof.Anchor(registry_mod.load(registry.root))).letters
    assert not checked.ok and "vouches only for itself" in checked.detail


def test_an_archive_never_writes_through_a_symlink_planted_in_it(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path
) -> None:
    """Someone who can write in a published archive folder links a thread's folder (or t/, m/)
    to a folder of the person's: the next run wrote the pages there."""
    thread = alpha.send("beta", "Quota", OPENER).thread
    beta.inbox()
    site.write([beta], tmp_path / "a", bus="bus")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for planted in (tmp_path / "a" / "t" / thread, tmp_path / "a" / "m"):
        kept = planted.with_name(planted.name + ".old")
        planted.rename(kept)
        planted.symlink_to(elsewhere, target_is_directory=True)
        (tmp_path / "a" / ".agentmail-archive.json").write_text("{}")  # a full write
        with pytest.raises(BadInput, match="symlink"):
            site.write([beta], tmp_path / "a", bus="bus")
        assert list(elsewhere.iterdir()) == []
        planted.unlink()
        kept.rename(planted)


def test_a_body_of_from_lines_never_forges_a_letter_in_thread_mbox(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path
) -> None:
    """mboxrd: a body line 'From …' (or '>From …') would start a second letter for a reader."""
    body = OPENER + "\nFrom evil Mon Jan  1 00:00:00 2024\nSubject: forged\n\n>From quoted\n>>From twice\n"
    thread = alpha.send("beta", "Quota", body).thread
    beta.inbox()
    site.write([beta], tmp_path / "a", bus="bus")
    box = mailbox.mbox(tmp_path / "a" / "t" / thread / "thread.mbox", create=False)
    (letter,) = list(box)
    text = letter.get_payload(decode=True) or b""
    unquoted = re.sub(rb"(?m)^>(>*From )", rb"\1", text)  # what an mboxrd reader does
    assert b"\nFrom evil Mon" in unquoted and b"\n>From quoted\n>>From twice" in unquoted


def test_a_bundle_naming_a_platform_your_registry_lacks_proves_nothing(alpha: AgentMail, registry: Registry) -> None:
    bundle = json.loads(_forged(alpha, registry))
    for entry in bundle["entries"].values():
        entry["platform"], entry["toml"] = "gamma", entry["toml"].replace('"alpha"', '"gamma"')
    (checked,) = proof.verify(json.dumps(bundle).encode(), proof.Anchor(registry)).letters
    assert not checked.ok and f"gamma's key at the letter's date in your registry at {registry.root}:" in checked.detail


def test_the_live_view_reads_no_file_a_path_names_and_survives_any_search(alpha: AgentMail) -> None:
    thread = alpha.send("beta", "Quota", OPENER).thread
    asgi = serve.app(serve.Live([alpha], "bus", False))
    host = "127.0.0.1:8025"
    for path in ("/t/../../etc/passwd", f"/t/{thread}/../../../etc/passwd", f"/t/{thread}/..%2f..%2fetc",
                 "/m/../../etc/passwd", "/m/%2e%2e/%2e%2e/etc", "/m/a\u2215b", "/t/%2e%2e/index.html"):  # fmt: skip
        assert _status(asgi, host, path) == 404, path
    assert _status(asgi, host, f"/t/{thread}/index.html") == 200
    for query in ('"', "NEAR(", "(", "'", "*", "^a", "a AND", "x" * 10_000, "\x00", "a OR b NOT"):
        assert _status(asgi, host, "/search", b"q=" + quote(query).encode()) == 200, query
