"""Who is calling: an API key (compared by SHA-256, in constant time) or a JWT verified with PyJWT.

    auth = Authenticator(settings.server.auth)
    principal = auth.authenticate(headers)     # raises Unauthenticated (401) when a credential is bad

With no keys and no JWT configured, every caller is the anonymous principal (allowed only when the
router listens on loopback addresses: `check_bind`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jwt

from router.errors import ComponentUnavailable, ConfigError, Unauthenticated
from router.settings import AuthSettings, JwtSettings

log = logging.getLogger("mcp_router.auth")

ANONYMOUS = "anonymous"
KEY_PREFIX = "mcpr_"
_JWKS_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: its name, the policy that governs it and where the identity came from."""

    name: str
    policy: str
    source: str  # api_key | jwt | anonymous | handle
    scopes: tuple[str, ...] = field(default=())

    @property
    def authenticated(self) -> bool:
        return self.source in ("api_key", "jwt")

    @property
    def anonymous(self) -> bool:
        """Nobody in particular: its sessions and examples are nobody's."""
        return self.source == "anonymous"


def new_api_key() -> str:
    """A high-entropy key (256 bits), recognisable by its prefix in secret scanners."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def bearer_credential(headers: Mapping[str, str]) -> str | None:
    """The credential from `Authorization: Bearer <token>`, else `x-api-key` (headers lower-cased)."""
    value = headers.get("authorization")
    if value is not None:
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("the Authorization header must be `Bearer <token>`", reason="invalid")
        return token.strip()
    key = headers.get("x-api-key")
    return key.strip() if key is not None else None


def is_loopback(host: str) -> bool:
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(settings: AuthSettings, hosts: list[str]) -> None:
    """Refuse to serve without authentication on an address other machines can reach."""
    exposed = [h for h in hosts if not is_loopback(h)]
    if not exposed or settings.enabled:
        return
    if settings.insecure_no_auth:
        log.warning("AUTHENTICATION IS OFF on %s (server.auth.insecure_no_auth / --insecure-no-auth): "
                    "anyone who can reach it can call every allowed tool", ", ".join(exposed))
        return
    raise ConfigError(f"refusing to listen on {', '.join(exposed)} without authentication: configure "
                      "server.auth (api_keys or jwt), listen on 127.0.0.1, or opt out explicitly with "
                      "--insecure-no-auth (server.auth.insecure_no_auth)", setting="server.auth")


class Authenticator:
    def __init__(self, settings: AuthSettings) -> None:
        self.settings = settings
        self._keys = {k.sha256: k for k in settings.api_keys}
        self._jwt = _JwtVerifier(settings.jwt) if settings.jwt is not None else None

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def anonymous(self) -> Principal:
        return Principal(ANONYMOUS, self.settings.anonymous_policy, "anonymous")

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        """The caller's principal; `Unauthenticated` for a missing, malformed or unknown credential."""
        if not self.enabled:
            return self.anonymous()
        credential = bearer_credential(headers)
        if credential is None:
            raise Unauthenticated("this router needs a credential: `Authorization: Bearer <key or token>` "
                                  "or `x-api-key: <key>`", reason="missing")
        if credential.count(".") == 2 and self._jwt is not None and not credential.startswith(KEY_PREFIX):
            return await self._jwt.verify(credential)
        digest = key_hash(credential)
        # Every configured hash is compared, in constant time, so timing tells nothing about near misses.
        found = None
        for stored, spec in self._keys.items():
            if hmac.compare_digest(stored, digest):
                found = spec
        if found is None:
            raise Unauthenticated("the API key or token is not valid", reason="invalid")
        return Principal(found.name, found.policy, "api_key")


