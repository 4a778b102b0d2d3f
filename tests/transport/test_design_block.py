"""DESIGN §2's ``Transport`` block is the interface in ``transport/base.py``: every method a
transport author implements or inherits is there, each with the arguments it takes."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from agentmail.transport.base import Transport

DESIGN = Path(__file__).parents[2] / "docs" / "DESIGN.md"


def _block() -> str:
    text = DESIGN.read_text()
    start = text.index("## 2. Transports")
    found = re.search(r"```python\n(class Transport\b.*?)```", text[start:], re.DOTALL)
    assert found is not None, "DESIGN §2 has no Transport block"
    return found.group(1)


def test_design_2_names_every_method_of_the_transport_with_its_arguments() -> None:
    block = _block()
    methods = {
        name: value for name, value in vars(Transport).items() if inspect.isfunction(value) and not name.startswith("_")
    }
    assert len(methods) >= 14  # the walk found the interface
    for name, function in methods.items():
        line = re.search(rf"^\s*def {name}\(self(.*?)\)", block, re.MULTILINE)
        assert line is not None, f"DESIGN §2's Transport block has no {name}"
        written = [p.strip().split("=")[0].lstrip("*") for p in line.group(1).split(",") if p.strip() not in ("", "*")]
        wanted = [p for p in inspect.signature(function).parameters if p != "self"]
        assert written == wanted, f"DESIGN §2 writes {name}({', '.join(written)}); base.py takes {wanted}"
    # the capabilities: every fact a transport states of itself, read by the client instead of its kind
    capabilities = [
        name
        for name, value in vars(Transport).items()
        if not name.startswith("_") and (isinstance(value, (bool, property)))
    ]
    assert len(capabilities) >= 4
    for name in capabilities:
        assert re.search(rf"^\s*{name}: bool", block, re.MULTILINE), f"DESIGN §2's Transport block has no {name}"
