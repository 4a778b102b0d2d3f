"""Dependencies flow one way (DESIGN §1), and each third-party library has one home module."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "agentmail"

# Lower layers never import higher ones.
LAYERS = [
    {"errors", "text", "model", "home", "_fs", "_value", "_toml"},
    {"matter", "mime", "attach", "html_text", "readable", "wire"},
    {"signing", "verdicts", "registry", "recipients", "credentials", "identity", "human", "authenticity", "provenance"},
    {"transport"},
    {"spool"},
    {"guards", "compose", "route", "search", "evidence", "approval"},
    {"client", "bus", "doctor"},
    {"demo", "_args", "cli", "__main__", "__init__", "mcp_server", "hooks", "watch"},
]
OWNERS = {
    "frontmatter": {"matter"},
    "yaml": {"matter"},
    "dkim": {"signing"},
    "nacl": {"signing"},
    "authres": {"verdicts"},
    "inscriptis": {"html_text"},
    "lxml": {"html_text"},
    "aiosmtplib": {"transport"},
    "imapclient": {"transport"},
    "tomli_w": {"bus"},
    "mcp": {"mcp_server"},
    "mcp_types": {"mcp_server"},
    "anyio": {"mcp_server"},
    "jsonschema": {"mcp_server"},
}


def _layer(module: str) -> int:
    top = module.split(".")[0]
    for index, names in enumerate(LAYERS):
        if top in names:
            return index
    raise AssertionError(f"module {module} is in no layer")


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = path.parent.relative_to(PACKAGE).parts if path.parent != PACKAGE else ()
            parts = list(base[: len(base) - (node.level - 1)] if node.level > 1 else base)
            if node.module:
                parts += node.module.split(".")
                found.append((".".join(parts) or "__init__", node.lineno))
            else:
                found.extend((".".join([*parts, alias.name]), node.lineno) for alias in node.names)
        elif isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found.extend(("!" + n.split(".")[0], node.lineno) for n in names)
    return found


def _modules() -> list[tuple[str, Path]]:
    return [(".".join(p.relative_to(PACKAGE).with_suffix("").parts), p) for p in PACKAGE.rglob("*.py")]


def test_imports_point_down_the_data_flow() -> None:
    for name, path in _modules():
        own = _layer(name)
        for target, line in _imports(path):
            if target.startswith("!"):
                continue
            assert _layer(target) <= own, f"{name}:{line} imports {target}, a higher layer"


def test_each_third_party_library_is_imported_only_where_it_is_wrapped() -> None:
    for name, path in _modules():
        for target, line in _imports(path):
            lib = target[1:]
            if target.startswith("!") and lib in OWNERS:
                assert name.split(".")[0] in OWNERS[lib], f"{name}:{line} imports {lib}"


def test_the_command_line_is_parsed_by_the_standard_library() -> None:
    """click's import was 18 ms of a 50 ms start (issue 11): argparse (``_args``) parses argv."""
    for name, path in _modules():
        assert "!click" not in {target for target, _ in _imports(path)}, f"{name} imports click"
