"""Identity, policies, limits, audit and the principal's view of the catalog, without Ray."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from router.errors import ConfigError, Forbidden, Unauthenticated, UnknownBackend
from router.models import QueryRequest, RouteRequest
from router.security.audit import AuditLog
from router.security.identity import Authenticator, Principal, check_bind, key_hash, new_api_key
from router.security.policy import Access
from router.settings import AuditSettings, AuthSettings, Policy
from router.settings.file import load_settings
from tests.unit.router_world import ONLY_TIME, query, route, world

KEY = new_api_key()


def auth(**extra: Any) -> AuthSettings:
    return AuthSettings.model_validate({"api_keys": [{"name": "alice", "sha256": key_hash(KEY), "policy": "ro"}],
                                        "policies": {"ro": {"deny": ["calc"]}}, **extra})


# -- API keys ------------------------------------------------------------------------------------


def test_new_keys_are_long_random_and_stored_only_as_their_hash() -> None:
    a, b = new_api_key(), new_api_key()
    assert a != b and len(a) >= 40 and a.startswith("mcpr_")
    settings = auth()
    assert KEY not in settings.model_dump_json()
    assert settings.api_keys[0].sha256 == key_hash(KEY) and len(key_hash(KEY)) == 64


@pytest.mark.parametrize("headers", [{"authorization": f"Bearer {KEY}"}, {"x-api-key": KEY},
                                     {"authorization": f"bearer   {KEY} "}])
async def test_a_configured_key_names_its_principal_and_policy(headers: dict[str, str]) -> None:
    principal = await Authenticator(auth()).authenticate(headers)
    assert (principal.name, principal.policy, principal.source) == ("alice", "ro", "api_key")


@pytest.mark.parametrize(("headers", "reason"), [
    ({}, "missing"),
    ({"authorization": "Bearer " + KEY + "x"}, "invalid"),
    ({"authorization": f"Basic {KEY}"}, "invalid"),
    ({"x-api-key": "guess"}, "invalid"),
])
async def test_a_missing_or_wrong_credential_is_a_401_with_the_bearer_challenge(headers: dict[str, str],
                                                                                reason: str) -> None:
    with pytest.raises(Unauthenticated) as err:
        await Authenticator(auth()).authenticate(headers)
    assert err.value.status_code == 401
    assert err.value.headers()["WWW-Authenticate"].startswith("Bearer")
    assert ('error="invalid_token"' in err.value.headers()["WWW-Authenticate"]) == (reason == "invalid")
    assert KEY not in err.value.message


async def test_without_keys_everyone_is_anonymous_and_only_loopback_may_serve() -> None:
    open_auth = AuthSettings()
    assert (await Authenticator(open_auth).authenticate({})).name == "anonymous"
    check_bind(open_auth, ["127.0.0.1", "::1", "localhost"])
    with pytest.raises(ConfigError, match=r"server\.auth.*--insecure-no-auth"):
        check_bind(open_auth, ["127.0.0.1", "0.0.0.0"])
    check_bind(AuthSettings(insecure_no_auth=True), ["0.0.0.0"])  # the explicit opt-out
    check_bind(auth(), ["0.0.0.0"])


def test_policies_named_by_keys_must_exist() -> None:
    with pytest.raises(ValueError, match="no policy named 'admin'"):
        AuthSettings.model_validate({"api_keys": [{"name": "a", "sha256": "0" * 64, "policy": "admin"}]})


# -- JWT -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwt_auth(tmp_path: Path, signing_key: rsa.RSAPrivateKey) -> Authenticator:
    jwk = json.loads(RSAAlgorithm.to_jwk(signing_key.public_key()))
    jwk.update(kid="k1", use="sig", alg="RS256")
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    return Authenticator(jwt_settings(tmp_path / "jwks.json"))


def jwt_settings(jwks: Path, **extra: Any) -> AuthSettings:
    return AuthSettings.model_validate({
        "jwt": {"issuer": "https://idp.example", "audience": "mcp-router", "jwks_file": str(jwks),
                "scope_policies": {"reader": "reader"}, **extra},
        "api_keys": [{"name": "alice", "sha256": key_hash(KEY)}],
        "policies": {"reader": {"allow": ["time/*"]}}})


def token(key: Any, **claims: Any) -> str:
    body = {"iss": "https://idp.example", "aud": "mcp-router", "sub": "svc-a", "exp": int(time.time()) + 60,
            "scope": "openid reader"}
    body.update(claims)
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm="RS256",
                      headers={"kid": "k1"})


async def test_a_valid_token_maps_its_subject_and_scopes_to_a_principal(jwt_auth: Authenticator,
                                                                         signing_key: rsa.RSAPrivateKey) -> None:
    p = await jwt_auth.authenticate({"authorization": f"Bearer {token(signing_key)}"})
    assert (p.name, p.policy, p.source, p.scopes) == ("jwt:svc-a", "reader", "jwt", ("openid", "reader"))
    other = await jwt_auth.authenticate({"authorization": f"Bearer {token(signing_key, scope=['openid'])}"})
    assert other.policy == "default"


async def test_only_scopes_configured_for_tokens_select_a_policy(jwt_auth: Authenticator,
                                                                 signing_key: rsa.RSAPrivateKey) -> None:
    # A scope that merely equals a policy's name (the built-in ones included) selects nothing.
    for scope in ("operator", "default reader-not-mapped", "operator default"):
        p = await jwt_auth.authenticate({"authorization": f"Bearer {token(signing_key, scope=scope)}"})
        assert p.policy == "default", scope
    with pytest.raises(ValueError, match=r"jwt\.scope_policies\[ops\]: no policy named 'admin'"):
        AuthSettings.model_validate({"jwt": {"issuer": "i", "audience": "a", "jwks_file": "x",
                                             "scope_policies": {"ops": "admin"}}})


async def test_a_tokens_subject_never_names_a_key_or_the_anonymous_caller(jwt_auth: Authenticator,
                                                                          signing_key: rsa.RSAPrivateKey) -> None:
    key = await jwt_auth.authenticate({"authorization": f"Bearer {KEY}"})
    for sub in ("alice", "anonymous"):
        p = await jwt_auth.authenticate({"authorization": f"Bearer {token(signing_key, sub=sub)}"})
        assert p.name == f"jwt:{sub}" and p.name != key.name and not p.anonymous
    with pytest.raises(ValueError, match="'anonymous' is a name the router gives"):
        AuthSettings.model_validate({"api_keys": [{"name": "anonymous", "sha256": "0" * 64}]})


async def test_two_long_subjects_that_share_their_start_are_two_principals(jwt_auth: Authenticator,
                                                                             signing_key: rsa.RSAPrivateKey) -> None:
    names = [(await jwt_auth.authenticate({"authorization": f"Bearer {token(signing_key, sub='u' * 200 + end)}"})).name
             for end in ("a", "b", "a")]
    assert names[0] != names[1] and names[0] == names[2] and all(len(n) == 128 for n in names)
    assert names[0].startswith("jwt:uuuu")


@pytest.mark.parametrize(("claims", "needle"), [
    ({"exp": int(time.time()) - 3600}, "expired"),
    ({"aud": "someone-else"}, "(?i)audience"),
    ({"iss": "https://evil.example"}, "(?i)issuer"),
    ({"sub": None}, "sub"),
])
async def test_tokens_with_wrong_claims_are_refused(jwt_auth: Authenticator, signing_key: rsa.RSAPrivateKey,
                                                    claims: dict[str, Any], needle: str) -> None:
    with pytest.raises(Unauthenticated, match=needle):
        await jwt_auth.authenticate({"authorization": f"Bearer {token(signing_key, **claims)}"})


async def test_a_token_signed_by_another_key_or_unsigned_is_refused(jwt_auth: Authenticator) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(Unauthenticated, match=r"(?i)signature"):
        await jwt_auth.authenticate({"authorization": f"Bearer {token(other)}"})
    body = {"iss": "https://idp.example", "aud": "mcp-router", "sub": "x", "exp": int(time.time()) + 60}
    unsigned = jwt.encode(body, None, algorithm="none", headers={"kid": "k1"})
    with pytest.raises(Unauthenticated):
        await jwt_auth.authenticate({"authorization": f"Bearer {unsigned}"})
    forged_hs = jwt.encode(body, "a-shared-secret-of-32-bytes-long!", algorithm="HS256", headers={"kid": "k1"})
    with pytest.raises(Unauthenticated):
        await jwt_auth.authenticate({"authorization": f"Bearer {forged_hs}"})


async def test_a_token_whose_algorithm_does_not_fit_the_key_is_a_401_and_keys_without_a_kid_are_each_tried(
        tmp_path: Path, signing_key: rsa.RSAPrivateKey) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec
    from jwt.algorithms import ECAlgorithm

    ec_key = ec.generate_private_key(ec.SECP256R1())
    ec_jwk = json.loads(ECAlgorithm.to_jwk(ec_key.public_key()))
    ec_jwk.update(kid="k1", use="sig")
    rsa_jwk = json.loads(RSAAlgorithm.to_jwk(signing_key.public_key()))
    rsa_jwk.update(kid="k2", use="sig")
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [rsa_jwk, ec_jwk]}))
    auth = Authenticator(jwt_settings(tmp_path / "jwks.json", algorithms=["RS256", "ES256"]))
    body = {"iss": "https://idp.example", "aud": "mcp-router", "sub": "svc", "exp": int(time.time()) + 60}
    mismatched = jwt.encode(body, signing_key, algorithm="RS256", headers={"kid": "k1"})  # an EC key's kid
    with pytest.raises(Unauthenticated, match="not valid"):  # was a TypeError out of PyJWT: a 500
        await auth.authenticate({"authorization": f"Bearer {mismatched}"})
    no_kid = jwt.encode(body, ec_key, algorithm="ES256")  # the set's second key signed it
    assert (await auth.authenticate({"authorization": f"Bearer {no_kid}"})).name == "jwt:svc"


async def test_a_key_set_served_by_url_verifies_a_token_without_kid_and_a_page_that_is_no_key_set_is_a_503(
        signing_key: rsa.RSAPrivateKey) -> None:
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from jwt.algorithms import OKPAlgorithm
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    from router.errors import ComponentUnavailable
    from tests.fakes import serve_app

    okp = json.loads(OKPAlgorithm.to_jwk(ed25519.Ed25519PrivateKey.generate().public_key()))
    rsa_jwk = json.loads(RSAAlgorithm.to_jwk(signing_key.public_key()))
    keys = {"keys": [{**okp, "kid": "ed", "use": "sig"}, {**rsa_jwk, "kid": "k2", "use": "sig"}]}
    app = Starlette(routes=[Route("/jwks", lambda r: JSONResponse(keys)),
                            Route("/login", lambda r: HTMLResponse("<html>sign in</html>"))])
    body = {"iss": "https://idp.example", "aud": "mcp-router", "sub": "svc", "exp": int(time.time()) + 60}
    with serve_app(app) as url:
        auth = Authenticator(AuthSettings.model_validate({"jwt": {
            "issuer": "https://idp.example", "audience": "mcp-router", "jwks_url": f"{url}/jwks",
            "algorithms": ["RS256", "EdDSA"]}}))
        no_kid = jwt.encode(body, signing_key, algorithm="RS256")  # the set's second key; the first is an OKP one
        assert (await auth.authenticate({"authorization": f"Bearer {no_kid}"})).name == "jwt:svc"
        login_page = Authenticator(AuthSettings.model_validate({"jwt": {
            "issuer": "https://idp.example", "audience": "mcp-router", "jwks_url": f"{url}/login"}}))
        with pytest.raises(ComponentUnavailable, match="key set could not be read"):  # was a 500
            await login_page.authenticate({"authorization": f"Bearer {no_kid}"})
    unreachable = Authenticator(AuthSettings.model_validate({"jwt": {  # the server above is gone now
        "issuer": "https://idp.example", "audience": "mcp-router", "jwks_url": f"{url}/jwks"}}))
    with pytest.raises(ComponentUnavailable, match="key set could not be fetched"):  # the issuer's, not a 401
        await unreachable.authenticate({"authorization": f"Bearer {no_kid}"})


async def test_a_key_removed_from_the_issuers_set_verifies_no_token_once_the_set_is_read_again(
        signing_key: rsa.RSAPrivateKey) -> None:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tests.fakes import serve_app

    rsa_jwk = json.loads(RSAAlgorithm.to_jwk(signing_key.public_key()))
    served = {"keys": [{**rsa_jwk, "kid": "k1", "use": "sig"}]}
    app = Starlette(routes=[Route("/jwks", lambda r: JSONResponse(served))])
    body = {"iss": "https://idp.example", "aud": "mcp-router", "sub": "svc", "exp": int(time.time()) + 600}
    token = jwt.encode(body, signing_key, algorithm="RS256", headers={"kid": "k1"})
    with serve_app(app) as url:
        auth = Authenticator(AuthSettings.model_validate({"jwt": {
            "issuer": "https://idp.example", "audience": "mcp-router", "jwks_url": f"{url}/jwks"}}))
        assert (await auth.authenticate({"authorization": f"Bearer {token}"})).name == "jwt:svc"
        fresh = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
        served["keys"] = [{**json.loads(RSAAlgorithm.to_jwk(fresh)), "kid": "k2", "use": "sig"}]  # k1 leaked: out
        auth._jwt._client.jwk_set_cache.put(None)  # type: ignore[union-attr]  # the set's 300 s have passed
        with pytest.raises(Unauthenticated):  # PyJWT's per-kid cache kept trusting it until a restart
            await auth.authenticate({"authorization": f"Bearer {token}"})


# -- policies ------------------------------------------------------------------------------------


def access(policy: dict[str, Any]) -> Access:
    return Access(Principal("p", "pol", "api_key"), Policy.model_validate(policy))


def test_globs_allow_and_deny_capabilities_and_deny_wins() -> None:
    a = access({"allow": ["time/*", "filesystem/read_*", "calc"], "deny": ["calc/divide"]})
    assert a.allows("time", "get_current_time") and a.allows("filesystem", "read_file")
    assert not a.allows("filesystem", "write_file") and not a.allows("echo", "echo")
    assert a.allows("calc", "add") and not a.allows("calc", "divide")
    assert a.sees_backend("filesystem") and not a.sees_backend("echo")
    assert not access({"deny": ["echo"]}).sees_backend("echo")
    # A glob of backends hides each backend it covers; one that reaches only some capabilities hides none.
    assert not access({"deny": ["ec*"]}).sees_backend("echo") and not access({"deny": ["*"]}).sees_backend("echo")
    assert access({"deny": ["ec*/x"]}).sees_backend("echo") and access({"deny": ["ec*"]}).sees_backend("time")
    assert access({}).unrestricted and not a.unrestricted


async def test_a_backend_with_no_catalog_yet_stays_hidden_from_a_caller_whose_policy_denies_it() -> None:
    w = world()
    hidden = access({"allow": ["*"], "deny": ["ec*"]})
    w.router.set_catalogs([c for c in w.router.catalogs.values() if c.backend != "echo"], w.router.index)
    assert "echo" not in w.router.visible_backends(hidden)  # not listed yet, so its catalog cannot hide it
    with pytest.raises(UnknownBackend) as err:
        await route(w.router, RouteRequest(question=ONLY_TIME, backend="nonexistent"), hidden)
    assert "echo" not in err.value.message
    w.router.set_catalogs([], None)  # type: ignore[arg-type]  # nothing indexed at all
    assert w.router.visible_backends(hidden) == ["calc", "clock", "time"]
    assert w.router.visible_backends(access({"allow": ["time"]})) == ["time"]


def test_a_backend_is_wholly_allowed_only_when_no_deny_pattern_reaches_into_it() -> None:
    # What no listing names (a resource read by its URI, a template) needs all of the backend.
    assert access({}).allows_all("fs") and access({"allow": ["fs"]}).allows_all("fs")
    assert access({"allow": ["f*/*"]}).allows_all("fs") and not access({"allow": ["fs/read_*"]}).allows_all("fs")
    # A glob's "*" matches "/" too, so any deny pattern that does not start apart from "fs/" may reach into it.
    for deny in ("fs/secret", "fs", "*secret*", "*/delete_*", "f?/x", "*"):
        assert not access({"allow": ["*"], "deny": [deny]}).allows_all("fs"), deny
    for deny in ("db/drop", "fsx/*", "db"):
        assert access({"allow": ["*"], "deny": [deny]}).allows_all("fs"), deny


def test_requests_beyond_the_policy_are_403_naming_it() -> None:
    a = access({"modes": ["fallback"], "max_deadline_s": 5, "backend_override": False, "chat": False})
    a.check_request(mode="fallback", deadline_s=5)
    for kwargs, needle in (({"mode": "parallel"}, "mode 'parallel'"), ({"deadline_s": 6}, "deadline_s"),
                           ({"backend": "time"}, "naming a backend"), ({"tool": "multiply"}, "naming a tool")):
        with pytest.raises(Forbidden, match=needle) as err:
            a.check_request(**kwargs)
        assert "policy 'pol'" in err.value.message and err.value.status_code == 403
    with pytest.raises(Forbidden, match="/v1/chat"):
        a.check("chat", "/v1/chat")


async def test_routing_happens_inside_the_allowed_set() -> None:
    w = world()
    everything = await route(w.router, RouteRequest(question=ONLY_TIME))
    assert everything.candidates[0].backend == "time"
    no_time = access({"deny": ["time/*"]})
    limited = await route(w.router, RouteRequest(question=ONLY_TIME, k=10), no_time)
    assert limited.candidates and all(c.backend != "time" for c in limited.candidates)
    assert "time" not in w.router.visible_backends(no_time)
    with pytest.raises(UnknownBackend) as err:
        await route(w.router, RouteRequest(question=ONLY_TIME, backend="time"), no_time)
    assert "time" not in err.value.message.replace("'time'", "")  # the list of known backends leaves it out
    only_add = access({"allow": ["calc/add"]})
    view = w.router.view(only_add)
    assert view.index is not None and [c.name for c in view.index.texts.capabilities] == ["add"]
    assert list(view.catalogs) == ["calc"] and w.router.view(only_add) is view  # built once per policy
    response = await query(w.router, QueryRequest(question="add 3 and 4"), only_add)
    assert response.capability == "add"
    assert all(c.capability == "add" for c in response.routing.candidates)  # type: ignore[union-attr]


async def test_cached_answers_never_cross_principals() -> None:
    w = world()
    alice, bob = (Access(Principal(n, "default", "api_key"), Policy()) for n in ("alice", "bob"))
    first = await query(w.router, QueryRequest(question=ONLY_TIME), alice)
    w.stats.health["time"] = "down"
    again = await query(w.router, QueryRequest(question=ONLY_TIME), alice)
    assert again.routing is not None and again.routing.cached and again.answer == first.answer
    calls = len(w.executor.called)
    other = await query(w.router, QueryRequest(question=ONLY_TIME), bob)
    assert other.routing is not None and not other.routing.cached  # bob's request goes to a backend
    assert len(w.executor.called) > calls


async def test_one_callers_many_cached_answers_push_out_only_its_own() -> None:
    w = world(settings={"resilience": {"response_cache_size": 3}})
    alice, bob = (Access(Principal(n, "default", "api_key"), Policy()) for n in ("alice", "bob"))
    first = await query(w.router, QueryRequest(question=ONLY_TIME), alice)
    for zone in ("Europe/Paris", "America/Lima", "Europe/Oslo", "Africa/Cairo", "America/Bogota"):
        await query(w.router, QueryRequest(question=ONLY_TIME, arguments={"timezone": zone}), bob)
    w.stats.health["time"] = "down"
    again = await query(w.router, QueryRequest(question=ONLY_TIME), alice)
    assert again.routing is not None and again.routing.cached and again.answer == first.answer


# -- audit ---------------------------------------------------------------------------------------


def test_audit_records_are_json_lines_with_an_arguments_hash_only(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(AuditSettings(path=str(path)))
    log.record(principal="alice", method="POST", path="/v1/query", status=200, latency_ms=3.2, request_id="r1",
               route={"backend": "time", "tool": "get_current_time", "mode": "fallback",
                      "arguments": {"timezone": "Asia/Tokyo"}})
    entry = json.loads(path.read_text().splitlines()[0])
    assert entry["principal"] == "alice" and entry["backend"] == "time" and entry["status"] == 200
    assert "Asia/Tokyo" not in path.read_text() and len(entry["arguments_sha256"]) == 64
    AuditLog(AuditSettings(path=str(path), include_arguments=True)).record(
        principal="a", method="POST", path="/v1/query", status=403, latency_ms=1, request_id="r2",
        route={"arguments": {"timezone": "Asia/Tokyo"}})
    second = json.loads(path.read_text().splitlines()[1])
    assert second["arguments"] == {"timezone": "Asia/Tokyo"} and second["outcome"] == "refused"


# -- configuration -------------------------------------------------------------------------------


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def test_the_secure_example_extends_the_bundled_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_ROUTER_DEMO_KEY_SHA256", key_hash(KEY))
    root = EXAMPLES
    secure, plain = load_settings(root / "secure.yaml"), load_settings(root / "router.yaml")
    assert [b.name for b in secure.backends] == [b.name for b in plain.backends]
    assert EXAMPLES not in Path(secure.state_dir).parents and EXAMPLES not in Path(plain.state_dir).parents
    assert (await Authenticator(secure.server.auth).authenticate({"x-api-key": KEY})).name == "demo"
    check_bind(secure.server.auth, ["0.0.0.0"])


def test_extends_refuses_a_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_settings(tmp_path / "a.yaml")