class _JwtVerifier:
    def __init__(self, settings: JwtSettings) -> None:
        self.settings = settings
        self._jwks: jwt.PyJWKSet | None = None
        self._client: jwt.PyJWKClient | None = None
        if settings.jwks_file is not None:
            try:
                with open(settings.jwks_file, encoding="utf-8") as f:
                    self._jwks = jwt.PyJWKSet.from_dict(json.load(f))
            except (OSError, ValueError, jwt.PyJWTError) as exc:  # missing, not JSON, or not a key set
                raise ConfigError(f"jwt.jwks_file {settings.jwks_file}: {getattr(exc, 'strerror', None) or exc}",
                                  setting="jwt.jwks_file") from None
        else:
            # Keys are looked up in the set, read again every 5 minutes: PyJWT's per-kid cache (`cache_keys`)
            # never expires, and kept trusting a key the issuer had rotated out until the process restarted.
            self._client = jwt.PyJWKClient(str(settings.jwks_url), cache_keys=False, lifespan=300,
                                           timeout=_JWKS_TIMEOUT_S)

    async def _keys(self, token: str) -> list[Any]:
        """The keys that may have signed the token: its `kid`'s, or, without one, every key of the set."""
        kid = jwt.get_unverified_header(token).get("kid")
        if self._client is not None:
            # PyJWT fetches the key set with a blocking request (when its cache is cold): never on the loop.
            client = self._client
            try:
                if kid is not None:
                    return [(await asyncio.to_thread(client.get_signing_key, kid)).key]
                return [k.key for k in await asyncio.to_thread(client.get_signing_keys)]
            except jwt.PyJWKClientConnectionError as exc:  # the issuer, not the token: no answer either way
                raise ComponentUnavailable(f"the JWT issuer's key set could not be fetched ({exc})",
                                           component="jwks") from None
            except jwt.PyJWKClientError:  # no key of that kid (the set was fetched again for it), or none at all
                raise
            except (ValueError, OSError, jwt.PyJWTError) as exc:  # a page that is not a key set, a broken read
                raise ComponentUnavailable(f"the JWT issuer's key set could not be read ({type(exc).__name__})",
                                           component="jwks") from None
        assert self._jwks is not None
        keys = [k.key for k in self._jwks.keys if kid is None or k.key_id == kid]
        if not keys:
            raise jwt.InvalidTokenError("no key in the JWKS matches the token's kid")
        return keys

    async def verify(self, token: str) -> Principal:
        s = self.settings
        claims: dict[str, Any] | None = None
        try:
            keys = await self._keys(token)
            for i, key in enumerate(keys):
                try:
                    claims = jwt.decode(token, key, algorithms=list(s.algorithms), audience=s.audience,
                                        issuer=s.issuer, leeway=s.leeway_s,
                                        options={"require": ["exp", "iss", "aud", s.principal_claim]})
                    break
                except (jwt.InvalidSignatureError, jwt.InvalidKeyError, TypeError, ValueError) as exc:
                    # A key of another type than the token's algorithm (PyJWT raises TypeError), or another key
                    # of a set the token names no kid of: the next one may fit.
                    if i == len(keys) - 1:
                        raise jwt.InvalidTokenError(f"no key of the JWKS verifies it ({type(exc).__name__})") from None
        except jwt.PyJWTError as exc:
            # The reason (expired, wrong audience...) helps the caller; it holds nothing secret.
            raise Unauthenticated(f"the bearer token is not valid: {exc}", reason="invalid") from None
        assert claims is not None
        # Its own namespace: a token's subject never names an API key's principal, nor `anonymous`.
        name = _principal_of(str(claims[s.principal_claim]))
        raw = claims.get(s.scopes_claim) or ()
        if not isinstance(raw, str | list | tuple):
            # Signed, but not scopes: RFC 8693 says a space-separated string, and some issuers send a list.
            raise Unauthenticated(f"the bearer token is not valid: its {s.scopes_claim} claim must be a string or "
                                  f"a list, got {type(raw).__name__}", reason="invalid")
        scopes = tuple(raw.split() if isinstance(raw, str) else (str(x) for x in raw))
        # Only scopes configured for JWTs select a policy; otherwise the configured default applies.
        policy = next((s.scope_policies[sc] for sc in scopes if sc in s.scope_policies), s.default_policy)
        return Principal(name, policy, "jwt", scopes)


_MAX_PRINCIPAL = 128


def _principal_of(subject: str) -> str:
    """A token's principal: its subject in a namespace of its own, so it never names an API key's principal
    nor `anonymous`. A subject too long to keep whole keeps its start and a digest of all of it: cut short
    alone, two subjects that share their start would be one principal, each seeing the other's data."""
    name = f"jwt:{subject}"
    if len(name) <= _MAX_PRINCIPAL:
        return name
    digest = hashlib.sha256(subject.encode()).hexdigest()[:32]
    return f"{name[:_MAX_PRINCIPAL - 33]}~{digest}"
