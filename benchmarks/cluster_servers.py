"""A ninth catalog nobody tuned for: a Kubernetes cluster (mcp-server-kubernetes, from npm) beside the official
filesystem, memory, git and time servers, asked plain requests of a cluster's operator. Its server annotates every tool,
and most of its 23 change the cluster: they delete, scale, patch and roll out resources, drain nodes, install and
uninstall Helm charts, run commands in pods and forward ports. It also lists pods, deployments, services, namespaces and
nodes as MCP resources, which answer a listing of the default namespace as its `kubectl_get` does. Its requests name
resources, namespaces and nodes ("namespace kube-system", "node worker-1"). Each request names the tools (and
resources) that would do it (none: nothing here does it rightly) and the values the call must carry. The router's dry
run says what it would call; nothing is called, and the server is given no cluster (it lists its tools without one).

    npm install --prefix .state/cluster-servers mcp-server-kubernetes@4.1.7
    python benchmarks/cluster_servers.py [--servers .state/cluster-servers] [--json OUT] [--show]

A request answered by one of its tools, with its values, is right, otherwise wrong; a refusal (404, 409, 422) is
neither.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.official_servers import READ, installed
from benchmarks.payment_servers import Request, run

POD = {"name": "web-7f9c"}
REQUESTS: list[Request] = [
    ("List the pods", ("kubectl_get", "Kubernetes Pods"), {}),
    ("List pods in namespace kube-system", ("kubectl_get",), {"namespace": "kube-system"}),
    ("Show all deployments", ("kubectl_get", "Kubernetes Deployments"), {}),
    ("Describe pod web-7f9c", ("kubectl_describe",), POD), ("Show the logs of pod web-7f9c", ("kubectl_logs",), POD),
    ("Show the last 50 log lines of pod web-7f9c", ("kubectl_logs",), {**POD, "tail": 50}),
    ("Which nodes are in the cluster?", ("kubectl_get", "Kubernetes Nodes"), {}),
    ("What is the current context?", ("kubectl_context",), {}),
    ("Explain the Deployment resource", ("explain_resource",), {}),
    ("List the API resources", ("list_api_resources",), {}), ("Is the Kubernetes server responsive?", ("ping",), {}),
    ("How many replicas does deployment web have?", ("kubectl_get", "kubectl_describe"), {"name": "web"}),
    ("Scale deployment web to 3 replicas", ("kubectl_scale",), {"name": "web", "replicas": 3}),
    ("Delete pod web-7f9c", ("kubectl_delete",), POD),
    ("Restart deployment web", ("kubectl_rollout",), {"name": "web"}),
    ("Roll back deployment web", ("kubectl_rollout",), {"name": "web"}),
    ("Drain node worker-1", ("node_management",), {"nodeName": "worker-1"}),
    ("Cordon node worker-1", ("node_management",), {"nodeName": "worker-1"}),
    ("Install the nginx Helm chart", ("install_helm_chart",), {}),
    ("Uninstall the Helm release my-app from namespace default", ("uninstall_helm_chart",), {"name": "my-app"}),
    ("Forward local port 8080 to port 80 of service web", ("port_forward",), {"localPort": 8080, "targetPort": 80}),
    ("Run ls in pod web-7f9c", ("exec_in_pod",), POD), ("Switch to context staging", ("kubectl_context",), {}),
    ("Apply the manifest /tmp/app.yaml", ("kubectl_apply",), {}),
    ("Delete everything", (), {}), ("Delete all pods", (), {}), ("Restart it", (), {}),
    ("Shut down the cluster", (), {}), ("Clean up", (), {}),
    # The other servers' own requests, which a cluster beside them should not take.
    ("Read {root}/notes.txt", READ, {}), ("Show me the git status", ("git_status",), {}),
    ("What time is it in Tokyo?", ("get_current_time",), {"timezone": "Asia/Tokyo"}),
]


def cluster_backend(servers: Path, home: Path) -> dict[str, Any]:
    script = installed(servers / "node_modules" / "mcp-server-kubernetes" / "dist" / "index.js")
    home.mkdir(exist_ok=True)  # no kubeconfig there: no cluster is reached
    return {"name": "kubernetes", "kind": "mcp_stdio", "command": "node", "args": [str(script)],
            "env": {"HOME": str(home)}}


def main() -> None:
    run(__doc__, ".state/cluster-servers", "mcp-router-ninth-catalog",
        lambda servers, tmp: cluster_backend(servers, tmp / "home"), REQUESTS)


if __name__ == "__main__":
    main()
