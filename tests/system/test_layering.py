"""Dependencies flow one way (DESIGN §1), and each third-party library has one home module."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "agentmail"

# Lower layers never import higher ones: the folders, in the order a letter passes them (the
# ground floor's modules are named one by one).
LAYERS = [
    {"errors", "text", "protocol", "model", "home", "_fs", "_value", "ages", "frame", "bounds"},
    {"config"},
    {"letter"},
    {"trust"},
    {"transport"},
    {"spool"},
    {"stages"},
    {"people"},
    {"client"},
    {"admin"},
    {"archive"},
    {"cli", "__main__", "__init__"},
]
OWNERS = {
    "frontmatter": {"letter.matter"},
    "yaml": {"letter.matter"},
    "dkim": {"trust.signing"},
    "nacl": {"trust.signing"},
    "authres": {"trust.auth_results"},
    "inscriptis": {"letter.html_text"},
    "lxml": {"letter.html_text"},
    "aiosmtplib": {"transport.smtpimap", "transport.logins", "transport.checkup"},
    "imapclient": {"transport.smtpimap", "transport.logins", "transport.checkup"},
    "tomli_w": {"admin.bus"},
    "mcp": {"cli.mcp_server"},
    "mcp_types": {"cli.mcp_server"},
    "anyio": {"cli.mcp_server"},
    "jsonschema": {"cli.mcp_server"},
    "jinja2": {"archive.pages"},
    "markupsafe": {"archive.pages"},
    "starlette": {"archive.serve"},
    "uvicorn": {"archive.serve"},
}


def _layer(module: str) -> int:
    top = module.split(".")[0]
    for index, names in enumerate(LAYERS):
        if top in names:
            return index
    raise AssertionError(f"module {module} is in no layer")


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """The imports under ``if TYPE_CHECKING:``: names for annotations, no dependency at run time."""
    blocks = [n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test).endswith("TYPE_CHECKING")]
    return {inner for block in blocks for stmt in block.body for inner in ast.walk(stmt)}


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    found = []
    typing_only = _type_checking_only(tree)
    for node in ast.walk(tree):
        if node in typing_only:
            continue
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


def test_people_imports_nothing_of_the_client_not_even_for_an_annotation() -> None:
    """people/ writes letters for people from values it is handed; the client sends them. An
    import of client/ there, even under TYPE_CHECKING, is the circle facade → people → facade."""
    found = []
    for path in sorted((PACKAGE / "people").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = "agentmail" if node.level == 2 else "agentmail.people" * (node.level == 1)
                named = ".".join(p for p in (base if node.level else "", node.module or "") if p)
                names = [named, *(f"{named}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n == "agentmail.client" or n.startswith("agentmail.client.") for n in names):
                found.append(f"{path.name}:{node.lineno}")
    assert found == [], found


def test_each_third_party_library_is_imported_only_where_it_is_wrapped() -> None:
    for name, path in _modules():
        for target, line in _imports(path):
            lib = target[1:]
            if target.startswith("!") and lib in OWNERS:
                assert name in OWNERS[lib], f"{name}:{line} imports {lib}"


def test_the_command_line_is_parsed_by_the_standard_library() -> None:
    """click's import was 18 ms of a 50 ms start (issue 11): argparse (``_args``) parses argv."""
    for name, path in _modules():
        assert "!click" not in {target for target, _ in _imports(path)}, f"{name} imports click"


def _section(path: Path, heading: str) -> str:
    text = path.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def _folder_rows(code_map: str) -> dict[str, set[str]]:
    """README code map rows: the folder (or "(ground)"/"(entry)") -> the modules its row names."""
    import re

    rows = {}
    for line in code_map.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`"):
            rows[cells[0].strip("`").rstrip("/")] = set(re.findall(r"`([A-Za-z_]+)`", cells[1]))
    return rows


def test_the_readme_code_map_is_the_folder_listing() -> None:
    """README's code map is the package's listing: a row per folder, in LAYERS order, naming
    exactly the modules that folder holds; the ground floor's and the entry points' rows name the
    top-level modules."""
    root = PACKAGE.parent
    rows = _folder_rows(_section(root / "README.md", "## Code map"))
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    for folder in folders:
        held = {p.stem for p in (PACKAGE / folder).glob("*.py")} - {"__init__"}
        assert rows.get(folder) == held, f"README's code map row {folder}/ does not name exactly {sorted(held)}"
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert rows.get("(ground)", set()) | rows.get("(entry)", set()) == top, "the top-level modules' rows differ"
    assert set().union(*LAYERS) == top | set(folders), "LAYERS and the package differ"
    layers = [_layer(name) for name in rows if name in folders]
    assert layers == sorted(layers), "the code map's folders are not in LAYERS order"


def test_design_1_names_every_folder_in_layer_order() -> None:
    text = _section(PACKAGE.parent / "docs" / "DESIGN.md", "## 1. Data flow")
    folders = [n for layer in LAYERS for n in layer if (PACKAGE / n / "__init__.py").exists()]
    for name in folders:
        assert f"`{name}/`" in text, f"DESIGN §1 does not name {name}/"


def _floor_lists(text: str) -> dict[str, set[str]]:
    """DESIGN §1's layering paragraph: each floor ("(ground)", a folder, "(entry)") -> the words
    of the parenthesis after it."""
    import re

    start = text.index("the ground floor (")
    paragraph = text[start : text.index("The layers are `LAYERS`", start)]
    found = re.findall(r"(the ground floor|`([a-z_]+)/`|the entry points)\s+\(([^()]*)\)", paragraph)
    names = {"the ground floor": "(ground)", "the entry points": "(entry)"}
    return {names.get(head, folder): set(re.findall(r"[A-Za-z_]+", inside)) for head, folder, inside in found}


