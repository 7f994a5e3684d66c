"""The Backend protocol every backend kind implements, and helpers they share.

A backend is a plain async class (no Ray), so it can be tested on its own; a `BackendSupervisor`
(`actors.backend`) wraps one per configured backend:

    backend = BACKENDS[spec.kind](spec)
    await backend.connect()
    catalog = await backend.list_capabilities()
    outcome = await backend.call(catalog.capabilities[0], {"query": "..."}, timeout_s=10, context=ctx)

`call` returns a successful `CallOutcome` or raises a `RouterError` (foreign errors are translated
inside each backend module, in one place).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from router.values import CallContext, CallOutcome, Capability, Catalog


class Backend(Protocol):
    name: str
    kind: str
    transport: str
    # Set by the owner; a backend calls it when the server says its capabilities changed.
    on_change: Callable[[], None] | None

    async def connect(self) -> None: ...

    async def list_capabilities(self) -> Catalog: ...

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext) -> CallOutcome: ...

    async def health(self, timeout_s: float) -> None:
        """Returns when the backend answers; raises a RouterError otherwise."""
        ...

    async def close(self) -> None:
        """Drop the connection; `connect` may open it again."""
        ...

    async def shutdown(self) -> None:
        """Final teardown, including anything the backend started (a launched server process)."""
        ...


def catalog_version(description: str, capabilities: Sequence[Capability]) -> str:
    payload = json.dumps(
        [description, [(c.kind, c.name, c.description, c.title, c.input_schema, c.target, c.intents, c.tags,
                        c.read_only, c.idempotent, c.fixed) for c in capabilities]],
        sort_keys=True, default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def make_catalog(backend: str, description: str, capabilities: Sequence[Capability],
                 intents: Sequence[str] = (), read_only: bool = False, held: Sequence[Capability] = ()) -> Catalog:
    version = catalog_version(description, capabilities) + ("r" if read_only else "")
    if held:
        version += "h" + catalog_version("", held)[:8]
    return Catalog(backend=backend, version=version, description=description, capabilities=tuple(capabilities),
                   intents=tuple(intents), read_only=read_only, held=tuple(held))
