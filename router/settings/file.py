"""Reading a config file into `RouterSettings`: YAML or JSON, `mcpServers`, `${VAR}`, `ROUTER_` overrides.

    settings = load_settings("examples/router.yaml")
    settings = load_settings("~/.cursor/mcp.json")   # mcpServers: command -> stdio, url -> HTTP

Sources, later ones winning: the file, then environment variables with the prefix ``ROUTER_`` and
``__`` between nesting levels (``ROUTER_ROUTING__ALPHA=0.6``), then explicit overrides. A file that names
no `state_dir` keeps its state in a per-user folder (`user_state_dir`); ``${MCP_ROUTER_STATE_DIR}`` in a
file is that folder (e.g. a launched server's store).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, SecretStr, ValidationError

from router.errors import ConfigError
from router.settings.router import RouterSettings

STATE_DIR_VAR = "MCP_ROUTER_STATE_DIR"
log = logging.getLogger("mcp_router.settings")
_STATE_MARK = "\x00state_dir\x00"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def load_settings(path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None,
                  overrides: Mapping[str, Any] | None = None) -> RouterSettings:
    """Read, expand and validate a config file; a bad file raises `ConfigError` naming file and field."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    where = "<defaults>"
    if path is not None:
        file = Path(path).expanduser()
        where = str(file)
        # ${MCP_ROUTER_STATE_DIR} names the state folder, known only once every file is read.
        data = _load_file(file, {STATE_DIR_VAR: _STATE_MARK, **env})
    _overlay_environment(data, env)
    _resolve_relative_paths(data, Path.cwd())  # a path the environment gave: from the working folder
    if path is not None:
        data.setdefault("state_dir", str(user_state_dir(file, env)))
        if not isinstance(data["state_dir"], str):
            raise ConfigError(f"{where}: state_dir must be a path (a string), got {type(data['state_dir']).__name__}",
                              file=where, field="state_dir")
        _substitute(data, _STATE_MARK, data["state_dir"])
        # The lock file beside the file named, unless this file or one it extends names one.
        if data.get("security") is None:  # `security:` with every key commented out
            data["security"] = {}
        if isinstance(security := data["security"], dict):
            security.setdefault("lock_file", str(file.parent.resolve() / "mcp-router.lock.json"))
    if overrides:
        _deep_merge(data, dict(overrides))
    try:
        return RouterSettings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_describe(exc)}", file=where) from None


def _load_file(file: Path, env: Mapping[str, str], seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """One file, expanded and with its paths resolved; `extends: other.yaml` starts from that file's
    settings and merges this one's over them (lists such as `backends` are replaced, not appended)."""
    where = str(file)
    try:
        raw = _read_file(file)
        servers = raw.pop("mcpServers", None)
        data = _expand_env(raw, env, where)
        if servers is not None:
            data["mcpServers"] = _expand_servers(servers, env, where)
        data = _from_mcp_servers(data, where)
    except RecursionError:
        # A YAML alias can refer to itself (`x: &a [*a]`): a value that never ends.
        raise ConfigError(f"{where}: a value refers to itself (a YAML alias inside its own anchor) or nests "
                          "too deeply",
                          file=where) from None
    _resolve_relative_paths(data, file.parent.resolve())
    base = data.pop("extends", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"{where}: extends must be a path to another config file", file=where)
    parent = (file.parent / base).resolve()
    if parent in seen or parent == file.resolve():
        raise ConfigError(f"{where}: extends {base} forms a cycle", file=where)
    merged = _load_file(parent, env, (*seen, file.resolve()))
    _deep_merge(merged, data)
    return merged


def _read_file(file: Path) -> dict[str, Any]:
    if not file.is_file():
        raise ConfigError(f"{file}: no such config file", file=str(file))
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte {exc.start})", file=str(file)) from None
    try:
        loaded = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{file}: not valid {'JSON' if file.suffix == '.json' else 'YAML'}: {_where(exc)}",
                          file=str(file)) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{file}: the top level must be a mapping, got {type(loaded).__name__}",
                          file=str(file))
    return loaded