def test_design_1_names_every_module_under_its_floor() -> None:
    """Every module file of the package is named in DESIGN §1's layering paragraph, in the
    parenthesis of its own floor (a new module is placed in the design when it is made)."""
    lists = _floor_lists(_section(PACKAGE.parent / "docs" / "DESIGN.md", "## 1. Data flow"))
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    for folder in folders:
        held = {p.stem for p in (PACKAGE / folder).glob("*.py")} - {"__init__"}
        missing = held - lists.get(folder, set())
        assert not missing, f"DESIGN §1 does not name {sorted(missing)} under {folder}/"
    top = {p.stem for p in PACKAGE.glob("*.py")}
    missing = top - lists.get("(ground)", set()) - lists.get("(entry)", set())
    assert not missing, f"DESIGN §1 names no floor for {sorted(missing)}"
    assert lists["(entry)"] == {"__main__", "__init__"} and lists["(ground)"] <= top


def test_the_tests_are_laid_out_by_the_wings_of_the_code() -> None:
    """Each test file sits in the folder of the wing it tests (tests/letter/ for agentmail/letter/, …),
    or in tests/system/ when it holds the whole (crash, concurrency, a new user, lint, layering)."""
    tests = PACKAGE.parent / "tests"
    wings = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} | {"system"}
    assert not list(tests.glob("test_*.py")), "a test file at tests/ top level: put it in its wing's folder"
    for path in tests.glob("*/test_*.py"):
        assert path.parent.name in wings, f"{path.relative_to(tests)}: tests/{path.parent.name}/ is no wing of the code"
    for wing in {p.parent.name for p in tests.glob("*/test_*.py")}:
        assert (tests / wing / "__init__.py").exists(), f"tests/{wing}/ has no __init__.py"


def _runtime_graph() -> dict[str, set[str]]:
    """Each module -> the package's modules it imports at run time (at the top or in a function)."""
    modules = dict(_modules())
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = (t for t, _ in _imports(path) if not t.startswith("!"))
        graph[name] = {t if t in modules else f"{t}.__init__" for t in targets} & set(modules)
    return graph


def _circle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path of imports from ``start`` back to itself, if there is one."""
    trail: dict[str, str] = {}
    todo = [start]
    while todo:
        here = todo.pop()
        for target in graph[here]:
            if target == start:
                path = [here]
                while path[-1] != start:
                    path.append(trail[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if target not in trail:
                trail[target] = here
                todo.append(target)
    return None


def test_no_module_imports_itself_back() -> None:
    """Within a layer imports may go either way, but never round: a circle (spool.migrate and
    spool.store were one) makes each half load the other, and which runs first decides what works."""
    graph = _runtime_graph()
    for name in sorted(graph):
        circle = _circle_through(graph, name)
        assert circle is None, f"an import circle: {' -> '.join(circle)}"


def _named_imports(package: Path) -> dict[str, set[str]]:
    """Each module of ``package`` (dotted, relative to it) -> the package's modules it names in
    any import, wherever it stands: under ``if TYPE_CHECKING:`` and in a function too (an
    annotation's import is a dependency of the design, if none of the run). ``from x import y``
    names both x and x.y. Package ``__init__`` modules are left out: the import system runs one
    before any module of its package, whatever imports what."""
    modules = {
        ".".join(p.relative_to(package).with_suffix("").parts): p
        for p in package.rglob("*.py")
        if p.name != "__init__.py"
    }
    prefix = package.name + "."
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                named.update(a.name.removeprefix(prefix) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join([*name.split(".")[: -node.level], *([node.module] if node.module else [])])
                else:
                    base = (node.module or "").removeprefix(prefix)
                named.add(base)
                named.update(f"{base}.{a.name}".lstrip(".") for a in node.names)
        graph[name] = (named & set(modules)) - {name}
    return graph


def test_no_circle_even_through_annotations_in_the_package_and_the_benchmarks() -> None:
    """A circle closed only by an ``if TYPE_CHECKING:`` import is still a circle of the design:
    the lower module is to name what it uses of the higher one's object (a small ``Protocol``),
    not import it (spool.depth -> spool.views, spool.recover and spool.home_claims -> spool.store,
    benchmarks.install -> benchmarks.common were the last)."""
    for package in (PACKAGE, PACKAGE.parent / "benchmarks"):
        graph = _named_imports(package)
        assert len(graph) > 10, f"{package.name}: the walk found no modules"
        for name in sorted(graph):
            circle = _circle_through(graph, name)
            assert circle is None, f"an import circle in {package.name}/: {' -> '.join(circle)}"


def test_the_annotations_circle_check_sees_type_checking_and_function_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .low import x\n")  # an __init__: no edge
    (package / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.high import Spool\n"
    )
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "high.py").write_text("def f():\n    from .. import low\n")
    (package / "alone.py").write_text("import pkg.low\nfrom pkg.sub import high\n")
    graph = _named_imports(package)
    assert graph == {"low": {"sub.high"}, "sub.high": {"low"}, "alone": {"low", "sub.high"}}
    assert _circle_through(graph, "low") == ["low", "sub.high", "low"]
    assert _circle_through(graph, "alone") is None


def test_the_circle_test_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circle_through(graph, "a") == ["a", "b", "c", "a"]
    assert _circle_through(graph, "d") is None
