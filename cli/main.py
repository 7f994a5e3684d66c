"""The `mcp-router` command line.

    mcp-router demo                                    # local Ray + the bundled examples, a few questions
    mcp-router serve --config PATH [--host H] [--port P]
    mcp-router query "What time is it in Tokyo?"       # ask a running router
    mcp-router route "..." | mcp-router backends
    mcp-router loadtest --url URL --concurrency 32 --duration 30
    mcp-router train --from-feedback [--out DIR]        # fine-tune retrieval on the collected examples
    mcp-router lock --config PATH | mcp-router approve BACKEND[/TOOL] --config PATH
    mcp-router keys create NAME                        # a new API key, and the line for the config

Client commands send `--api-key` (or $MCP_ROUTER_API_KEY) as `Authorization: Bearer`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

import httpx
from pydantic import ValidationError

from mcp_router import examples
from router.errors import ConfigError
from router.security.audit import AuditLog
from router.security.identity import Authenticator, check_bind, key_hash, new_api_key
from router.settings import BUILT_IN_POLICIES, RESERVED_NAMES, ApiKey, RouterSettings
from router.settings.file import load_settings

DEFAULT_URL = "http://127.0.0.1:8000"


class CommandError(Exception):
    """A client command that cannot go on (bad input, no usable answer): one line on stderr, no traceback."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _body(resp: httpx.Response) -> Any:
    """The answer's JSON; anything else (a proxy's HTML error page, say) is a `CommandError`."""
    try:
        return resp.json()
    except ValueError:
        raise CommandError(f"the router answered HTTP {resp.status_code} with a body that is not JSON: "
                           f"{resp.text[:200]!r}") from None


def _print_answer(body: dict[str, Any], verbose: bool = True) -> None:
    print(f"  answer : {body.get('answer', '')[:600]}")
    meta = body.get("routing") or {}
    chosen = meta.get("chosen") or {}
    scores = chosen.get("scores") or {}
    print(f"  route  : {body.get('backend')} / {body.get('capability')} ({body.get('kind')})  "
          f"intent={meta.get('intent')} mode={meta.get('mode')} cached={meta.get('cached')}")
    if scores:
        print("  scores : " + "  ".join(f"{k}={scores[k]:.3f}" for k in ("confidence", "composite", "match", "health",
                                                                         "perf", "dense", "bm25") if k in scores))
    if meta.get("arguments") is not None:
        print(f"  args   : {json.dumps(meta['arguments'])[:200]}  ({meta.get('arguments_source')})")
    print(f"  timing : decision {meta.get('decision_ms', 0):.1f} ms, backend {meta.get('execution_ms', 0):.1f} ms, "
          f"total {meta.get('total_ms', 0):.1f} ms")
    if verbose and meta.get("candidates"):
        print("  considered:")
        for c in meta["candidates"][:5]:
            s = c["scores"]
            print(f"    {c['rank']}. {c['backend']}/{c['capability']:<28} composite={s['composite']:.3f} "
                  f"match={s['match']:.3f} dense={s['dense']:.3f} bm25={s['bm25']:.2f}")
    if len(meta.get("attempts") or []) > 1:
        print("  attempts: " + ", ".join(f"{a['backend']}:{a['outcome']}" for a in meta["attempts"]))


def _print_error(resp: httpx.Response) -> None:
    try:
        body = resp.json()
    except ValueError:
        body = None
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):  # not the router's error format: a proxy's page, say
        print(f"  error {resp.status_code}: {resp.text[:300]}")
        return
    print(f"  error {resp.status_code} {err.get('type')}: {err.get('message')}")
    details = err.get("details") or {}
    for line in refusal_lines(details):
        print(f"  {line}")


def refusal_lines(details: dict[str, Any]) -> list[str]:
    """What a refusal offers instead of an answer: the closest candidates of a 404 or the tools of a 409
    (with how sure the router was of each), or the arguments a 422's tool needs."""
    lines = []
    if details.get("candidates"):
        lines.append("closest:")
        for c in details["candidates"][:3]:
            s = c.get("scores") or {}
            lines.append(f"  {c.get('rank')}. {c.get('backend')}/{c.get('capability'):<28} "
                         f"confidence={s.get('confidence', 0.0):.3f} tool={s.get('tool_confidence', 1.0):.2f} "
                         f"dense={s.get('dense', 0.0):.3f} bm25={s.get('bm25', 0.0):.2f}")
    schema = details.get("input_schema")
    if isinstance(schema, dict) and details.get("tool"):
        props = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        lines.append(f"{details.get('backend')}/{details['tool']} takes:")
        for name, spec in props.items():
            spec = spec if isinstance(spec, dict) else {}
            lines.append(f"  {name} ({spec.get('type', 'any')}{', required' if name in required else ''})"
                         + (f": {spec['description']}" if spec.get("description") else ""))
        lines.append("pass them as `arguments`, e.g. mcp-router query \"...\" --arguments '{...}'")
    return lines