def _where(exc: Exception) -> str:
    """What the parser found wrong and where, without the line itself: it may hold a key."""
    mark = getattr(exc, "problem_mark", None)
    if isinstance(exc, yaml.MarkedYAMLError) and mark is not None:
        return f"{exc.problem or 'a syntax error'} at line {mark.line + 1}, column {mark.column + 1}"
    return str(exc)


def _expand_env(value: Any, env: Mapping[str, str], where: str) -> Any:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in strings, so secrets can stay out of the file."""
    if isinstance(value, str):
        def sub(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise ConfigError(f"{where}: environment variable {name} is not set (referenced as ${{{name}}})",
                              file=where)
        return _ENV_REF.sub(sub, value)
    if isinstance(value, list):
        return [_expand_env(v, env, where) for v in value]
    if isinstance(value, dict):
        return {k: _expand_env(v, env, where) for k, v in value.items()}
    return value


def _expand_servers(servers: Any, env: Mapping[str, str], where: str) -> Any:
    """`mcpServers` entries expanded each with its own `env` over the router's: a client config passes a
    secret to `mcp-remote` as `"args": [..., "Bearer ${KEY}"], "env": {"KEY": ...}`."""
    if not isinstance(servers, dict):
        return servers
    out = {}
    for name, entry in servers.items():
        own = _expand_env(entry.get("env"), env, where) if isinstance(entry, dict) else None
        scope = {**env, **{k: v for k, v in own.items() if isinstance(v, str)}} if isinstance(own, dict) else env
        out[name] = _expand_env(entry, scope, where)
    return out


# How client configs name a server's transport; the older HTTP+SSE one is not spoken here.
_TRANSPORTS = {"stdio", "http", "streamable-http", "streamable_http", "streamableHttp"}


def _from_mcp_servers(data: dict[str, Any], where: str = "<config>") -> dict[str, Any]:
    """Turn Claude Desktop / Cursor ``mcpServers`` entries into backend specs."""
    servers = data.pop("mcpServers", None)
    if servers is None:
        return data
    if not isinstance(servers, dict):
        raise ConfigError(f"{where}: mcpServers must be a mapping of server name to its launch settings",
                          file=where)
    backends = data.get("backends") or []
    if not isinstance(backends, list):
        raise ConfigError(f"{where}: backends must be a list when mcpServers is also given, got "
                          f"{type(backends).__name__}", file=where, field="backends")
    backends = list(backends)
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: mcpServers.{name}: expected a mapping, got {type(entry).__name__}",
                              file=where)
        entry = dict(entry)
        for key in ("type", "transport"):
            given = entry.pop(key, None)
            if given is not None and given not in _TRANSPORTS:
                raise ConfigError(f"{where}: mcpServers.{name}.{key} {given!r} is not supported: the router speaks "
                                  "stdio and streamable HTTP (not the older HTTP+SSE transport)",
                                  file=where, field=f"mcpServers.{name}.{key}")
        spec: dict[str, Any] = {"name": name}
        if "command" in entry:
            spec["kind"] = "mcp_stdio"
        elif "url" in entry:
            spec["kind"] = "mcp_http"
        else:
            raise ConfigError(f"{where}: mcpServers.{name}: needs either 'command' (stdio) or 'url' (HTTP)",
                              file=where)
        # Cursor and Claude Desktop use `disabled`; the router calls it `enabled`.
        if "disabled" in entry:
            disabled = entry.pop("disabled")
            # `not "no"` would be False: only a real boolean may turn a server off.
            if not isinstance(disabled, bool):
                raise ConfigError(f"{where}: mcpServers.{name}.disabled must be true or false, got {disabled!r}",
                                  file=where, field=f"mcpServers.{name}.disabled")
            spec["enabled"] = not disabled
        spec.update(entry)
        backends.append(spec)
    data["backends"] = backends
    return data


def _resolve_relative_paths(data: dict[str, Any], base: Path) -> None:
    """Every path setting as an absolute path: `~` is the user's home, a relative one is from `base`."""
    def resolved(holder: Any, key: str) -> None:
        value = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(value, str) and _STATE_MARK not in value:  # that one is a path once the state folder is known
            path = Path(os.path.expanduser(value))
            holder[key] = str(path if path.is_absolute() else (base / path).resolve())

    for spec in data.get("backends") or []:
        for holder in (spec, spec.get("launch") if isinstance(spec, dict) else None):
            resolved(holder, "cwd")
    server = data.get("server")
    auth = server.get("auth") if isinstance(server, dict) else None
    resolved(auth.get("jwt") if isinstance(auth, dict) else None, "jwks_file")
    resolved(data.get("audit"), "path")
    resolved(data, "state_dir")
    resolved(data.get("security"), "lock_file")


