"""The MCP server's argument check and save confinement, exact (written for mutation testing's
survivors, tests/MUTATION.md run 6): each refusal's wording, where it is cut, and what it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.cli import mcp_server
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.errors import BadInput
from agentmail.letter.attach import Attachment

from ..conftest import OPENER

ID_PATTERN = mcp_server.OPS["show"][1]["properties"]["id"]["pattern"]


def refusal(name: str, arguments: object) -> str:
    with pytest.raises(BadInput) as caught:
        mcp_server.check_arguments(name, arguments)
    return str(caught.value)


def test_a_refusal_names_the_path_of_the_bad_value_inside_an_argument() -> None:
    assert refusal("done", {"ids": ["ok1", "x y"]}) == (
        f"bad arguments for done: ids/1: 'x y' does not match {ID_PATTERN!r}"
    )


def test_a_refusal_without_a_path_has_no_prefix() -> None:
    assert refusal("show", {}) == "bad arguments for show: 'id' is a required property"
    assert refusal("whoami", {"x": 1}) == (
        "bad arguments for whoami: Additional properties are not allowed ('x' was unexpected)"
    )


def test_no_arguments_is_an_empty_object() -> None:
    assert mcp_server.check_arguments("whoami", None) == {}
    assert refusal("show", None) == "bad arguments for show: 'id' is a required property"


@pytest.mark.parametrize("length", [199, 200])
def test_a_refusal_of_up_to_200_characters_is_whole(length: int) -> None:
    value = "é" * (length - len(f"'' does not match {ID_PATTERN!r}"))
    text = f"{value!r} does not match {ID_PATTERN!r}"
    assert len(text) == length
    assert refusal("show", {"id": value}) == f"bad arguments for show: id: {text}"


@pytest.mark.parametrize("length", [201, 500])
def test_a_longer_refusal_is_cut_to_200_characters_with_an_ellipsis(length: int) -> None:
    value = "é" * (length - len(f"'' does not match {ID_PATTERN!r}"))  # not ASCII: no letter name holds it
    text = f"{value!r} does not match {ID_PATTERN!r}"
    assert len(text) == length
    assert refusal("show", {"id": value}) == f"bad arguments for show: id: {text[:199]}…"


@pytest.fixture
def outside(home: Path, tmp_path: Path) -> tuple[AgentMail, Path]:
    """beta, whose registry lies outside its home (in the folder the server saves below), and
    a letter to it carrying a forged registry entry."""
    registry = bus.init(home, tmp_path / "reg", ["alpha", "beta"], domain="bus.test",
                        endpoints={"new_threads_per_hour": 0})  # fmt: skip
    alpha, beta = AgentMail(registry, Identity("alpha"), home), AgentMail(registry, Identity("beta"), home)
    forged = Attachment("gamma.toml", "text/plain", b'[platform]\nname = "gamma"\n')
    alpha.send("beta", "Config", OPENER, attachments=(forged,))
    [letter] = beta.inbox()
    return beta, Path(letter.id)


def test_save_into_a_registry_outside_the_home_names_the_registry(
    outside: tuple[AgentMail, Path], tmp_path: Path
) -> None:
    beta, letter = outside
    text, failed = mcp_server.Tools(lambda: beta, tmp_path).run("save", {"id": str(letter), "dir": "reg/platforms"})
    platforms = (tmp_path / "reg" / "platforms").resolve()
    assert failed and text == (
        f"save: {platforms} is inside the registry ({(tmp_path / 'reg').resolve()}); choose a folder of the checkout"
    )
    assert not (platforms / "gamma.toml").exists()


def test_save_writes_below_the_folder_the_server_was_given_not_the_working_directory(
    outside: tuple[AgentMail, Path], tmp_path: Path
) -> None:
    beta, letter = outside
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    text, failed = mcp_server.Tools(lambda: beta, chosen).run("save", {"id": str(letter)})
    assert (text, failed) == (json.dumps({"saved": [str(chosen / "gamma.toml")]}, separators=(",", ":")), False)
    assert not (tmp_path / "gamma.toml").exists()  # the working directory


def test_save_below_a_file_is_refused(outside: tuple[AgentMail, Path], tmp_path: Path) -> None:
    beta, letter = outside
    (tmp_path / "afile").write_text("x")
    text, failed = mcp_server.Tools(lambda: beta, tmp_path).run("save", {"id": str(letter), "dir": "afile"})
    assert failed and text == "save: afile: afile is not a folder (save follows no symlink)"
    text, failed = mcp_server.Tools(lambda: beta, tmp_path / "afile").run("save", {"id": str(letter)})
    assert failed and text == (
        f"save: {tmp_path / 'afile'} ({mcp_server.SAVE_DIR_ENV} or the working directory): Not a directory"
    )
    assert (tmp_path / "afile").read_text() == "x"


def test_call_without_a_save_folder_saves_below_the_working_directory(
    outside: tuple[AgentMail, Path], tmp_path: Path
) -> None:
    beta, letter = outside
    assert Path.cwd() == tmp_path
    (tmp_path / "evidence").mkdir()
    assert mcp_server.call(beta, "save", {"id": str(letter), "dir": "evidence"}) == {
        "saved": [str(tmp_path / "evidence" / "gamma.toml")]
    }
