"""A skipped test says why: the one test command prints every skip's reason (``-rs``), and every
skip in the tests gives one a reader can act on (README "Test" names the two a quick run has)."""

from __future__ import annotations

import ast
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_the_test_command_prints_each_skips_reason() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    flags = [word[2:] for word in shlex.split(options["addopts"]) if word.startswith("-r")]
    assert any("s" in flag or "a" in flag or "A" in flag for flag in flags), "addopts needs -rs"


def _reason(call: ast.Call) -> ast.expr | None:
    """The reason a ``pytest.skip(...)`` or ``pytest.mark.skipif(...)`` call gives."""
    named = {k.arg: k.value for k in call.keywords}
    if isinstance(call.func, ast.Attribute) and call.func.attr == "skip":
        return named.get("reason") or (call.args[0] if call.args else None)
    return named.get("reason")


def test_every_skip_gives_a_reason_in_words() -> None:
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in ("skip", "skipif") or not isinstance(node.func.value, ast.Attribute | ast.Name):
                continue
            reason = _reason(node)
            words = reason.value.split() if isinstance(reason, ast.Constant) and isinstance(reason.value, str) else []
            if len(words) < 3:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, "a skip without a reason in words: " + ", ".join(offenders)