def user_state_dir(config: Path, env: Mapping[str, str]) -> Path:
    """Where a configuration that names no `state_dir` keeps its state: a folder of the user's
    (`$XDG_STATE_HOME`, else `~/.local/state`) per configuration file, never the file's own folder, which
    may be an installed package."""
    root = Path(env.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "mcp-router"
    digest = hashlib.sha256(str(config.resolve()).encode()).hexdigest()[:8]
    return root / f"{config.stem}-{digest}"


def _substitute(value: Any, mark: str, text: str) -> Any:
    """Replace `mark` in every string of a nested value, in place."""
    if isinstance(value, dict):
        for k, v in value.items():
            value[k] = _substitute(v, mark, text)
    elif isinstance(value, list):
        value[:] = [_substitute(v, mark, text) for v in value]
    elif isinstance(value, str):
        return value.replace(mark, text)
    return value


def _overlay_environment(data: dict[str, Any], env: Mapping[str, str]) -> None:
    for key, raw in env.items():
        if not key.startswith("ROUTER_") or key.startswith("ROUTER_BACKEND"):
            continue
        path = [part.lower() for part in key[len("ROUTER_"):].split("__") if part]
        leaf = _setting(path) if path else _UNKNOWN
        if leaf is _UNKNOWN:  # ROUTER_SERVICE_HOST, say, which Kubernetes sets for a Service named "router"
            log.warning("environment variable %s names no setting; ignored", key)
            continue
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[path[-1]] = _text(raw, leaf) if _is_text(leaf) else _parse_scalar(raw)  # "abc #def" is a key, not YAML


_UNKNOWN = object()


def _setting(path: list[str]) -> Any:
    """The type of the setting at `path` (a key of a mapping setting, such as a policy's name, may stand
    anywhere a name goes); `_UNKNOWN` when no setting is there."""
    node: Any = RouterSettings
    for part in path:
        node = _container(node)
        if isinstance(node, type) and issubclass(node, BaseModel):
            field = node.model_fields.get(part)
            if field is None:
                return _UNKNOWN
            node = field.annotation
        elif get_origin(node) is dict:
            node = get_args(node)[1]
        else:
            return _UNKNOWN
    return node


def _container(annotation: Any) -> Any:
    """A model or a mapping within an optional or annotated type, else the type itself."""
    if get_origin(annotation) is Annotated:
        return _container(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        inner = [_container(a) for a in get_args(annotation) if a is not type(None)]
        return next((a for a in inner if get_origin(a) is dict or (isinstance(a, type) and issubclass(a, BaseModel))),
                    annotation)
    return annotation


def _is_text(annotation: Any) -> bool:
    """A setting whose value is text as it is written (a key, a URL, a name)."""
    if get_origin(annotation) in (Union, UnionType, Annotated):
        return any(_is_text(a) for a in get_args(annotation) if a is not type(None)) and not any(
            a in (int, float, bool) for a in get_args(annotation))
    return annotation in (str, SecretStr)


def _text(raw: str, annotation: Any) -> str | None:
    """A text setting's value as written; for one that may be unset, "", "null" or "~" unsets it."""
    unset = get_origin(annotation) in (Union, UnionType) and type(None) in get_args(annotation)
    return None if unset and raw.strip() in ("", "null", "Null", "NULL", "~") else raw


def _parse_scalar(raw: str) -> Any:
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def _deep_merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = value


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "<top level>"
        parts.append(f"{loc}: {err['msg']}")
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
