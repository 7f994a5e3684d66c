"""The directory's view of catalog changes: changes announced together are indexed in one rebuild, and a
reader of the statuses never waits for it."""

from __future__ import annotations

import asyncio
from typing import Any

from actors.directory import BackendDirectory
from actors.executor import ActorTable
from actors.host import BackendRef
from router.settings import RouterSettings
from router.values import BackendStatus, Capability, Catalog


class _Method:
    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def remote(self, *args: Any) -> Any:
        return self._fn(*args)


class FakeHost:
    """A host of backends whose catalog versions the test changes."""

    def __init__(self, names: list[str]) -> None:
        self.versions = dict.fromkeys(names, 1)
        self.catalogs = _Method(self._catalogs)
        self.get_statuses = _Method(self._statuses)
        self.start_all = _Method(self._started)

    async def _started(self, members: list[str], wait_s: float) -> None:
        return None

    def catalog(self, name: str) -> Catalog:
        v = self.versions[name]
        return Catalog(backend=name, version=str(v), description=f"{name} service",
                       capabilities=(Capability(backend=name, name=f"tool_v{v}", description=f"{name} tool v{v}"),))

    async def _statuses(self, members: list[str]) -> dict[str, BackendStatus]:
        return {m: BackendStatus(name=m, kind="mcp_http", transport="streamable-http", health="ok",
                                 catalog_version=str(self.versions[m])) for m in members}

    async def _catalogs(self, known: dict[str, str | None]) -> dict[str, Catalog]:
        return {m: self.catalog(m) for m, v in known.items() if v != str(self.versions[m])}


async def test_catalogs_changed_together_are_indexed_in_one_rebuild_without_holding_up_the_status_read() -> None:
    names = ["a", "b", "c"]
    settings = RouterSettings.model_validate({"backends": [
        {"name": n, "kind": "mcp_http", "url": f"http://127.0.0.1:9/{n}/mcp"} for n in names]})
    host = FakeHost(names)
    indexed: list[dict[str, str]] = []
    directory = BackendDirectory(settings, ActorTable({n: BackendRef(host, n) for n in names}), None, None,
                                 on_index=lambda cats, _: indexed.append({c.backend: c.version for c in cats}))
    await directory.wait_ready(timeout_s=1)
    assert indexed == [{"a": "1", "b": "1", "c": "1"}]

    host.versions["a"] = 2  # the first of a storm: the poll sees only this one
    await asyncio.wait_for(directory.refresh_statuses(settle_s=0.2), 0.1)  # returns before any rebuild
    host.versions["b"] = host.versions["c"] = 2  # the rest arrive while the change settles
    assert directory._syncing is not None
    await directory._syncing
    assert indexed[1:] == [{"a": "2", "b": "2", "c": "2"}]
    assert [c.name for c in directory.catalogs["b"].capabilities] == ["tool_v2"]

    await directory.refresh_statuses(settle_s=0)  # nothing changed since: no rebuild
    await asyncio.sleep(0.05)
    assert len(indexed) == 2
