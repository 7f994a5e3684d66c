"""Where the configuration's paths lead: relative to the file (or, given by the environment, to the working
folder), `~` the home folder, the state folder and the lock file through `extends:` and environment overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.settings.file import load_settings
from tests.unit.test_config import NO_ENV, write


def test_relative_cwd_and_state_dir_are_resolved_against_the_config_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        state_dir: cache
        backends:
          - {name: local, kind: mcp_stdio, command: python, cwd: servers/local}
    """,
    )
    s = load_settings(path, environ=NO_ENV)
    assert s.state_dir == str((tmp_path / "cache").resolve())
    assert s.backends[0].cwd == str((tmp_path / "servers" / "local").resolve())  # type: ignore[union-attr]


def test_a_path_under_the_home_folder_is_there_not_in_a_folder_named_tilde(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = write(tmp_path, """
        state_dir: ~/mcpr-state
        security: {lock_file: ~/locks/mcp-router.lock.json}
        audit: {path: ~/audit.jsonl}
    """)
    s = load_settings(path, environ=NO_ENV)
    home = tmp_path / "home"
    assert (s.state_dir, s.security.lock_file, s.audit.path) == (
        str(home / "mcpr-state"), str(home / "locks" / "mcp-router.lock.json"), str(home / "audit.jsonl"))


def test_a_lock_file_named_in_an_extended_file_is_kept_and_the_default_is_beside_the_file_named(
        tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "child").mkdir()
    (tmp_path / "base" / "base.yaml").write_text("security: {lock_file: locks/prod.lock.json}\n")
    (tmp_path / "base" / "plain.yaml").write_text("routing: {alpha: 0.5}\n")
    child = tmp_path / "child" / "child.yaml"
    child.write_text("extends: ../base/base.yaml\n")
    assert load_settings(child, environ=NO_ENV).security.lock_file == str(tmp_path / "base/locks/prod.lock.json")
    child.write_text("extends: ../base/plain.yaml\n")
    assert load_settings(child, environ=NO_ENV).security.lock_file == str(tmp_path / "child/mcp-router.lock.json")


def test_a_state_folder_the_environment_names_is_the_one_the_file_refers_to_and_a_relative_one_is_from_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, """
        backends:
          - {name: kb, kind: mcp_stdio, command: kb, args: ["--store", "${MCP_ROUTER_STATE_DIR}/kb"]}
    """)
    s = load_settings(path, environ={"ROUTER_STATE_DIR": "/srv/state", "ROUTER_AUDIT__PATH": "audit.log"})
    assert s.state_dir == "/srv/state" and s.backends[0].args == ["--store", "/srv/state/kb"]  # type: ignore[union-attr]
    assert s.audit.path == str(tmp_path / "audit.log")


def test_state_dir_is_relative_to_the_config_file_or_a_per_user_folder(tmp_path: Path) -> None:
    named = load_settings(write(tmp_path, "state_dir: here\n"), environ=NO_ENV)
    assert named.state_dir == str((tmp_path / "here").resolve())
    xdg = {"XDG_STATE_HOME": str(tmp_path / "xdg")}
    unnamed = load_settings(write(tmp_path, "routing: {alpha: 0.5}\n"), environ=xdg)
    assert Path(unnamed.state_dir).parent == tmp_path / "xdg" / "mcp-router"


def test_a_security_section_with_every_key_commented_out_is_the_defaults(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, "security:\n  # pin_tools: true\n"), environ=NO_ENV)
    assert s.security.lock_file == str(tmp_path.resolve() / "mcp-router.lock.json")
