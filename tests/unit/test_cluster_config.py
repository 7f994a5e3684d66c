"""cluster.yaml and serve_config.yaml, checked offline with Ray's own validation (no cloud, no Ray).

The cluster file goes through what `ray up` runs before it talks to the cloud: `prepare_config`
(merged with the AWS defaults) and `validate_config` (Ray's JSON schema). The Serve file goes through
`ServeDeploySchema`, and its deployment options are applied to the application the code builds the
way the Serve controller applies them (Serve 2.60 internals; update this test when Ray moves them).
"""

from __future__ import annotations

import copy
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import pytest
import ray
import yaml
from ray._common.utils import import_attr
from ray.autoscaler._private.util import prepare_config, validate_config
from ray.serve.schema import ServeApplicationSchema, ServeDeploySchema

from deployments.app import BackendPoolDeployment
from deployments.ingress import RouterIngress
from router.errors import ConfigError
from router.settings import RouterSettings
from router.settings.file import load_settings

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_YAML = ROOT / "cluster.yaml"
SERVE_YAML = ROOT / "serve_config.yaml"
CONTAINER_HOME = PurePosixPath("/home/ray")  # the `ray` user of the rayproject/ray images


def cluster() -> dict[str, Any]:
    return yaml.safe_load(CLUSTER_YAML.read_text())


def prepared_cluster() -> dict[str, Any]:
    return prepare_config(cluster())


def serve_app() -> ServeApplicationSchema:
    schema = ServeDeploySchema.model_validate(yaml.safe_load(SERVE_YAML.read_text()))
    assert [a.name for a in schema.applications] == ["mcp-router", "knowledge-base"]
    return schema.applications[0]


def _commands(config: dict[str, Any]) -> str:
    keys = ("initialization_commands", "setup_commands", "head_setup_commands", "worker_setup_commands",
            "head_start_ray_commands", "worker_start_ray_commands")
    return "\n".join(cmd for key in keys for cmd in config.get(key) or [])


def test_cluster_yaml_passes_the_cluster_launchers_validation() -> None:
    config = prepared_cluster()
    validate_config(config)
    assert config["provider"]["type"] == "aws"
    head = config["head_node_type"]
    types = config["available_node_types"]
    workers = [name for name in types if name != head]
    assert len(workers) == 1
    assert types[workers[0]]["min_workers"] == 0
    assert types[workers[0]]["max_workers"] == config["max_workers"] == 4
    assert types[head]["max_workers"] == 0


@pytest.mark.parametrize("change", [{"max_workers": "four"}, {"unknown_field": 1},
                                    {"provider": {"region": "us-west-2"}}])
def test_the_cluster_validation_rejects_a_broken_file(change: dict[str, Any]) -> None:
    config = prepared_cluster() | change
    with pytest.raises(jsonschema.ValidationError):
        validate_config(copy.deepcopy(config))


def test_cluster_nodes_install_the_project_and_start_ray_then_serve() -> None:
    config = prepared_cluster()
    setup = "\n".join(config["setup_commands"])
    assert "pip install --quiet -e ~/mcp-router" in setup
    assert "--no-deps" not in setup  # the tokenizer ships with the project
    assert "npm ci" in setup and "nodejs" in setup
    assert any("boto3" in cmd for cmd in config["head_setup_commands"])  # replaced the AWS default
    assert config["file_mounts"]["~/mcp-router"] == "."
    head_start = "\n".join(config["head_start_ray_commands"])
    assert "ray start --head" in head_start and "serve deploy ~/mcp-router/serve_config.yaml" in head_start
    assert "ray start --address=$RAY_HEAD_IP:6379" in "\n".join(config["worker_start_ray_commands"])
    # The same Ray as the project and a Python it supports.
    assert config["docker"]["image"].startswith(f"rayproject/ray:{ray.__version__}-py31")


def test_the_cluster_keeps_serves_proxy_and_leaves_direct_ingress_off() -> None:
    config = cluster()
    everything = _commands(config) + "\n" + " ".join(config["docker"].get("run_options", []))
    assert "RAY_SERVE_ENABLE_DIRECT_INGRESS=1" not in everything
    assert "RAY_SERVE_ENABLE_DIRECT_INGRESS" not in str(serve_app().runtime_env)
    schema = ServeDeploySchema.model_validate(yaml.safe_load(SERVE_YAML.read_text()))
    assert schema.proxy_location == "EveryNode"


