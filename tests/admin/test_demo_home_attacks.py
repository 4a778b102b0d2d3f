"""Attacks on "demo --home builds only in a new or empty folder" (issue 37): a link that leads
nowhere yet is no new folder (the demo would build wherever the link is later pointed, or fail
with a bare 'File exists', exit 1)."""

from __future__ import annotations

from pathlib import Path

from ..conftest import Cli


def test_demo_on_a_dangling_link_is_refused_in_one_line_exit_6(cli: Cli, tmp_path: Path) -> None:
    link = tmp_path / "demo-home"
    link.symlink_to(tmp_path / "not-yet")
    code, out, err = cli("demo", "--home", str(link))
    assert code == 6 and out == "" and err.count("\n") == 1
    assert f"demo --home {link}: refused, it is not an empty folder" in err
    assert not (tmp_path / "not-yet").exists()
