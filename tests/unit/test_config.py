from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from router.errors import ConfigError
from router.settings import FlowiseSpec, McpHttpSpec, McpStdioSpec, RouterSettings
from router.settings.file import load_settings

NO_ENV: dict[str, str] = {}


def write(tmp_path: Path, text: str, name: str = "router.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_yaml_file_with_backends_and_routing_is_parsed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        backends:
          - name: time
            kind: mcp_stdio
            command: uvx
            args: [mcp-server-time]
            intents: [technical-analysis]
            timeout_s: 5
          - name: search
            kind: mcp_http
            url: https://search.example/mcp
            headers: {Authorization: Bearer abc}
          - name: flows
            kind: flowise
            url: http://localhost:3000
        routing:
          alpha: 0.4
          method: two_level
    """,
    )
    s = load_settings(path, environ=NO_ENV)
    time, search, flows = s.backends
    assert isinstance(time, McpStdioSpec) and time.command == "uvx" and time.args == ["mcp-server-time"]
    assert time.timeout_s == 5.0 and time.intents == ["technical-analysis"]
    assert isinstance(search, McpHttpSpec)
    assert search.headers["Authorization"].get_secret_value() == "Bearer abc"
    assert "abc" not in repr(search)  # headers are secrets
    assert isinstance(flows, FlowiseSpec)
    assert s.routing.alpha == 0.4 and s.routing.method == "two_level"
    assert s.routing.candidates == 5  # untouched defaults stay
    assert s.backend("search") is search and s.backend("nope") is None


def test_mcp_servers_json_becomes_stdio_and_http_backends(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
                    "remote": {"url": "https://remote.example/mcp", "type": "http"},
                    "off": {"command": "node", "args": ["server.js"], "disabled": True},
                }
            }
        )
    )
    s = load_settings(path, environ=NO_ENV)
    by_name = {b.name: b for b in s.backends}
    assert by_name["time"].kind == "mcp_stdio"
    assert isinstance(by_name["time"], McpStdioSpec) and by_name["time"].env == {"TZ": "UTC"}
    assert by_name["remote"].kind == "mcp_http"
    assert (
        isinstance(by_name["remote"], McpHttpSpec) and by_name["remote"].url == "https://remote.example/mcp"
    )
    assert by_name["off"].enabled is False
    assert [b.name for b in s.enabled_backends] == ["time", "remote"]


def test_a_client_configs_entry_expands_its_own_env_and_an_sse_server_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    remote = {"command": "npx", "args": ["mcp-remote", "https://x.example/mcp", "--header",
                                         "Authorization:Bearer ${REMOTE_KEY}"], "env": {"REMOTE_KEY": "k-123"}}
    path.write_text(json.dumps({"mcpServers": {"remote": remote}}))
    s = load_settings(path, environ={"REMOTE_KEY": "the router's own"})  # was refused unset, or took this one
    assert s.backends[0].args[-1] == "Authorization:Bearer k-123"  # type: ignore[union-attr]
    path.write_text(json.dumps({"mcpServers": {"legacy": {"url": "https://x.example/sse", "type": "sse"}}}))
    with pytest.raises(ConfigError, match=r"mcpServers.legacy.type 'sse' is not supported"):
        load_settings(path, environ=NO_ENV)  # was taken for streamable HTTP, and down at run time


def test_mcp_servers_entry_without_command_or_url_names_file_and_entry(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"broken": {"args": ["x"]}}}))
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ=NO_ENV)
    assert str(path) in info.value.message
    assert "mcpServers.broken" in info.value.message
    assert info.value.details["file"] == str(path)


def test_invalid_field_raises_config_error_naming_file_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        routing:
          alpha: 2.5
    """,
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ=NO_ENV)
    assert str(path) in info.value.message
    assert "routing.alpha" in info.value.message
    assert info.value.details["file"] == str(path)


