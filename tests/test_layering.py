"""Dependencies flow one way (DESIGN §1), and each third-party library has one home module."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "agentmail"

# Lower layers never import higher ones.
LAYERS = [
    {"errors", "text", "model", "home", "_fs", "_value", "_toml", "ages"},
    {"matter", "mime", "attach", "html_text", "readable", "partly_signed", "wire"},
    {"signing", "verdicts", "registry", "recipients", "credentials", "identity", "human", "authenticity", "provenance"},
    {"transport", "claims"},
    {"spool"},
    {"guards", "compose", "route", "search", "evidence", "for_people", "approval"},
    {"client", "bus", "doctor", "announce", "digest", "escalation", "recheck"},
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


def _section(path: Path, heading: str) -> str:
    text = path.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def test_the_readme_code_map_and_design_1_name_every_module_of_the_layers() -> None:
    """The docs list what the code has: every module of LAYERS (the package's top-level modules
    and folders) in README's code map and in DESIGN §1's layer order."""
    import re

    root = PACKAGE.parent
    names = set().union(*LAYERS) - {"__init__"}
    present = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()
    }
    assert names == present - {"__init__"}, "LAYERS and the package differ"
    code_map = _section(root / "README.md", "## Code map")
    layers = _section(root / "docs" / "DESIGN.md", "## 1. Data flow")
    for where, text in (("README's code map", code_map), ("DESIGN §1", layers)):
        named = set(re.findall(r"`([A-Za-z_]+)/?`", text)) | {
            n for cell in re.findall(r"`([a-z_,\s]+)`", text) for n in re.split(r",\s*", cell)
        }
        missing = sorted(names - named)
        assert not missing, f"{where} does not name {missing}"
