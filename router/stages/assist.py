"""The optional LLM steps, each wrapping a stage: they take its frozen output and return a new one.

- after decide, a verdict retrieval could not settle (too close to call, which of a backend's tools
  is unclear, or nothing likely enough): among the closest candidates the model picks a server and,
  when it says, its tool (they go first and may be called), says nothing fits (`no_match`), or asks
  the caller which one was meant (the message);
- after plan, a best match whose required arguments the question does not give: the model fills
  them from the question against the tool's schema (and what it fills is validated against that
  schema like any derived argument), and the other callable candidates follow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from router.errors import ArgumentsRequired, BackendNotCallable
from router.llm.client import LLMClient
from router.request import Request
from router.schemas import schema_violation
from router.settings import RoutingSettings
from router.stages.plan import planned_calls
from router.stages.scoring import may_act
from router.stages.serving import MODEL_CHOICE, Arguments
from router.values import BackendStatus, Candidate, Catalog, Decision, Plan, PlannedCall


def needs_choice(d: Decision) -> bool:
    """Retrieval left the choice open: too close to call, or nothing likely enough but something close."""
    return d.kind != "override" and bool(d.candidates) and d.verdict in ("ambiguous", "no_match")


async def choose(llm: LLMClient, d: Decision, catalogs: Mapping[str, Catalog], routing: RoutingSettings) -> Decision:
    """The model's choice among the candidates in contention (when none is, the closest ones). What it
    chooses becomes callable whatever its confidence: the model read the question, which retrieval
    could only score. A server chosen without a tool leaves the tool to retrieval: its best tool, when
    unclear or when it may act and is not likely enough to be meant, stays a question of which tool (409)."""
    contending = [c for c in d.candidates if c.contending] or list(d.candidates)
    servers: dict[str, list[str]] = {}
    for c in contending:
        servers.setdefault(c.capability.backend, []).append(c.capability.name)
    described = [(b, catalogs[b].description if b in catalogs else "", tools) for b, tools in servers.items()]
    choice = await llm.choose_server(d.analysis.question, described)
    if choice.kind == "none":
        return dataclasses.replace(d, verdict="no_match", message=f"the model found nothing relevant: "
                                                                   f"{choice.reasoning}")
    if choice.kind == "ambiguous":
        return dataclasses.replace(d, message=choice.question or d.message)

    def chosen(c: Candidate) -> bool:
        return c.capability.backend == choice.server and choice.tool in (None, c.capability.name)

    def settled(c: Candidate) -> bool:
        """The model named its tool, or retrieval is clear enough which tool of the chosen server it is."""
        tp = c.scores.tool_confidence
        return choice.tool is not None or (tp >= routing.min_tool_confidence and not (
            may_act(c.capability) and tp < routing.min_action_confidence))

    ordered = sorted(d.candidates, key=lambda c: not chosen(c))  # stable: the chosen ones first, best first
    if not settled(ordered[0]):
        marked = [dataclasses.replace(c, relevant=False, unclear_tool=True, unsure_action=False) if chosen(c) else c
                  for c in ordered]
        return dataclasses.replace(d, candidates=tuple(marked), verdict="ambiguous", kind="llm", message=(
            f"the model chose backend {choice.server!r} but not one of its tools ({choice.reasoning}); name the tool"))
    marked = [dataclasses.replace(c, relevant=True, unclear_tool=False, unsure_action=False, placed=MODEL_CHOICE)
              if chosen(c) and settled(c) and c in contending else c for c in ordered]
    return dataclasses.replace(d, candidates=tuple(marked), verdict="route", kind="llm",
                               message=f"the model chose {choice.server}" + (f"/{choice.tool}" if choice.tool else "")
                               + f": {choice.reasoning}")


def needs_arguments(plan: Plan, request: Request) -> bool:
    """The plan was refused only for arguments the caller did not give: the model may fill them (not when
    the best match is a backend with nothing to call)."""
    return (isinstance(plan.refusal, ArgumentsRequired) and not isinstance(plan.refusal, BackendNotCallable)
            and request.arguments is None)


async def fill_arguments(llm: LLMClient, plan: Plan, d: Decision, arguments: Arguments,
                         statuses: Mapping[str, BackendStatus]) -> Plan:
    request = arguments.request
    # The one the plan would have called: up (unless none is), able to take the question's values.
    asked = plan.refusal.details if plan.refusal is not None else {}
    top = next((c for c in d.candidates if (c.capability.backend, c.capability.name) ==
                (asked.get("backend"), asked.get("tool"))), None)
    if top is None:
        return plan
    args = await llm.fill_arguments(request.question, top.capability)
    invalid = schema_violation(top.capability, args)
    if invalid is not None:  # what the model filled is checked like any derived argument: no malformed call
        return Plan(calls=(), mode=plan.mode, refusal=invalid)
    status = statuses.get(top.capability.backend)
    first = PlannedCall(candidate=top, arguments=args, arguments_source="llm",
                        force=status is not None and not status.available_to(request.principal))
    rest, _ = planned_calls(d, arguments, statuses, skip=top)
    return Plan(calls=(first, *rest), mode=plan.mode)
