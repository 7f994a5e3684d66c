"""Multi-node behaviour on one machine: a head and two worker nodes (`ray.cluster_utils.Cluster`).

Three equivalent backends whose actors are spread over the nodes; requests keep flowing through the
router's own wiring (BackendDirectory, RayExecutor, Router) while the worker node hosting one of the
actors is removed. Only the requests in flight to that node may fail; the actor comes back on a
surviving node and reconnects to its backend.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

from actors.directory import BackendDirectory
from actors.executor import ActorTable, RayExecutor
from actors.pool import create_backend_actor, create_performance_actor
from router.core import Router
from router.errors import RouterError
from router.models import QueryRequest
from router.settings import RouterSettings
from tests.conftest import EXAMPLES, stdio
from tests.unit.router_world import query

WORKERS = 4


async def _no_embed(texts: list[str]) -> Any:
    raise AssertionError("this test routes on BM25 only")


async def _spread_actors(settings: RouterSettings, worker_ids: set[str]) -> dict[str, Any]:
    """The backend actors, at least one of them on a worker node. SPREAD placement is best effort, so
    when every actor landed on the head they are created again rather than the test losing its point."""
    for _ in range(5):
        actors = {b.name: create_backend_actor(b, settings.resilience) for b in settings.backends}
        nodes = [(await a.get_status.remote()).node_id for a in actors.values()]
        if worker_ids & set(nodes):
            return actors
        _kill(actors.values())
    raise AssertionError(f"no backend actor was placed on a worker node: {nodes}")


async def test_losing_a_node_loses_only_in_flight_requests_and_its_actor_comes_back(cluster: Cluster) -> None:
    settings = RouterSettings.model_validate({
        "backends": [stdio(n, EXAMPLES / "servers" / "faulty.py", "--name", n, "--latency-ms", "20",
                           health_interval_s=1) for n in ("a", "b", "c")],
    })
    actors = await _spread_actors(settings, set(n.node_id for n in cluster.worker_nodes))
    table = ActorTable(dict(actors))
    performance = create_performance_actor(settings.resilience, "cluster-test")
    directory = BackendDirectory(settings, table, performance, embedder=None,
                                 on_index=lambda cats, index: router.set_catalogs(cats, index))
    router = Router(settings, executor=RayExecutor(table), embed=_no_embed, stats=directory)
    await directory.wait_ready(20)
    statuses = directory.statuses()
    assert all(s.health == "healthy" for s in statuses.values()), statuses
    head = cluster.head_node.node_id
    workers = {n.node_id: n for n in cluster.worker_nodes}
    victim_name, victim = next((name, workers[s.node_id]) for name, s in statuses.items() if s.node_id in workers)
    directory.start()

    outcomes: list[tuple[float, bool, str]] = []
    stop = asyncio.Event()

    async def worker() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                r = await query(router, QueryRequest(question="Answer a general knowledge question: capital of Peru?",
                                                    deadline_s=20))
                outcomes.append((started, True, r.backend))
            except RouterError as exc:
                outcomes.append((started, False, exc.code))
            await asyncio.sleep(0)  # an answer from the response cache never yields: let the others run

    tasks = [asyncio.create_task(worker()) for _ in range(WORKERS)]
    await asyncio.sleep(2)
    removed_at = time.monotonic()
    await asyncio.to_thread(cluster.remove_node, victim)
    removed_done = time.monotonic()
    await asyncio.sleep(6)
    # Requests in flight on the lost node wait until Ray declares it dead, which on a slow machine took most of
    # those 6 s: keep going until some requests have started after it was gone.
    for _ in range(60):  # at most 30 s more
        if sum(o[0] > removed_done + 1 for o in outcomes) >= 10:
            break
        await asyncio.sleep(0.5)
    stop.set()
    await asyncio.gather(*tasks)

    failures = [o for o in outcomes if not o[1]]
    assert len(outcomes) > 50
    # Only requests that may have been in flight on the lost node can fail: at most one per worker,
    # and none that started after the node was gone.
    assert len(failures) <= WORKERS, failures
    assert all(t <= removed_done + 1 for t, _, _ in failures), (removed_at, removed_done, failures)
    after = [o for o in outcomes if o[0] > removed_done + 1]
    assert after and all(ok for _, ok, _ in after)

    async def back() -> Any:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                s = await actors[victim_name].get_status.remote()
                if s.health == "healthy" and s.node_id != victim.node_id:
                    return s
            except ray.exceptions.RayError:
                pass  # restarting on a surviving node
            await asyncio.sleep(0.5)
        pytest.fail(f"backend {victim_name!r} did not come back on a surviving node")

    try:
        status = await back()
        assert status.node_id in (head, *(n for n in workers if n != victim.node_id))
    finally:
        await directory.stop()
        _kill([*actors.values(), performance])


def _kill(actors: Any) -> None:
    for actor in actors:
        ray.kill(getattr(actor, "host", actor), no_restart=True)
