"""A head and two worker nodes on this machine (`ray.cluster_utils.Cluster`), one per test module."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import ray
from ray.cluster_utils import Cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        c.add_node(num_cpus=1)
    ray.init(address=c.address, namespace="mcp-router-cluster-test", log_to_driver=False, logging_level="WARNING")
    c.wait_for_nodes()
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
        os.environ.pop("RAY_ADDRESS", None)