def test_unknown_field_is_rejected_with_its_path(tmp_path: Path) -> None:
    path = write(tmp_path, "routing:\n  alpah: 0.3\n")
    with pytest.raises(ConfigError, match=r"routing\.alpah"):
        load_settings(path, environ=NO_ENV)


def test_backend_field_error_names_the_backend_position(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        backends:
          - name: web
            kind: mcp_http
            url: ftp://nope
    """,
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ=NO_ENV)
    assert "backends.0.mcp_http.url" in info.value.message


def test_bad_yaml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "routing: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML") as info:
        load_settings(path, environ=NO_ENV)
    assert str(path) in info.value.message


def test_bad_json_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "{not json", name="mcp.json")
    with pytest.raises(ConfigError, match="not valid JSON") as info:
        load_settings(path, environ=NO_ENV)
    assert str(path) in info.value.message


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match="no such config file") as info:
        load_settings(path, environ=NO_ENV)
    assert str(path) in info.value.message


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping, got list"):
        load_settings(path, environ=NO_ENV)


def test_empty_file_gives_defaults(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, ""), environ=NO_ENV)
    assert s.backends == [] and s.routing.alpha == 0.6


def test_env_references_are_expanded_with_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        backends:
          - name: web
            kind: mcp_http
            url: ${WEB_URL}
            headers: {Authorization: "Bearer ${TOKEN}"}
          - name: mem
            kind: mcp_stdio
            command: npx
            env: {FILE: "${MEM_FILE:-/tmp/memory.jsonl}", EMPTY: "${UNSET_EMPTY:-}"}
    """,
    )
    s = load_settings(path, environ={"WEB_URL": "https://web.example/mcp", "TOKEN": "s3cret"})
    web, mem = s.backends
    assert isinstance(web, McpHttpSpec) and isinstance(mem, McpStdioSpec)
    assert web.url == "https://web.example/mcp"
    assert web.headers["Authorization"].get_secret_value() == "Bearer s3cret"
    assert mem.env == {"FILE": "/tmp/memory.jsonl", "EMPTY": ""}


def test_a_set_variable_wins_over_its_default(tmp_path: Path) -> None:
    path = write(tmp_path, "state_dir: ${STATE:-/tmp/default-state}\n")
    assert load_settings(path, environ={"STATE": "/var/lib/router"}).state_dir == "/var/lib/router"


def test_an_unset_variable_without_default_names_variable_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, "state_dir: ${NOT_SET_ANYWHERE}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ=NO_ENV)
    assert "NOT_SET_ANYWHERE" in info.value.message
    assert str(path) in info.value.message


