"""What `pip install .` ships: the router's three layers under their own names and everything else of the
project under `mcp_router`; the model files and examples, and nothing a checkout accumulates (the example
servers' node_modules, state)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from mcp_router import examples
from router.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def test_every_package_folder_is_declared_and_nothing_else() -> None:
    folders = {name: Path(path) for name, path in SETUPTOOLS["package-dir"].items()}
    found = set()
    for top in ("router", "actors", "deployments", *map(str, folders.values())):
        for init in (ROOT / top).rglob("__init__.py"):
            if "node_modules" in init.parts:
                continue
            parts = init.parent.relative_to(ROOT).parts
            name = ".".join(parts)
            for installed, folder in folders.items():  # a mapped folder installs under its package name
                if parts[: len(folder.parts)] == folder.parts:
                    name = ".".join((installed, *parts[len(folder.parts):]))
            found.add(name)
    assert set(SETUPTOOLS["packages"]) == found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("wheel")
    node_modules = ROOT / "examples" / "node_modules"
    assert node_modules.is_dir(), "the example servers' node_modules are set up (make setup)"
    leftover = not (ROOT / "build").exists()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True, timeout=300)
    if leftover:  # setuptools builds in the checkout's build/: leave the checkout as it was
        shutil.rmtree(ROOT / "build", ignore_errors=True)
    (built,) = out.glob("*.whl")
    return zipfile.ZipFile(built).namelist()


def test_a_wheel_has_no_generic_top_level_names_and_ships_models_and_examples(wheel: list[str]) -> None:
    top = {name.split("/", 1)[0] for name in wheel if "dist-info" not in name}
    assert top == {"router", "actors", "deployments", "mcp_router"}
    assert "mcp_router/models/all-MiniLM-L6-v2-tool-retrieval/model.onnx" in wheel
    assert {"mcp_router/examples/router.yaml", "mcp_router/examples/servers/calculator.py",
            "mcp_router/examples/package-lock.json", "mcp_router/examples/docs/routing.md",
            "mcp_router/servers/knowledge_base/server.py", "router/stages/confidence_model.json"} <= set(wheel)
    assert not [n for n in wheel if "node_modules" in n or "/.state/" in n or "__pycache__" in n]


def test_the_bundled_example_keeps_its_state_outside_the_package(tmp_path: Path) -> None:
    settings = load_settings(examples.CONFIG, environ={"XDG_STATE_HOME": str(tmp_path)})
    state = Path(settings.state_dir)
    assert state.parent == tmp_path / "mcp-router" and examples.FOLDER not in state.parents
    kb = next(b for b in settings.backends if b.name == "knowledge-base")
    assert kb.launch is not None and f"{state}/rag" in kb.launch.args  # ${MCP_ROUTER_STATE_DIR}
