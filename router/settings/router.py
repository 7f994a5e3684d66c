"""`RouterSettings`: everything the router is configured with, one object read once at start-up."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from router.settings.backends import BackendSpec
from router.settings.base import Strict
from router.settings.embeddings import EmbeddingSettings
from router.settings.intents import IntentSettings
from router.settings.learning import LearningSettings
from router.settings.llm import LLMSettings
from router.settings.resilience import ResilienceSettings
from router.settings.routing import RoutingSettings, ToolSelectionSettings
from router.settings.security import AuditSettings
from router.settings.server import ServerSettings, TelemetrySettings
from router.settings.trust import SecuritySettings


class RouterSettings(Strict):
    """Everything the router is configured with: one YAML file plus `ROUTER_` environment variables."""

    backends: list[BackendSpec] = Field(default_factory=list, description="The backends, each with its `kind`.")
    routing: RoutingSettings = Field(default=RoutingSettings(), description="How a question is matched to a tool.")
    intents: IntentSettings = Field(default=IntentSettings(), description="The intents questions are classified into.")
    embeddings: EmbeddingSettings = Field(default=EmbeddingSettings(), description="The embedding model.")
    resilience: ResilienceSettings = Field(default=ResilienceSettings(), description=(
        "Modes, deadlines, ejection and performance history."))
    server: ServerSettings = Field(default=ServerSettings(), description="The HTTP server and the Serve application.")
    llm: LLMSettings = Field(default=LLMSettings(), description="An optional OpenAI-compatible chat model.")
    tool_selection: ToolSelectionSettings = Field(default=ToolSelectionSettings(), description=(
        "Smart tool selection (`POST /v1/tools/select`)."))
    telemetry: TelemetrySettings = Field(default=TelemetrySettings(), description="Traces and metrics.")
    learning: LearningSettings = Field(default=LearningSettings(), description=(
        "Labelled examples from feedback and use, blended into `match`."))
    audit: AuditSettings = Field(default=AuditSettings(), description="The per-request audit log.")
    security: SecuritySettings = Field(default=SecuritySettings(), description=(
        "Limits, cleaning, pinning and checks of what backends say about their tools."))
    state_dir: str = Field(default=".state", description=(
        "Where state that survives a restart lives (embedding vectors, pins, `feedback.sqlite`); relative to the "
        "config file. A file that names none uses a per-user folder: `$XDG_STATE_HOME` (else `~/.local/state`)"
        "`/mcp-router/<file name>-<hash of its path>`; `${MCP_ROUTER_STATE_DIR}` in the file is that folder."))
    demo_questions: list[str] = Field(default_factory=list, description=(
        "Questions `mcp-router demo` asks once the router is up."))

    @field_validator("backends")
    @classmethod
    def _unique_names(cls, backends: list[Any]) -> list[Any]:
        seen: set[str] = set()
        for spec in backends:
            if spec.name in seen:
                raise ValueError(f"backend name {spec.name!r} is used twice")
            seen.add(spec.name)
        return backends

    @model_validator(mode="after")
    def _intents_are_known(self) -> RouterSettings:
        for spec in self.backends:
            unknown = [i for i in spec.intents if i not in self.intents.intents]
            if unknown:
                raise ValueError(
                    f"backend {spec.name!r} declares unknown intents {unknown}; "
                    f"allowed: {sorted(self.intents.intents)}"
                )
        return self

    @property
    def enabled_backends(self) -> list[BackendSpec]:
        return [b for b in self.backends if b.enabled]

    def backend(self, name: str) -> BackendSpec | None:
        return next((b for b in self.backends if b.name == name), None)