def test_router_environment_variables_overlay_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        routing:
          alpha: 0.8
          candidates: 7
    """,
    )
    s = load_settings(
        path,
        environ={
            "ROUTER_ROUTING__ALPHA": "0.3",
            "ROUTER_RESILIENCE__EJECTION__CONSECUTIVE_FAILURES": "2",
            "ROUTER_SERVER__INGRESS": "proxy",
            "ROUTER_BACKENDS": "ignored",
            "OTHER_ROUTING__ALPHA": "0.9",
        },
    )
    assert s.routing.alpha == 0.3
    assert s.routing.candidates == 7  # siblings from the file survive
    assert s.resilience.ejection.consecutive_failures == 2
    assert s.server.ingress == "proxy"


def test_environment_overlay_works_without_a_file() -> None:
    s = load_settings(None, environ={"ROUTER_ROUTING__ALPHA": "0.25"})
    assert s.routing.alpha == 0.25


def test_environment_variables_that_name_no_setting_are_ignored_and_text_settings_taken_as_written(
        caplog: pytest.LogCaptureFixture) -> None:
    # Kubernetes sets ROUTER_SERVICE_HOST and ROUTER_PORT for a Service named "router": start failed on them.
    s = load_settings(None, environ={"ROUTER_SERVICE_HOST": "10.0.0.7", "ROUTER_PORT": "tcp://10.0.0.7:8000",
                                     "ROUTER_LLM__API_KEY": "abc #def", "ROUTER_LLM__MODEL": "0x1F",
                                     "ROUTER_ROUTING__ALPHA": "0.4"})
    assert s.llm.api_key is not None and s.llm.api_key.get_secret_value() == "abc #def"  # not YAML's "abc"
    assert s.llm.model == "0x1F" and s.routing.alpha == 0.4
    assert "ROUTER_SERVICE_HOST names no setting" in caplog.text
    unset = load_settings(None, environ={"ROUTER_LLM__BASE_URL": "", "ROUTER_AUDIT__PATH": "null"})
    assert unset.llm.base_url is None and unset.audit.path is None  # an optional text setting may be unset


def test_a_bad_environment_value_is_reported_with_its_field(tmp_path: Path) -> None:
    path = write(tmp_path, "routing: {alpha: 0.5}\n")
    with pytest.raises(ConfigError, match=r"routing\.alpha"):
        load_settings(path, environ={"ROUTER_ROUTING__ALPHA": "lots"})


def test_overrides_are_merged_last(tmp_path: Path) -> None:
    path = write(tmp_path, "routing: {alpha: 0.5, candidates: 9}\n")
    s = load_settings(path, environ={"ROUTER_ROUTING__ALPHA": "0.3"}, overrides={"routing": {"alpha": 0.1}})
    assert s.routing.alpha == 0.1
    assert s.routing.candidates == 9


def test_duplicate_backend_names_are_rejected(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        backends:
          - {name: twin, kind: mcp_stdio, command: a}
          - {name: twin, kind: mcp_http, url: "http://x"}
    """,
    )
    with pytest.raises(ConfigError, match="backend name 'twin' is used twice"):
        load_settings(path, environ=NO_ENV)


def test_unknown_backend_intents_are_rejected_listing_the_allowed_ones(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        backends:
          - {name: poet, kind: mcp_stdio, command: a, intents: [poetry]}
    """,
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ=NO_ENV)
    msg = info.value.message
    assert "poet" in msg and "poetry" in msg and "document-qa" in msg


def test_custom_intents_make_their_names_valid(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        intents:
          default: chat
          intents:
            chat: {description: small talk}
            poetry: {description: poems, keywords: [poem]}
        backends:
          - {name: poet, kind: mcp_stdio, command: a, intents: [poetry]}
    """,
    )
    s = load_settings(path, environ=NO_ENV)
    assert s.backends[0].intents == ["poetry"]
    assert set(s.intents.intents) == {"chat", "poetry"}


def test_the_default_intent_must_be_defined(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        intents:
          default: missing
          intents: {chat: {description: small talk}}
    """,
    )
    with pytest.raises(ConfigError, match=r"intents\.default 'missing'"):
        load_settings(path, environ=NO_ENV)


def test_flow_backend_api_key_comes_from_the_named_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLOWISE_KEY_FOR_TEST", "k-123")
    spec = FlowiseSpec(name="f", url="http://localhost:3000", api_key_env="FLOWISE_KEY_FOR_TEST")
    assert spec.resolved_api_key() == "k-123"
    inline = FlowiseSpec(
        name="g",
        url="http://localhost:3000",
        api_key="inline",  # type: ignore[arg-type]
        api_key_env="FLOWISE_KEY_FOR_TEST",
    )
    assert inline.resolved_api_key() == "inline"


def test_settings_are_frozen() -> None:
    s = RouterSettings()
    with pytest.raises(Exception, match="frozen"):
        s.routing.alpha = 0.1  # type: ignore[misc]


def test_a_yaml_error_names_its_place_but_not_the_line_which_may_hold_a_key(tmp_path: Path) -> None:
    path = write(tmp_path, "llm:\n  api_key: sk-live-SECRET: oops\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "line 2" in info.value.message and "SECRET" not in info.value.message
