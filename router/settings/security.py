"""Authentication, policies and rate limits (`server.auth`), and the audit log (`audit`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from router.literals import MODES, Mode
from router.settings.base import Strict

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-@]*$"


class RateLimit(Strict):
    """Limits per principal; unset means unlimited. Each router replica enforces its share (see docs)."""

    requests_per_s: float | None = Field(default=None, gt=0, description=(
        "Requests per second (token bucket); over it: 429 with Retry-After."))
    burst: int | None = Field(default=None, ge=1, description=(
        "Requests allowed at once above the rate (the bucket's size); default: one second's worth."))
    backend_calls_per_s: float | None = Field(default=None, gt=0, description=(
        "Calls to backends per second: parallel and consensus requests count one per backend they call, and "
        "each request the MCP gateway relays (listings and reads too) counts one."))
    max_in_flight: int | None = Field(default=None, ge=1, description="Requests of this principal running at once.")


class Policy(Strict):
    """What a principal may do. Patterns are globs over `backend/capability` (`time/*`,
    `filesystem/read_*`); a pattern without `/` names a whole backend. Deny wins over allow."""

    allow: list[str] = Field(default=["*"], description="Capabilities the principal may use (globs).")
    deny: list[str] = Field(default_factory=list, description="Capabilities it may not use, even if allowed.")
    modes: list[Mode] = Field(default=list(MODES), description=(
        "Resilience modes it may ask for (parallel and consensus call several backends)."))
    max_deadline_s: float | None = Field(default=None, gt=0, description="Largest `deadline_s` it may ask for.")
    chat: bool = Field(default=True, description="May use `/v1/chat` (LLM tool loops).")
    backend_override: bool = Field(default=True, description="May name a `backend` (and `tool`) itself.")
    stats: bool = Field(default=False, description=(
        "The operator right: may read `/v1/stats`, other callers' questions in a backend's labelled examples, "
        "and delete them (with `feedback`)."))
    feedback: bool = Field(default=True, description=(
        "May give feedback that the router learns from, on its own requests."))
    rate_limit: RateLimit = Field(default=RateLimit(), description="Rate and concurrency limits.")


# Names the router gives principals that are not keys; a key may not take one.
RESERVED_NAMES = frozenset({"anonymous", "public"})


class ApiKey(Strict):
    """One API key, stored as the hex SHA-256 of the key: a leaked configuration leaks no key."""

    name: str = Field(pattern=_NAME, max_length=64, description=(
        "The principal's name (audit, metrics, sessions); not `anonymous` or `public`. JWT principals are named "
        "`jwt:<subject>`, so no key and token share a name."))
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description=(
        "Hex SHA-256 of the key (`mcp-router keys create NAME` prints it)."))
    policy: str = Field(default="default", description="The policy (a name under `server.auth.policies`).")


class JwtSettings(Strict):
    """Bearer JWTs from an identity provider, verified with PyJWT against its JWKS."""

    issuer: str = Field(min_length=1, description="Required `iss` claim.")
    audience: str = Field(min_length=1, description="Required `aud` claim.")
    jwks_file: str | None = Field(default=None, description="A JWKS JSON file (relative to the config file).")
    jwks_url: str | None = Field(default=None, pattern=r"^https?://", description="The provider's JWKS URL.")
    algorithms: list[Literal["RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "EdDSA"]] = Field(
        default=["RS256", "ES256"], min_length=1, description="Accepted signature algorithms (asymmetric only).")
    principal_claim: str = Field(default="sub", description="The claim that names the principal.")
    scopes_claim: str = Field(default="scope", description="The claim holding scopes (space-separated or a list).")
    scope_policies: dict[str, str] = Field(default_factory=dict, description=(
        "Scopes that select a policy (`{\"router:ops\": operator}`): only these; the first of a token's scopes "
        "found here wins. A scope that merely equals a policy's name selects nothing."))
    default_policy: str = Field(default="default", description="Policy of a token none of whose scopes is mapped.")
    leeway_s: float = Field(default=30.0, ge=0, le=600, description="Clock skew tolerated on `exp` and `nbf`.")

    @model_validator(mode="after")
    def _one_key_source(self) -> JwtSettings:
        if (self.jwks_file is None) == (self.jwks_url is None):
            raise ValueError("server.auth.jwt needs exactly one of jwks_file and jwks_url")
        return self


BUILT_IN_POLICIES = {"default": Policy(), "operator": Policy(stats=True)}


class AuthSettings(Strict):
    """Authentication at the HTTP and MCP edge. With no keys and no JWT, only loopback binds are allowed."""

    api_keys: list[ApiKey] = Field(default_factory=list, description="API keys (`Authorization: Bearer` or "
                                                                      "`x-api-key`).")
    jwt: JwtSettings | None = Field(default=None, description="JWT bearer tokens from an identity provider.")
    policies: dict[str, Policy] = Field(default_factory=lambda: dict(BUILT_IN_POLICIES), description=(
        "Policies by name. Two are added when absent: `default` (every capability and mode, chat, feedback on "
        "one's own requests; not the operator right) and `operator` (the same with `stats`)."))
    anonymous_policy: str = Field(default="operator", description=(
        "Policy of callers when authentication is off (loopback only: the local operator) and of handle callers "
        "naming no principal."))
    insecure_no_auth: bool = Field(default=False, description=(
        "Serve without authentication on a non-loopback address (`--insecure-no-auth`); logged at every start."))

    @model_validator(mode="after")
    def _policies_exist(self) -> AuthSettings:
        missing = {k: v for k, v in BUILT_IN_POLICIES.items() if k not in self.policies}
        if missing:
            object.__setattr__(self, "policies", {**missing, **self.policies})
        named = [("anonymous_policy", self.anonymous_policy)]
        named += [(f"api_keys[{k.name}].policy", k.policy) for k in self.api_keys]
        if self.jwt is not None:
            named.append(("jwt.default_policy", self.jwt.default_policy))
            named += [(f"jwt.scope_policies[{scope}]", p) for scope, p in self.jwt.scope_policies.items()]
        reserved = [k.name for k in self.api_keys if k.name in RESERVED_NAMES]
        if reserved:
            raise ValueError(f"server.auth.api_keys: {reserved[0]!r} is a name the router gives callers without a key")
        for where, policy in named:
            if policy not in self.policies:
                raise ValueError(f"server.auth.{where}: no policy named {policy!r}; have {sorted(self.policies)}")
        names = [k.name for k in self.api_keys]
        if len(set(names)) != len(names):
            raise ValueError("server.auth.api_keys: a name is used twice")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.api_keys) or self.jwt is not None


class AuditSettings(Strict):
    """One JSON line per request: who, what route, outcome, status, latency; never secrets."""

    enabled: bool = Field(default=True, description="Write audit records.")
    path: str | None = Field(default=None, description=(
        "A JSON-lines file (relative to the config file); unset: the router's log (`mcp_router.audit`)."))
    include_arguments: bool = Field(default=False, description=(
        "Record the tool arguments themselves; by default only their SHA-256 is recorded."))
