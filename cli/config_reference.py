"""The configuration reference (docs/configuration.md), generated from the pydantic settings.

The settings classes in `router.settings` are the one source of truth for names, types, defaults,
constraints and descriptions; this module walks them and renders markdown, so the reference cannot
drift from the code (tests/unit/test_config_reference.py compares the file with a fresh rendering):

    python -m mcp_router.cli.config_reference > docs/configuration.md
"""

from __future__ import annotations

import json
import sys
import types
import typing
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from router.settings import RouterSettings

REGENERATE = "python -m mcp_router.cli.config_reference > docs/configuration.md"

_HEADER = f"""# Configuration reference

<!-- Generated from router/settings/; do not edit by hand. Regenerate with:
     {REGENERATE} -->

One YAML file configures the router (`mcp-router serve --config FILE`; the bundled example is
[examples/router.yaml](../examples/router.yaml)). A JSON file in the `mcpServers` format of Claude
Desktop and Cursor works as it is: an entry with `command` becomes an `mcp_stdio` backend, one with
`url` an `mcp_http` backend (a `type` of `sse`, the older HTTP+SSE transport, is refused by name; an
entry's `${{VAR}}` is looked up in its own `env` first). `${{VAR}}` and `${{VAR:-default}}` in values are
expanded from the environment; a path starting `~` is in the home folder, and a relative one is relative to the file (to
the working folder when an environment variable gives it). Environment variables with the prefix
`ROUTER_` override settings, with `__` between levels: `ROUTER_ROUTING__ALPHA=0.5` (backends are
set in the file only; a text setting takes the value as written, others read it as YAML; a variable that
names no setting, such as the `ROUTER_SERVICE_HOST` Kubernetes sets, is ignored with a warning). Unknown keys
and out-of-range values in the file stop start-up with a message naming the file and the field.

`extends: other.yaml` (relative to the file) starts from that file's settings and merges this one's
over them: mappings merge key by key, lists such as `backends` are replaced whole
([examples/secure.yaml](../examples/secure.yaml) extends the bundled example with keys). A file that
names no `state_dir` keeps its state in a per-user folder (below), and `${{MCP_ROUTER_STATE_DIR}}` in
any value is that folder (e.g. a launched server's store).

Every section below is one settings class; a setting written `routing.weights` is a section of
its own further down. Secrets (`SecretStr`) are never logged or returned by any endpoint.
"""

