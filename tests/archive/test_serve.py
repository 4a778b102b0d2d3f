"""``agentmail serve``: the archive's pages live on loopback, read-only, with search, permalinks
that redirect to their letter, the pages' policy as headers, and a token off loopback."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail

from ..conftest import OPENER, Cli
from .live import served


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _get(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    opener = urllib.request.build_opener(_NoRedirect)
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with opener.open(request, timeout=60) as answer:
            return answer.status, dict(answer.headers), answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode("utf-8", "replace")


def _thread(alpha: AgentMail, beta: AgentMail) -> str:
    opened = alpha.send("beta", "Quota limits", OPENER)
    (got,) = beta.inbox()
    beta.reply(got, "Reproduced with zanzibar; fixing it.", type="ack")
    return opened.thread


def test_the_live_view_serves_the_pages_read_only(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    thread = _thread(alpha, beta)
    (first,) = [x for x in alpha.thread(thread) if x.type == "report"]
    with served(home, "--as", "alpha") as url:
        status, headers, index = _get(url)
        assert status == 200 and thread in index and 'http-equiv="refresh"' in index
        assert headers["content-security-policy"].startswith("default-src 'none'")
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        status, _, page = _get(f"{url}t/{thread}/index.html")
        assert status == 200 and page.count('class="letter"') == 2 and "zanzibar" in page  # synced as it loads
        status, headers, _ = _get(f"{url}m/{first.message_id.strip('<>')}")
        assert status == 303 and headers["location"].endswith(f"/t/{thread}/index.html#{first.message_id.strip('<>')}")
        assert _get(f"{url}m/{first.message_id}")[0] == 303  # with its brackets, as a mail client shows it
        assert _get(f"{url}m/nobody@nowhere")[0] == 404
        status, _, found = _get(f"{url}search?q=zanzibar")
        assert status == 200 and found.count('class="hit"') == 1
        assert "1 letter(s)" in found
        assert "there is a problem" not in _get(f"{url}search?q=%22unbalanced")[2]
        assert _get(f"{url}t/{thread}/thread.mbox")[2].startswith("From agentmail ")
        assert "<feed" in _get(f"{url}t/{thread}/atom.xml")[2] and "<feed" in _get(f"{url}atom.xml")[2]
        assert _get(f"{url}t/thr-nonesuch/index.html")[0] == 404
        assert _get(f"{url}t/{thread}/other.txt")[0] == 404
        for method in ("POST", "PUT", "DELETE"):
            assert _get(url, method)[0] == 405  # nothing is changed from a browser
        assert "by state" in _get(f"{url}by-state.html")[2]


def test_a_token_guards_every_page(alpha: AgentMail, beta: AgentMail, home: Path, tmp_path: Path) -> None:
    _thread(alpha, beta)
    (tmp_path / "token").write_text("a-token-of-some-length\n")
    with served(home, "--as", "alpha", options=("--token-file", str(tmp_path / "token"))) as url:
        base, _, query = url.partition("?")
        assert query == "token=a-token-of-some-length"
        assert _get(base)[0] == 401 and _get(f"{base}?token=wrong-token-of-length")[0] == 401
        status, headers, _ = _get(url)
        assert status == 200 and "HttpOnly" in headers["set-cookie"] and "SameSite=Strict" in headers["set-cookie"]
        assert _get(base, headers={"Cookie": "agentmail_token=a-token-of-some-length"})[0] == 200
        assert _get(base, headers={"Authorization": "Bearer a-token-of-some-length"})[0] == 200


@pytest.mark.parametrize(
    ("argv", "code", "said"),
    [
        (["serve", "--listen", "0.0.0.0:0"], 6, "needs --token"),
        (["serve", "--listen", "nonsense"], 2, "must be HOST:PORT"),
        (["serve", "--listen", "127.0.0.1:99999"], 2, "must be HOST:PORT"),
        (["serve", "--token", "short"], 2, "at least 16"),
        (["serve", "--token-file", "/nonexistent/token"], 2, "cannot read a token"),
        (["serve", "--listen", "192.0.2.1:0", "--token", "a-token-of-some-length"], 6, "cannot listen"),
    ],
)
def test_serve_refuses_what_it_cannot_do_in_one_line(alpha: AgentMail, cli: Cli, argv: list[str], code: int,
                                                     said: str) -> None:  # fmt: skip
    got, out, err = cli("--as", "alpha", *argv)
    assert got == code and said in err and len(err.strip().splitlines()) == 1


def test_serve_without_the_web_extra_says_how_to_install_it(alpha: AgentMail, cli: Cli,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import agentmail.archive

    monkeypatch.delitem(sys.modules, "agentmail.archive.serve", raising=False)
    monkeypatch.delattr(agentmail.archive, "serve", raising=False)
    for name in ("uvicorn", "starlette.applications"):  # as if never installed (submodules may be loaded)
        monkeypatch.setitem(sys.modules, name, None)
    code, out, err = cli("--as", "alpha", "serve")
    assert code == 6 and "pip install 'agentmail[web]'" in err and "uvicorn is missing" in err
