"""`mcp-router lock` and `mcp-router approve`: the operator's side of pinned tool definitions.

    mcp-router lock --config router.yaml              # connect to every backend, write mcp-router.lock.json
    mcp-router approve time/get_current_time --config router.yaml    # accept a held, changed definition
    mcp-router approve time --config router.yaml                     # accept every held one of `time`

The lock file lists, per backend, the fingerprint of each capability as the router would index it
(cleaned of invisible characters): commit it next to the config, and a backend it lists serves
exactly those definitions until an approval. Approvals are read by the running router at each
backend's next health check (`health_interval_s`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from router.errors import ConfigError
from router.settings import RouterSettings
from router.settings.file import load_settings
from router.trust.pins import approve, definition, fingerprint, pin_key, read_json, write_json
from router.trust.untrusted import over_limits, sanitise


def add_security_parsers(sub: Any) -> None:
    lock = sub.add_parser("lock", help="write the lock file of tool definitions next to the config")
    lock.add_argument("--config", required=True)
    lock.add_argument("--backend", action="append", help="only this backend (repeatable); others are kept as they are")
    lock.add_argument("--timeout", type=float, default=30.0, help="seconds to connect to and list one backend")
    ok = sub.add_parser("approve", help="approve a held tool definition (BACKEND or BACKEND/TOOL)")
    ok.add_argument("target", metavar="BACKEND[/TOOL]")
    ok.add_argument("--config", required=True)


def _settings(path: str) -> RouterSettings | None:
    try:
        return load_settings(path)
    except ConfigError as exc:
        print(f"mcp-router: {exc.message}", file=sys.stderr)
        return None


async def _listed(spec: Any, timeout_s: float) -> dict[str, Any]:
    from actors.backends import build_backend

    backend = build_backend(spec)
    try:
        async with asyncio.timeout(timeout_s):
            await backend.connect()
            catalog = await backend.list_capabilities()
    finally:
        await backend.shutdown()
    return {"description": catalog.description, "capabilities": catalog.capabilities}


def cmd_lock(args: argparse.Namespace) -> int:
    settings = _settings(args.config)
    if settings is None:
        return 2
    unknown = sorted(set(args.backend or ()) - {b.name for b in settings.enabled_backends})
    if unknown:  # a misspelt name locked nothing, yet the command said it wrote the lock file
        print(f"mcp-router: unknown backend {', '.join(map(repr, unknown))}; enabled: "
              f"{', '.join(b.name for b in settings.enabled_backends)}", file=sys.stderr)
        return 2
    lock_file = Path(settings.security.lock_file)
    lock = read_json(lock_file)
    wanted = [b for b in settings.enabled_backends if not args.backend or b.name in args.backend]
    failed = 0
    for spec in wanted:
        try:
            listed = asyncio.run(_listed(spec, args.timeout))
        except Exception as exc:  # one unreachable backend is reported; the others are still locked
            print(f"  {spec.name}: not locked ({type(exc).__name__}: {str(exc)[:200]})", file=sys.stderr)
            failed += 1
            continue
        problem = over_limits(listed["description"], listed["capabilities"], settings.security)
        if problem is not None:
            print(f"  {spec.name}: not locked, its catalog is rejected: {problem}", file=sys.stderr)
            failed += 1
            continue
        _, caps, _ = sanitise(listed["description"], listed["capabilities"])
        lock[spec.name] = {pin_key(c): {**fingerprint(c), "definition": definition(c)} for c in caps}
        print(f"  {spec.name}: {len(caps)} capabilities locked")
    write_json(lock_file, lock)
    print(f"wrote {lock_file}")
    return 1 if failed else 0


def cmd_approve(args: argparse.Namespace) -> int:
    settings = _settings(args.config)
    if settings is None:
        return 2
    backend, _, tool = args.target.partition("/")
    if settings.backend(backend) is None:
        print(f"mcp-router: unknown backend {backend!r}; configured: "
              f"{', '.join(b.name for b in settings.backends)}", file=sys.stderr)
        return 2
    lock_file = Path(settings.security.lock_file)
    approved = approve(Path(settings.state_dir) / "pins", lock_file if lock_file.is_file() else None, backend,
                       tool or None)
    if not approved:
        print(f"nothing held for {args.target} (see `held_tools` on /v1/backends)")
        return 1
    for key in approved:
        print(f"approved {backend}/{key}")
    return 0
