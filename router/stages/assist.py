"""The optional LLM steps, each wrapping a stage: they take its frozen output and return a new one.

- after decide, a verdict too close to call: the model picks a server (its tools go first), says
  nothing fits (`no_match`), or asks the caller which one was meant (the message);
- after plan, a best match whose required arguments the question does not give: the model fills
  them from the question against the tool's schema (and what it fills is validated against that
  schema like any derived argument), and the other callable candidates follow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from router.arguments import schema_violation
from router.errors import ArgumentsRequired, BackendNotCallable
from router.llm import LLMClient
from router.models import QueryRequest
from router.stages.plan import planned_calls
from router.values import BackendStatus, Catalog, Decision, Plan, PlannedCall


async def resolve_ambiguity(llm: LLMClient, d: Decision, catalogs: Mapping[str, Catalog]) -> Decision:
    servers: dict[str, list[str]] = {}
    for c in d.candidates:
        if c.relevant:
            servers.setdefault(c.capability.backend, []).append(c.capability.name)
    described = [(b, catalogs[b].description if b in catalogs else "", tools) for b, tools in servers.items()]
    choice = await llm.choose_server(d.analysis.question, described)
    if choice.kind == "none":
        return dataclasses.replace(d, verdict="no_match", message=f"the model found nothing relevant: "
                                                                   f"{choice.reasoning}")
    if choice.kind == "ambiguous":
        return dataclasses.replace(d, message=choice.question or d.message)
    ordered = sorted(d.candidates, key=lambda c: c.capability.backend != choice.server)  # stable: its tools first
    return dataclasses.replace(d, candidates=tuple(ordered), verdict="route", kind="llm")


def needs_arguments(plan: Plan, request: QueryRequest) -> bool:
    """The plan was refused only for arguments the caller did not give: the model may fill them (not when
    the best match is a backend with nothing to call)."""
    return (isinstance(plan.refusal, ArgumentsRequired) and not isinstance(plan.refusal, BackendNotCallable)
            and request.arguments is None)


async def fill_arguments(llm: LLMClient, plan: Plan, d: Decision, request: QueryRequest,
                         statuses: Mapping[str, BackendStatus]) -> Plan:
    top = next(c for c in d.candidates if c.relevant or request.backend)
    args = await llm.fill_arguments(request.question, top.capability)
    invalid = schema_violation(top.capability, args)
    if invalid is not None:  # what the model filled is checked like any derived argument: no malformed call
        return Plan(calls=(), mode=plan.mode, refusal=invalid)
    first = PlannedCall(candidate=top, arguments=args, arguments_source="llm")
    rest, _ = planned_calls(d, request, statuses, skip=top)
    return Plan(calls=(first, *rest), mode=plan.mode)
