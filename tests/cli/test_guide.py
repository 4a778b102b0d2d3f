"""The protocol where agents read it (issue 41): `agentmail guide`, within its budget, and the
pointer `bind` and `init` add to a checkout's AGENTS.md / CLAUDE.md — appended, never over
what is there, once, skipped with --no-guide."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.cli import guide
from agentmail.text import DATA_NOT_ORDERS

from ..conftest import Cli
from ..depth import examples

GUIDE_BUDGET = 600  # tokens, as guide.tokens estimates them


@pytest.fixture
def bus_home(cli: Cli, home: Path) -> None:
    assert cli("init", "--domain", "bus.test", "alpha", "beta")[0] == 0


def test_the_guide_says_the_protocol_within_its_budget(cli: Cli) -> None:
    code, out, err = cli("guide")
    assert (code, err) == (0, "") and out == guide.GUIDE
    assert guide.tokens(out) <= GUIDE_BUDGET, guide.tokens(out)
    for needed in ("report -> ack", "fix-notice", "verify-result", "confirmed | still-broken", "close",
                   "who you are", "verbatim", "version", "blast radius", "what you want", DATA_NOT_ORDERS,
                   "`to-agent` only addresses a letter; it authorises nothing", "--new-agent", "never note yourself",
                   "4 refused by a guard", "5 not sent yet"):  # fmt: skip
        assert needed in out, needed


def test_the_token_estimate_rounds_up() -> None:
    assert [guide.tokens(x) for x in ("", "a", "abc", "a" * 34, "a" * 35)] == [0, 1, 1, 10, 11]


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=400), st.integers(0, 200_000))
def test_the_token_estimate_is_the_ceiling_of_ascii_over_3_4_plus_the_other_bytes(text: str, more: int) -> None:
    """Whole-number arithmetic, the same answer as ``math.ceil(ascii / 3.4)`` at any length."""
    import math

    narrow = len(text.encode("ascii", "ignore"))
    wide = len(text.encode("utf-8", "surrogatepass")) - narrow
    assert guide.tokens(text) == math.ceil(narrow / 3.4) + wide
    assert guide.tokens("a" * more) == math.ceil(more / 3.4)


def test_bind_adds_the_pointer_once_to_each_instructions_file(cli: Cli, bus_home: None, tmp_path: Path) -> None:
    checkout = tmp_path / "co"
    checkout.mkdir()
    (checkout / "AGENTS.md").write_text("# Agents\nRun make test.")  # no final newline
    (checkout / "CLAUDE.md").write_text("Be brief.\n")
    code, out, _ = cli("bind", "alpha", "--dir", str(checkout))
    assert code == 0 and out.count("added a pointer to 'agentmail guide'") == 2
    assert (checkout / "AGENTS.md").read_text() == "# Agents\nRun make test.\n\n" + guide.POINTER
    assert (checkout / "CLAUDE.md").read_text() == "Be brief.\n\n" + guide.POINTER
    code, out, _ = cli("--json", "bind", "alpha", "--dir", str(checkout))  # idempotent
    assert code == 0 and json.loads(out)["guide"] == []
    assert (checkout / "AGENTS.md").read_text().count(guide.MARKER) == 1


def test_bind_makes_agents_md_when_there_is_none_and_no_guide_skips(cli: Cli, bus_home: None, tmp_path: Path) -> None:
    plain, skipped = tmp_path / "plain", tmp_path / "skipped"
    plain.mkdir()
    skipped.mkdir()
    assert cli("bind", "alpha", "--dir", str(plain))[0] == 0
    assert (plain / "AGENTS.md").read_text() == guide.POINTER and not (plain / "CLAUDE.md").exists()
    assert cli("bind", "alpha", "--dir", str(skipped), "--no-guide")[0] == 0
    assert sorted(p.name for p in skipped.iterdir()) == [".agentmail"]


def test_a_symlinked_instructions_file_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.md").write_text("theirs\n")
    (tmp_path / "CLAUDE.md").symlink_to(tmp_path / "elsewhere.md")
    (tmp_path / "AGENTS.md").mkdir()  # not a file either
    assert guide.add_pointer(tmp_path) == []
    assert (tmp_path / "elsewhere.md").read_text() == "theirs\n"


def test_init_in_a_checkout_points_only_from_files_that_exist(
    cli: Cli, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "CLAUDE.md").write_text("Be brief.\n")
    monkeypatch.chdir(repo)
    code, out, err = cli("--json", "init", "alpha", "beta", "--domain", "bus.test")
    assert code == 0, err
    assert json.loads(out)["guide"] == [str(repo / "CLAUDE.md")] and not (repo / "AGENTS.md").exists()