# Constraint attributes of annotated_types / pydantic metadata, in the order they are shown.
_CONSTRAINTS = (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"),
                ("min_length", "min length"), ("max_length", "max length"), ("pattern", "pattern"))


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _union_args(tp: Any) -> tuple[Any, ...]:
    tp = _strip_annotated(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return tuple(_strip_annotated(arg) for arg in typing.get_args(tp))
    return ()


def type_name(tp: Any) -> str:
    """A short, readable name for a field's type: `float`, `list[str]`, `LaunchSpec | None`."""
    tp = _strip_annotated(tp)
    if tp is type(None):
        return "None"
    members = _union_args(tp)
    if members:
        if all(_is_model(m) for m in members):
            return "backend (see the kinds below)"
        return " | ".join(type_name(m) for m in members)
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(json.dumps(v) for v in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(type_name(a) for a in typing.get_args(tp))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if tp is SecretStr:
        return "secret string"
    if _is_model(tp):
        return "mapping"  # a section of its own, rendered further down
    return getattr(tp, "__name__", str(tp))


def _shown_value(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "(section below)"
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
        return ", ".join(f"`{k}`" for k in value)
    return f"`{json.dumps(value)}`"


def default_text(field: FieldInfo) -> str:
    """The default as the YAML would spell it, or *required*."""
    if field.is_required():
        return "*required*"
    if field.default_factory is not None:
        return _shown_value(field.default_factory())  # type: ignore[call-arg]
    if field.default is PydanticUndefined:
        return "*required*"
    return _shown_value(field.default)


def constraints_text(field: FieldInfo) -> str:
    """The field's bounds and pattern, e.g. `> 0, ≤ 600`."""
    parts: list[str] = []
    for attr, label in _CONSTRAINTS:
        for item in field.metadata:
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(f"{label} `{value}`" if attr == "pattern" else f"{label} {value}")
    return ", ".join(parts)


def _nested_models(tp: Any) -> Iterator[type[BaseModel]]:
    """Settings classes reachable from a field's type (through lists, dicts, unions, Optional)."""
    tp = _strip_annotated(tp)
    if _is_model(tp):
        yield tp
        return
    for arg in typing.get_args(tp):
        yield from _nested_models(arg)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(model: type[BaseModel], prefix: str, skip: frozenset[str] = frozenset()) -> list[str]:
    lines = ["| setting | type | default | constraints | description |", "|---|---|---|---|---|"]
    # `kind` first: it is what a reader of a backend's table looks for.
    ordered = sorted(model.model_fields.items(), key=lambda item: item[0] != "kind")
    for name, field in ordered:
        if name in skip:
            continue
        cells = (f"`{prefix}{name}`", type_name(field.annotation), default_text(field),
                 constraints_text(field), field.description or "")
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _doc(model: type[BaseModel]) -> list[str]:
    doc = " ".join((model.__doc__ or "").split())
    return [doc, ""] if doc else []


def _section_path(parent: str, name: str, tp: Any) -> str:
    """How a nested section is addressed in the YAML: `routing.weights`, `backends[].flows[]`."""
    origin = typing.get_origin(_strip_annotated(tp))
    if origin is list:
        return f"{parent}{name}[]"
    if origin is dict:
        return f"{parent}{name}.<name>"
    return f"{parent}{name}"


def _backend_kinds(tp: Any) -> tuple[type[BaseModel], ...]:
    """The classes of a discriminated backend union inside `list[...]`, if the field is one."""
    for arg in typing.get_args(_strip_annotated(tp)):
        members = _union_args(arg)
        if members and all(_is_model(m) for m in members):
            return members
    return ()


def render(settings: type[BaseModel] = RouterSettings) -> str:
    """The whole reference as markdown: each section followed by the sections nested in it."""
    out = [_HEADER]
    _section(out, "", settings, set())
    return "\n".join(out).rstrip() + "\n"


def _section(out: list[str], path: str, model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    if model in seen:  # a class reachable twice (flows of Flowise and Langflow) is described once
        return
    seen.add(model)
    prefix = f"{path}." if path else ""
    out += [f"## `{path}`" if path else "## Top level", "", *_doc(model), *_table(model, prefix), ""]
    for name, field in model.model_fields.items():
        kinds = _backend_kinds(field.annotation)
        if kinds:
            _kinds(out, _section_path(prefix, name, field.annotation), kinds, seen)
            continue
        for nested in _nested_models(field.annotation):
            _section(out, _section_path(prefix, name, field.annotation), nested, seen)


def _kinds(out: list[str], path: str, kinds: tuple[type[BaseModel], ...], seen: set[type[BaseModel]]) -> None:
    """One section per backend kind: the settings all kinds share once, then each kind's own."""
    shared = frozenset.intersection(*(frozenset(k.model_fields) for k in kinds)) - {"kind"}
    names = ", ".join(f"`{k.model_fields['kind'].default}`" for k in kinds)
    base = kinds[0]
    out += [f"## `{path}`", "",
            f"Each entry is one backend; its `kind` ({names}) selects which settings apply. "
            "Settings every kind has:", "",
            *_table(base, f"{path}.", skip=frozenset(base.model_fields) - shared), ""]
    nested: list[tuple[str, type[BaseModel]]] = []
    for kind in kinds:
        out += [f"### `kind: {kind.model_fields['kind'].default}`", "", *_doc(kind),
                *_table(kind, f"{path}.", skip=shared), ""]
        for name, field in kind.model_fields.items():
            if name not in shared:
                nested += [(_section_path(f"{path}.", name, field.annotation), m)
                           for m in _nested_models(field.annotation)]
    for sub_path, model in nested:
        _section(out, sub_path, model, seen)


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
