"""Settings: one `RouterSettings` object, read once at start-up and passed down to every constructor.

    settings = load_settings("examples/router.yaml")      # YAML or `mcpServers` JSON, ${VAR}, ROUTER_ overrides

One module per settings group, each a strict pydantic model (`base.Strict`: unknown fields are errors,
values frozen): `backends` (one spec per kind), `routing` (retrieval, scores, verdicts, tool selection),
`embeddings`, `intents`, `resilience`, `server` (and telemetry), `security` (keys, policies, audit),
`trust` (what the router accepts from backends), `llm`, `learning`; `router` assembles them and `file`
reads a configuration file.
"""

from router.settings.backends import (
    BackendSpec,
    FlowiseSpec,
    FlowSpec,
    LangflowSpec,
    LaunchSpec,
    McpHttpSpec,
    McpStdioSpec,
)
from router.settings.embeddings import EmbeddingSettings
from router.settings.file import load_settings
from router.settings.intents import IntentDef, IntentSettings
from router.settings.learning import LearningSettings
from router.settings.llm import LLMSettings
from router.settings.resilience import EjectionSettings, ResilienceSettings
from router.settings.router import RouterSettings
from router.settings.routing import RoutingSettings, ScoreWeights, ToolSelectionSettings
from router.settings.security import (
    BUILT_IN_POLICIES,
    RESERVED_NAMES,
    ApiKey,
    AuditSettings,
    AuthSettings,
    JwtSettings,
    Policy,
    RateLimit,
)
from router.settings.server import HostingSettings, ServerSettings, TelemetrySettings
from router.settings.trust import SecuritySettings

__all__ = [
    "BUILT_IN_POLICIES", "RESERVED_NAMES", "ApiKey", "AuditSettings", "AuthSettings", "BackendSpec",
    "EjectionSettings", "EmbeddingSettings", "FlowSpec", "FlowiseSpec", "HostingSettings", "IntentDef",
    "IntentSettings", "JwtSettings", "LLMSettings", "LangflowSpec", "LaunchSpec", "LearningSettings", "McpHttpSpec",
    "McpStdioSpec", "Policy", "RateLimit", "ResilienceSettings", "RouterSettings", "RoutingSettings", "ScoreWeights",
    "SecuritySettings", "ServerSettings", "TelemetrySettings", "ToolSelectionSettings", "load_settings",
]
