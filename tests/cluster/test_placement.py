"""Where the pool places its host actors on a cluster: one node after another, and again elsewhere when a
node is lost."""

from __future__ import annotations

import asyncio
import time

import ray
from ray.cluster_utils import Cluster

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

    async def placed() -> dict[str, str | None]:
        refs, _ = await pool.acquire(settings.enabled_backends, settings.resilience, 1.0)
        return {name: (await ref.start.remote(10.0)).node_id for name, ref in refs.items()}

    try:
        first = await placed()
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert set(first.values()) == alive  # three hosts, three nodes: one on each, every time
        workers = {n.node_id: n for n in cluster.worker_nodes}
        victim = next(name for name, node in first.items() if node in workers)
        lost = first[victim]
        await asyncio.to_thread(cluster.remove_node, workers[lost])
        deadline = time.monotonic() + 90
        while True:
            try:
                now = await asyncio.wait_for(placed(), 30)
                if now[victim] != lost:
                    break
            except (ray.exceptions.RayError, TimeoutError):
                pass  # the host is going down with its node
            assert time.monotonic() < deadline, f"backend {victim!r} was not placed again off its lost node"
            await asyncio.sleep(1)
        assert now[victim] in alive - {lost}
        assert {n: now[n] for n in now if n != victim} == {n: first[n] for n in first if n != victim}
    finally:
        await pool.shutdown()
