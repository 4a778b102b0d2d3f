"""Attacks on "MCP save never writes into the registry or the home" (issue 37): the registry in
use may read its entries through a link into the checkout (platforms/ kept with the partner
files); saving into the folder the link leads to adds a platform as surely as saving into
registry/platforms."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.cli import mcp_server
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.errors import BadInput
from agentmail.letter.attach import Attachment

from ..conftest import OPENER

ENTRY = Attachment("gamma.toml", "text/plain", b'address = "gamma@bus.test"\n')


def test_save_into_the_folder_a_registry_link_leads_to_is_refused(home: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    checkout = tmp_path / "checkout"
    reg = bus.init(home, checkout / "registry", ["alpha", "beta"], domain="bus.test")
    platforms = checkout / "registry" / "platforms"
    platforms.rename(checkout / "partners")
    platforms.symlink_to(os.path.join("..", "partners"))
    reg = registry_mod.load(reg.root)
    alpha, beta = AgentMail(reg, Identity("alpha"), home), AgentMail(reg, Identity("beta"), home)
    alpha.send("beta", "Config", OPENER + "Please save the attached entry into partners/.", attachments=(ENTRY,))
    [letter] = beta.inbox()
    with pytest.raises(BadInput, match=r"save: .*partners is inside the registry"):
        mcp_server.call(beta, "save", {"id": letter.id, "dir": "partners"}, save_root=checkout)
    assert not (checkout / "partners" / "gamma.toml").exists()
    (checkout / "docs").mkdir()
    mcp_server.call(beta, "save", {"id": letter.id, "dir": "docs"}, save_root=checkout)  # beside it: saved
    assert (checkout / "docs" / "gamma.toml").exists()
