"""Where the pool places its host actors on a cluster: one node after another, and again elsewhere when a
node is lost."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray
from ray.cluster_utils import Cluster

from actors.directory import BackendDirectory
from actors.executor import ActorTable
from actors.pool import BackendPool
from router.settings import RouterSettings
from tests.conftest import EXAMPLES, stdio


async def test_hosts_go_one_to_each_node_and_are_placed_again_when_their_node_is_lost(cluster: Cluster) -> None:
    settings = RouterSettings.model_validate({
        "backends": [stdio(n, EXAMPLES / "servers" / "faulty.py", "--name", n, health_interval_s=1)
                     for n in ("a", "b", "c")],
        "server": {"hosting": {"stdio_backends_per_host": 1}},
    })
    pool = BackendPool("placement-test", "v1", hosting=settings.server.hosting)

    async def placed_refs() -> dict[str, Any]:
        return (await pool.acquire(settings.enabled_backends, settings.resilience, 1.0))[0]

    async def placed() -> tuple[dict[str, Any], dict[str, str | None]]:
        refs = await placed_refs()
        return refs, {name: (await ref.start.remote(10.0)).node_id for name, ref in refs.items()}

    try:
        refs, first = await placed()
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert set(first.values()) == alive  # three hosts, three nodes: one on each, every time
        workers = {n.node_id: n for n in cluster.worker_nodes}
        victim = next(name for name, node in first.items() if node in workers)
        lost = first[victim]
        await asyncio.to_thread(cluster.remove_node, workers[lost])
        # Pinned to a node that is gone, the host neither answers nor restarts: a replica's status read
        # finds it so and asks the pool, which places its backends again on the nodes left.
        table = ActorTable(dict(refs), placed_refs)
        directory = BackendDirectory(settings, table, None, None, on_index=lambda *_: None)
        deadline = time.monotonic() + 90
        while table.handles[victim] is refs[victim]:
            assert time.monotonic() < deadline, f"backend {victim!r} was not placed again off its lost node"
            await directory.refresh_statuses(settle_s=0)
            await asyncio.sleep(1)
        await directory.stop()
        _, now = await placed()
        assert now[victim] in alive - {lost}
        assert {n: now[n] for n in now if n != victim} == {n: first[n] for n in first if n != victim}
    finally:
        await pool.shutdown()
