"""A cluster's operations as tools take them: a name that ends in a number is no number, a parameter required for the
operation chosen is required, a kind's name written after it ("namespace kube-system", "node worker-1"), and an open set
of choices a description lists. Schemas as mcp-server-kubernetes (npm) lists them; "Drain node worker-1" drained no
named node with a grace period of 1 second, and "List pods in namespace kube-system" listed the default namespace's."""

from __future__ import annotations

import pytest

from router.errors import ArgumentsRequired
from router.stages.arguments import derive_arguments, required_for
from router.stages.choices import listed_choices
from router.values import Capability

NODES = Capability(backend="kubernetes", name="node_management", input_schema={
    "type": "object", "required": ["operation"], "properties": {
        "operation": {"type": "string", "enum": ["cordon", "drain", "uncordon"]},
        "nodeName": {"type": "string", "description": "Name of the node to operate on (required for cordon, drain, "
                                                      "uncordon)"},
        "gracePeriod": {"type": "number", "description": "Period of time in seconds given to each pod to terminate"}}})
GET = Capability(backend="kubernetes", name="kubectl_get", read_only=True, input_schema={
    "type": "object", "required": ["resourceType"], "properties": {
        "resourceType": {"type": "string", "description": "Type of resource to get (e.g., pods, deployments, services, "
                                                          "configmaps, events, etc.)"},
        "name": {"type": "string", "description": "Name of the resource"},
        "namespace": {"type": "string", "description": "Kubernetes namespace", "default": "default"}}})


def test_a_number_that_ends_a_name_is_no_number() -> None:
    assert derive_arguments(NODES, "Drain node worker-1")[0] == {"operation": "drain", "nodeName": "worker-1"}
    assert derive_arguments(NODES, "Drain node worker-1 with a grace period of 30")[0]["gracePeriod"] == 30


def test_a_parameter_required_for_the_operation_chosen_is_required() -> None:
    refused = derive_arguments(NODES, "Drain the node")
    assert isinstance(refused, ArgumentsRequired) and refused.details["missing"] == "nodeName"
    assert required_for({"description": "Container name (required when pod has multiple containers)"}) == set()


@pytest.mark.parametrize(("question", "values"), [
    ("List pods in namespace kube-system", {"resourceType": "pod", "namespace": "kube-system"}),
    ("List the pods in namespace prod-2", {"resourceType": "pod", "namespace": "prod-2"}),
    ("List pods in the namespace", {"resourceType": "pod"}),  # none named: the server's default
    ("List services of namespace in use", {"resourceType": "service"}),  # "in" names nothing
    ("List the volumes", None),  # not among the examples: which type is unsaid
])
def test_a_listing_takes_its_kind_from_the_examples_and_the_namespace_named(question: str, values: dict | None
                                                                          ) -> None:
    derived = derive_arguments(GET, question)
    assert (derived[0] if isinstance(derived, tuple) else None) == values


def test_examples_listed_bare_are_choices_in_both_numbers() -> None:
    assert listed_choices("Type (e.g., pods, deployments, etc.)") == ["pods", "pod", "deployments", "deployment"]
    assert listed_choices("Show logs since relative time (e.g. '5s', '2m')") == []  # quoted: shapes, not choices