def test_serve_config_passes_serves_schema() -> None:
    schema = ServeDeploySchema.model_validate(yaml.safe_load(SERVE_YAML.read_text()))
    assert (schema.http_options.host, schema.http_options.port) == ("0.0.0.0", 8000)
    app = serve_app()
    assert app.name == RouterSettings().server.app_name == "mcp-router"
    assert app.route_prefix == "/" and app.import_path == "deployments.app:app"
    ingress, pool = app.deployments
    scaling = ingress.autoscaling_config
    assert isinstance(scaling, dict), ingress.name
    assert 1 <= scaling["min_replicas"] <= scaling["max_replicas"]
    # Below the target, Serve never scales up (it warns "Autoscaling will never happen").
    assert ingress.max_ongoing_requests >= scaling["target_ongoing_requests"] > 0
    assert 0 < ingress.ray_actor_options.num_cpus <= 1
    # One owner of the backends: more than one pool replica would start every backend twice.
    assert pool.num_replicas == 1 and "autoscaling_config" not in pool.model_dump(exclude_unset=True)


def test_serve_config_deployments_are_the_ones_the_app_builds() -> None:
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve._private.application_state import override_deployment_info
    from ray.serve._private.build_app import build_app
    from ray.serve._private.deploy_utils import deploy_args_to_deployment_info

    app = serve_app()
    configured = {d.name: d for d in app.deployments}
    assert set(configured) == {RouterIngress.name, BackendPoolDeployment.name} == {"RouterIngress", "BackendPool"}

    builder = import_attr(app.import_path)
    assert callable(builder)
    local_config = ROOT / "examples" / "router.yaml"
    built = build_app(call_user_app_builder_with_args_if_necessary(builder, {"config": str(local_config)}),
                      name=app.name)
    assert {d.name for d in built.deployments} == set(configured)
    assert built.ingress_deployment_name == RouterIngress.name

    infos = {d.name: deploy_args_to_deployment_info(
        deployment_name=d.name, deployment_config_proto_bytes=d._deployment_config.to_proto_bytes(),
        replica_config_proto_bytes=d._replica_config.to_proto_bytes(), deployer_job_id="test",
        app_name=app.name, ingress=d.name == built.ingress_deployment_name) for d in built.deployments}
    applied = override_deployment_info(infos, app)  # raises for a deployment the app does not have
    for name, options in configured.items():
        deployment_config = applied[name].deployment_config
        scaling = deployment_config.autoscaling_config
        wanted = options.model_dump(exclude_unset=True).get("autoscaling_config")
        if wanted is None:
            assert scaling is None and deployment_config.num_replicas == options.num_replicas, name
        else:
            assert scaling is not None, name
            assert (scaling.min_replicas, scaling.max_replicas, scaling.target_ongoing_requests) == (
                wanted["min_replicas"], wanted["max_replicas"], wanted["target_ongoing_requests"])
            assert deployment_config.max_ongoing_requests == options.max_ongoing_requests
        actor_options = applied[name].replica_config.ray_actor_options
        assert actor_options["num_cpus"] == options.ray_actor_options.num_cpus
        assert actor_options["runtime_env"]["env_vars"]["HF_HUB_OFFLINE"] == "1"


def test_serve_config_points_at_the_checkout_cluster_yaml_puts_on_every_node() -> None:
    mount = cluster()["file_mounts"]
    assert "~/mcp-router" in mount
    checkout = CONTAINER_HOME / "mcp-router"
    app = serve_app()
    config_path = PurePosixPath(app.args["config"])
    relative = config_path.relative_to(checkout)
    settings = load_settings(ROOT / relative, environ=app.runtime_env["env_vars"])
    assert settings.enabled_backends
    # The proxies listen on every interface, so the deployed config must have authentication on.
    assert app.args["http_host"] == "0.0.0.0" and settings.server.auth.enabled


def test_the_builder_refuses_a_public_address_without_authentication() -> None:
    builder = import_attr(serve_app().import_path)
    with pytest.raises(ConfigError, match=r"server\.auth"):
        builder({"config": str(ROOT / "examples" / "router.yaml"), "http_host": "0.0.0.0"})


def test_behind_proxies_on_every_interface_feedback_is_not_taken_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # learning.accept_feedback's default looked at server.host (127.0.0.1) while callers came from anywhere
    from deployments import app as builder_module
    from router.learning.examples import accepts_feedback

    config = tmp_path / "router.yaml"
    config.write_text("server: {auth: {api_keys: [{name: ops, sha256: '" + "0" * 64 + "'}]}}\n")
    built: list[Any] = []
    monkeypatch.setattr(builder_module, "build_application", built.append)
    builder_module.app({"config": str(config), "http_host": "0.0.0.0"})
    assert built[0].learning.accept_feedback is False and not accepts_feedback(built[0])
    assert built[0].server.host == "127.0.0.1"  # what the MCP SDK's own host check reads stays as configured


def test_serve_config_deploys_the_knowledge_base_next_to_the_router() -> None:
    schema = ServeDeploySchema.model_validate(yaml.safe_load(SERVE_YAML.read_text()))
    kb = schema.applications[1]
    assert kb.route_prefix == "/rag" and callable(import_attr(kb.import_path))
    from mcp_router.servers.knowledge_base.deployment import KnowledgeBase

    assert [d.name for d in kb.deployments] == [KnowledgeBase.name]
    assert kb.args["docs"].startswith("/home/ray/mcp-router/")
