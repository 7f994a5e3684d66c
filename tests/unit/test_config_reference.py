"""The configuration reference in docs/ is the one generated from the settings classes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_router.cli.config_reference import REGENERATE, _nested_models, render
from router.settings import RouterSettings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_docs_configuration_is_the_generated_reference() -> None:
    assert DOC.is_file(), f"docs/configuration.md is missing; create it with `{REGENERATE}`"
    assert DOC.read_text(encoding="utf-8") == render(), (
        f"docs/configuration.md is out of date with router/settings/; regenerate it with `{REGENERATE}`")


def _settings_classes(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    if model not in seen:
        seen.add(model)
        for field in model.model_fields.values():
            for nested in _nested_models(field.annotation):
                _settings_classes(nested, seen)
    return seen


def test_every_setting_has_a_description() -> None:
    missing = [f"{model.__name__}.{name}" for model in _settings_classes(RouterSettings, set())
               for name, field in model.model_fields.items() if not field.description]
    assert not missing, f"settings without description= in router/settings/: {sorted(missing)}"


def test_every_setting_of_every_backend_kind_is_in_the_reference() -> None:
    text = render()
    for kind in ("mcp_stdio", "mcp_http", "flowise", "langflow"):
        assert f"### `kind: {kind}`" in text
    for row in ("`backends[].command`", "`backends[].launch.startup_timeout_s`", "`backends[].flows[].api_key`",
                "`backends[].input_type`", "`routing.weights.match`", "`resilience.ejection.window_s`",
                "`intents.intents.<name>.keywords`", "`llm.max_tool_turns`"):
        assert row in text, f"{row} is missing from the reference"


class _Inner(BaseModel):
    """An inner section."""

    model_config = ConfigDict(frozen=True)
    depth: int = Field(default=3, ge=1, le=9, description="How deep.")


class _Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int = Field(default=9, gt=0, description="Lives left.")
    shared: str = Field(default="x", description="Both kinds have it.")


class _Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    bark: str = Field(pattern=r"^wo+f$", description="The sound | of it.")
    shared: str = Field(default="x", description="Both kinds have it.")


class _Top(BaseModel):
    """The top of a small tree."""

    pets: list[Annotated[_Cat | _Dog, Field(discriminator="kind")]] = Field(default_factory=list, description="Pets.")
    inner: _Inner = Field(default=_Inner(), description="A section.")
    name: str | None = Field(default=None, max_length=5, description="A name.")
    mode: Literal["a", "b"] = Field(default="a", description="A mode.")


def test_renders_types_defaults_constraints_and_descriptions_of_a_small_tree() -> None:
    text = render(_Top)
    lines = text.splitlines()
    assert "The top of a small tree." in lines
    assert "| `name` | str \\| None | `null` | max length 5 | A name. |" in lines
    assert '| `mode` | "a" \\| "b" | `"a"` |  | A mode. |' in lines
    assert "| `inner` | mapping | (section below) |  | A section. |" in lines
    assert "## `inner`" in lines and "An inner section." in lines
    assert "| `inner.depth` | int | `3` | ≥ 1, ≤ 9 | How deep. |" in lines
    # The union's kinds: the shared setting once, each kind's own settings under its heading.
    assert "| `pets[].shared` | str | `\"x\"` |  | Both kinds have it. |" in lines
    assert lines.count("| `pets[].shared` | str | `\"x\"` |  | Both kinds have it. |") == 1
    cat, dog = lines.index("### `kind: cat`"), lines.index("### `kind: dog`")
    assert cat < lines.index("| `pets[].lives` | int | `9` | > 0 | Lives left. |") < dog
    assert dog < lines.index("| `pets[].bark` | str | *required* | pattern `^wo+f$` | The sound \\| of it. |")
