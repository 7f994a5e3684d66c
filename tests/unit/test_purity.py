"""The routing package is pure logic: no Ray, MCP, HTTP or web framework imports, even lazy ones."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROUTER = Path(__file__).resolve().parents[2] / "router"
FORBIDDEN = {"ray", "mcp", "httpx", "fastapi", "starlette"}
MODULES = sorted(ROUTER.rglob("*.py"))


def imported_roots(tree: ast.AST) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            roots.add(node.args[0].value.split(".")[0])
    return roots


def test_the_router_package_has_modules_to_check() -> None:
    names = {p.relative_to(ROUTER).as_posix() for p in MODULES}
    assert {"core.py", "retrieval/hybrid.py", "strategies/fallback.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(ROUTER).as_posix())
def test_router_module_imports_no_runtime_or_transport_library(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assert imported_roots(tree) & FORBIDDEN == set()


def test_the_import_check_would_catch_a_lazy_import() -> None:
    tree = ast.parse("def f():\n    import ray.serve\n    from httpx import AsyncClient\n")
    assert imported_roots(tree) >= {"ray", "httpx"}


def test_starting_ray_in_a_unit_test_fails_loudly() -> None:
    import ray

    with pytest.raises(RuntimeError, match="unit tests must not start Ray"):
        ray.init()