def check_files(settings: RouterSettings) -> None:
    """The files the router's replicas open (a JWKS, the audit log), opened here first: one missing is a line
    naming it now, not a replica that fails three times while the application starts."""
    Authenticator(settings.server.auth)
    AuditLog(settings.audit).close()


def cmd_serve(args: argparse.Namespace, demo: bool = False) -> int:
    from mcp_router.cli.local import port_in_use, start_local, stop_local, wait_until_healthy

    overrides: dict[str, Any] = {"server": {}}
    if args.host:
        overrides["server"]["host"] = args.host
    if args.port:
        overrides["server"]["port"] = args.port
    if args.ingress:
        overrides["server"]["ingress"] = args.ingress
    if args.insecure_no_auth:
        overrides["server"]["auth"] = {"insecure_no_auth": True}
    try:
        settings = load_settings(args.config, overrides=overrides)
        check_bind(settings.server.auth, [settings.server.host])
        if "RAY_ADDRESS" not in os.environ:  # replicas on this machine: the files they open are here
            check_files(settings)
    except ConfigError as exc:
        print(f"mcp-router: {exc}", file=sys.stderr)
        return 2
    host, port = settings.server.host, settings.server.port
    if "RAY_ADDRESS" not in os.environ and port_in_use(host, port):  # its own local Ray: it binds the port
        print(f"mcp-router: {host}:{port} is already in use (another mcp-router, or another program); stop it, "
              "or choose another port with --port (server.port)", file=sys.stderr)
        return 2
    started = time.monotonic()
    print(f"starting Ray and the Serve application {settings.server.app_name!r} "
          f"({len(settings.enabled_backends)} backends from {args.config}) ...", flush=True)
    # SIGTERM stops the router as Ctrl-C does: the application is deleted gracefully (backends drained
    # and stopped, no child process left), then Ray (start_local keeps this once Ray is up).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        endpoints = start_local(settings, num_cpus=args.num_cpus, quiet=not args.verbose)
        report = wait_until_healthy(endpoints.url, 60 if demo else 20)
        print(f"mcp-router ready at {endpoints.url}  (console: {endpoints.url}/ui/, docs: {endpoints.url}/docs) "
              f"after {time.monotonic() - started:.1f} s", flush=True)
        for name, b in (report.get("backends") or {}).items():
            print(f"  backend {name:<16} {b['status']}" + (f"  ({b['last_error']})" if b.get("last_error") else ""))
        if demo:
            _demo(endpoints.url, settings.demo_questions, started)
        print("serving; press Ctrl-C to stop", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping ...", flush=True)
        stop_local(settings)
    return 0


def _demo(url: str, questions: list[str], started: float) -> None:
    with httpx.Client(timeout=60) as client:
        for i, q in enumerate(questions):
            print(f"\n> {q}")
            resp = client.post(f"{url}/v1/query", json={"question": q})
            if i == 0:
                print(f"  (first answer {time.monotonic() - started:.1f} s after start)")
            if resp.status_code == 200:
                _print_answer(resp.json(), verbose=i == 0)
            else:
                _print_error(resp)
    print(f"\ntry: curl -s {url}/v1/query -H 'content-type: application/json' "
          "-d '{\"question\": \"What time is it in Tokyo?\"}'")
    print(f"or open the console: {url}/ui/ (backends, why a question went where it went, recent decisions)\n")


def cmd_query(args: argparse.Namespace) -> int:
    payload: dict[str, Any] = {"question": args.question}
    for key in ("intent", "backend", "tool", "mode", "session_id"):
        if getattr(args, key, None):
            payload[key] = getattr(args, key)
    if args.arguments:
        try:
            payload["arguments"] = json.loads(args.arguments)
        except ValueError as exc:
            raise CommandError(f"--arguments is not valid JSON: {exc}", exit_code=2) from None
        if not isinstance(payload["arguments"], dict):
            raise CommandError("--arguments must be a JSON object, e.g. '{\"timezone\": \"Asia/Tokyo\"}'",
                               exit_code=2)
    resp = httpx.post(f"{args.url}/v1/query", json=payload, timeout=args.timeout, headers=_auth(args))
    if args.json:
        print(json.dumps(_body(resp), indent=2))
    elif resp.status_code == 200:
        _print_answer(_body(resp))
    else:
        _print_error(resp)
    return 0 if resp.status_code == 200 else 1


def cmd_route(args: argparse.Namespace) -> int:
    resp = httpx.post(f"{args.url}/v1/route", json={"question": args.question}, timeout=args.timeout,
                      headers=_auth(args))
    body = _body(resp)
    if args.json or resp.status_code != 200:
        print(json.dumps(body, indent=2))
        return 0 if resp.status_code == 200 else 1
    print("\n".join(route_lines(body)))
    return 0


def route_lines(body: dict[str, Any]) -> list[str]:
    """A dry run as a person reads it: what the query would do, then each candidate in decision order with the
    scores that ordered it and the confidences that let it be called (and why it stands where it does)."""
    given = f" with {json.dumps(body['arguments'])} ({body.get('arguments_source')})" \
        if body.get("arguments") is not None else ""
    lines = [f"{body['decision']}: {body['message']} (intent {body['intent']}, {body['decision_ms']:.1f} ms)",
             "would call: " + ", then ".join(body["calls"]) + given if body.get("calls") else
             f"would answer {body.get('status')} {body.get('error') or ''}".rstrip()]
    for c in body["candidates"]:
        s = c["scores"]
        lines.append(f"  {c['rank']}. {c['backend']}/{c['capability']:<30} confidence={s['confidence']:.3f} "
                     f"tool={s['tool_confidence']:.2f} composite={s['composite']:.3f} match={s['match']:.3f} "
                     f"health={s['health']:.1f} perf={s['perf']:.2f}"
                     + (f"  [placed: {c['placed']}]" if c.get("placed") else "")
                     + (f"  [not called: {c['ruled_out']}]" if c.get("ruled_out") else ""))
    return lines


def cmd_backends(args: argparse.Namespace) -> int:
    resp = httpx.get(f"{args.url}/v1/backends", timeout=args.timeout, headers=_auth(args))
    body = _body(resp)
    if args.json or resp.status_code != 200:
        print(json.dumps(body, indent=2))
        return 0 if resp.status_code == 200 else 1
    for b in body:
        count = b["tool_count"] + b["prompt_count"] + b["resource_count"] + b["flow_count"]
        print(f"{b['name']:<18} {b['kind']:<10} {b['transport']:<16} {b['health']:<9} {count:>4} capabilities"
              + (f"  last error: {b['last_error']}" if b.get("last_error") else ""))
        if b.get("catalog_error"):
            print(f"    catalog rejected: {b['catalog_error']}")
        for h in b.get("held_tools") or []:
            why = ", ".join(h.get("changed") or h.get("rules") or [])
            print(f"    held: {h['tool']} ({h['reason']}{': ' + why if why else ''}); "
                  f"mcp-router approve {b['name']}/{h['tool']} --config PATH")
        for f in b.get("flagged_tools") or []:
            print(f"    flagged: {f['tool']} ({', '.join(f['rules'])})")
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    """A new API key, shown once; the configuration keeps only its hash. A name the configuration would refuse
    is refused before any key is shown."""
    key = new_api_key()
    if args.name in RESERVED_NAMES:
        raise CommandError(f"{args.name!r} is reserved for callers without a key; choose another name")
    try:
        ApiKey(name=args.name, sha256=key_hash(key), policy=args.policy)
    except ValidationError as exc:
        raise CommandError(f"not a key name: {args.name!r} ({exc.errors()[0]['msg']})") from None
    if args.policy not in BUILT_IN_POLICIES:
        print(f"Policy {args.policy!r} must be defined under server.auth.policies.\n", file=sys.stderr)
    print(f"API key for {args.name} (shown once; store it now):\n\n  {key}\n")
    print("Add to the configuration under server.auth.api_keys:\n")
    print(f"  - name: {args.name}\n    sha256: {key_hash(key)}\n    policy: {args.policy}")
    return 0


def _auth(args: argparse.Namespace) -> dict[str, str]:
    key = api_key(args)
    return {"Authorization": f"Bearer {key}"} if key else {}


def api_key(args: argparse.Namespace) -> str | None:
    """`--api-key`, else $MCP_ROUTER_API_KEY. A key with a character HTTP headers cannot carry (a pasted
    ellipsis, an accent) is the caller's mistake, said as such rather than as an encoding traceback."""
    key = args.api_key or os.environ.get("MCP_ROUTER_API_KEY")
    if key and not key.isascii():
        raise CommandError("the API key (--api-key or $MCP_ROUTER_API_KEY) holds a character that is not ASCII; "
                           "keys are what `mcp-router keys create` printed", exit_code=2)
    return key


def positive(kind: type) -> Any:
    """An argparse type: a number of `kind` above zero."""
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mcp-router", description="Route questions to MCP servers and flows.")
    sub = p.add_subparsers(dest="command", required=True)

    def serve_opts(sp: argparse.ArgumentParser, default_config: str | None) -> None:
        sp.add_argument("--config", default=default_config, required=default_config is None)
        sp.add_argument("--host")
        sp.add_argument("--port", type=int)
        sp.add_argument("--ingress", choices=["haproxy", "direct", "proxy"])
        sp.add_argument("--num-cpus", type=int, default=None)
        sp.add_argument("--verbose", action="store_true", help="show Ray and Serve logs")
        sp.add_argument("--insecure-no-auth", action="store_true",
                        help="serve without authentication on a non-loopback address (logged at every start)")

    serve_opts(sub.add_parser("serve", help="run the router in the foreground"), None)
    serve_opts(sub.add_parser("demo", help="run the bundled example and ask it a few questions"),
               str(examples.CONFIG))

    def client_opts(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--url", default=DEFAULT_URL)
        sp.add_argument("--json", action="store_true")
        sp.add_argument("--timeout", type=positive(float), default=60)
        sp.add_argument("--api-key", help="the key to authenticate with (default: $MCP_ROUTER_API_KEY)")

    q = sub.add_parser("query", help="ask a running router")
    q.add_argument("question")
    for opt in ("--intent", "--backend", "--tool", "--mode", "--session-id"):
        q.add_argument(opt)
    q.add_argument("--arguments", help="tool arguments as JSON")
    client_opts(q)
    r = sub.add_parser("route", help="show the routing decision without calling anything")
    r.add_argument("question")
    client_opts(r)
    client_opts(sub.add_parser("backends", help="list backends and their health"))
    keys = sub.add_parser("keys", help="manage API keys").add_subparsers(dest="keys_command", required=True)
    create = keys.add_parser("create", help="create a new API key and print its configuration entry")
    create.add_argument("name", help="the principal the key stands for")
    create.add_argument("--policy", default="default", help="the policy it gets (default: default)")
    from mcp_router.cli.loadtest import add_loadtest_parser
    from mcp_router.cli.security import add_security_parsers

    add_loadtest_parser(sub)
    from mcp_router.cli.train import add_train_parser

    add_train_parser(sub)
    add_security_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("serve", "demo"):
        return cmd_serve(args, demo=args.command == "demo")
    if args.command == "loadtest":
        from mcp_router.cli.loadtest import cmd_loadtest

        return cmd_loadtest(args)
    if args.command == "train":
        from mcp_router.cli.train import cmd_train

        return cmd_train(args)
    if args.command in ("lock", "approve"):
        from mcp_router.cli.security import cmd_approve, cmd_lock

        return cmd_lock(args) if args.command == "lock" else cmd_approve(args)
    try:
        return {"query": cmd_query, "route": cmd_route, "backends": cmd_backends,
                "keys": cmd_keys}[args.command](args)
    except CommandError as exc:
        print(f"mcp-router: {exc}", file=sys.stderr)
        return exc.exit_code
    except httpx.ConnectError as exc:
        print(f"mcp-router: cannot reach the router at {args.url}: {exc}", file=sys.stderr)
        return 1
    except httpx.TimeoutException:
        print(f"mcp-router: the router at {args.url} did not answer within {args.timeout:g} s (--timeout)",
              file=sys.stderr)
        return 1
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        print(f"mcp-router: --url {args.url!r} is not a router URL such as {DEFAULT_URL}: {exc}", file=sys.stderr)
        return 2
    except httpx.HTTPError as exc:
        print(f"mcp-router: the request to the router at {args.url} failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
