"""Imports sit at the top of each module (issue 27), except the ones DESIGN §1's table "Imported
where first used" names with the start-up path that does without them: an import inside a
function that the table does not name fails here, and so does a row naming one that is gone."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "agentmail"
DESIGN = PACKAGE.parent / "docs" / "DESIGN.md"


def _target(path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """What one import statement loads: a standard or third-party module by its dotted name, an
    agentmail module relative to the package (``letter.wire``; ``transport`` for its package)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not node.level:
        return [node.module or ""]
    base = list(path.parent.relative_to(PACKAGE).parts)
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    parts = base + (node.module.split(".") if node.module else [])
    found = []
    for alias in node.names:
        candidate = PACKAGE.joinpath(*parts, alias.name)
        is_module = candidate.with_suffix(".py").exists() or (candidate / "__init__.py").exists()
        found.append(".".join([*parts, alias.name] if is_module else parts))
    return found


def _in_functions(path: Path) -> set[str]:
    """The imports inside a function (at any depth), not counting ``if TYPE_CHECKING:`` blocks."""
    found: set[str] = set()

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test).endswith("TYPE_CHECKING"):
                continue
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                found.update(_target(path, child))
            walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    walk(ast.parse(path.read_text()), False)
    return found


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def _table() -> dict[str, set[str]]:
    text = DESIGN.read_text()
    start = text.index("**Imported where first used.**")
    end = text.index("\n\n", text.index("| module |", start))
    rows: dict[str, set[str]] = {}
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            assert cells[0].strip("`") not in rows, f"DESIGN §1 names {cells[0]} twice"
            rows[cells[0].strip("`")] = set(re.findall(r"`([A-Za-z_][\w.]*)`", cells[1]))
    return rows


def test_every_function_level_import_is_in_design_1s_table_and_every_row_is_still_one() -> None:
    table = _table()
    assert len(table) > 20  # the parse found the table
    actual = {_module_name(p): _in_functions(p) for p in sorted(PACKAGE.rglob("*.py"))}
    for module, imported in actual.items():
        unlisted = imported - table.get(module, set())
        assert not unlisted, (
            f"{module} imports {sorted(unlisted)} inside a function: move it up, or say why in DESIGN §1"
        )
    for module, listed in table.items():
        gone = listed - actual.get(module, set())
        assert not gone, f"DESIGN §1 says {module} imports {sorted(gone)} inside a function; it no longer does"


def test_the_check_sees_a_function_level_import_and_ignores_type_checking(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import ssl\n"
        "def f():\n    if TYPE_CHECKING:\n        import socket\n    def g():\n        from email import policy\n"
        "    import json\n"
    )
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    assert _in_functions(probe) == {"email", "json"}  # nested functions too; annotations' imports not
