"""The LLM steps around planning: what a model fills is validated, and a backend with nothing to call is
never handed to it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from router.errors import ArgumentsInvalid, BackendNotCallable, DeadlineExceeded
from router.request import Request
from router.stages import assist
from router.stages.plan import plan
from router.stages.serving import Arguments
from router.values import Capability
from tests.unit.test_descriptions_only import AGENTS, described, router_for

VOLUME = Capability(backend="speaker", name="set_volume", description="Set the speaker volume level.",
                    input_schema={"type": "object", "required": ["level"],
                                  "properties": {"level": {"type": "integer", "minimum": 0, "maximum": 100}}})


class FillingModel:
    """Stands in for the LLM client: fills arguments with what the test says."""

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args
        self.asked: list[str] = []

    async def fill_arguments(self, question: str, capability: Capability) -> dict[str, Any]:
        self.asked.append(capability.name)
        return self.args


async def planned(question: str) -> tuple[Any, Any, Arguments]:
    from tests.unit.helpers import catalog

    router, _ = router_for([catalog("speaker", "Speaker control: volume and playback.", VOLUME)])
    request = Request(question=question)
    decision = await router.decide(request)
    return router, decision, Arguments(request)


async def test_arguments_a_model_fills_that_break_the_schema_are_refused_naming_the_field() -> None:
    router, d, arguments = await planned("turn the speaker volume up a lot")
    p = plan(d, arguments, {}, router.settings)
    assert assist.needs_arguments(p, arguments.request)
    model = FillingModel({"level": 400})
    filled = await assist.fill_arguments(model, p, d, arguments, {})  # type: ignore[arg-type]
    assert model.asked == ["set_volume"]
    assert isinstance(filled.refusal, ArgumentsInvalid) and filled.refusal.details["field"] == "level"
    assert filled.calls == ()
    fits = await assist.fill_arguments(FillingModel({"level": 80}), p, d, arguments, {})  # type: ignore[arg-type]
    assert fits.refusal is None and fits.calls[0].arguments == {"level": 80}


async def test_a_backend_with_nothing_to_call_is_not_handed_to_the_model_for_arguments() -> None:
    router, _ = router_for([described("weather-agent", AGENTS["weather-agent"])])
    request = Request(question="will it rain in Paris tomorrow")
    p = plan(await router.decide(request), Arguments(request), {}, router.settings)
    assert isinstance(p.refusal, BackendNotCallable)
    assert not assist.needs_arguments(p, request)


async def test_the_model_is_asked_within_the_requests_deadline() -> None:
    class SlowModel(FillingModel):
        async def fill_arguments(self, question: str, capability: Capability) -> dict[str, Any]:
            await asyncio.sleep(5)  # the model's own timeout and retries can take far longer
            return await super().fill_arguments(question, capability)

    router, _, _ = await planned("turn the speaker volume up a lot")
    router.llm = SlowModel({"level": 80})  # type: ignore[assignment]
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"deadline of 0\.3 s passed while the LLM was asked"):
        await router.query(Request(question="turn the speaker volume up a lot", deadline_s=0.3))
    assert time.monotonic() - started < 2


async def test_the_model_fills_the_arguments_of_the_tool_the_plan_would_call() -> None:
    from dataclasses import replace

    from router.values import BackendStatus
    from tests.unit.helpers import catalog

    about = "Speaker control: volume and playback."
    spare = replace(VOLUME, backend="spare")
    router, _ = router_for([catalog("speaker", about, VOLUME), catalog("spare", about, spare)])
    request = Request(question="turn the speaker volume up a lot")
    d = await router.decide(request)
    arguments = Arguments(request)
    first = next(c for c in d.candidates if c.relevant).capability.backend
    other = "spare" if first == "speaker" else "speaker"
    down = {first: BackendStatus(name=first, kind="mcp_http", transport="streamable-http", health="down")}
    p = plan(d, arguments, down, router.settings)
    assert p.refusal is not None and p.refusal.details["tool"] == "set_volume"
    filled = await assist.fill_arguments(FillingModel({"level": 80}), p, d, arguments, down)  # type: ignore[arg-type]
    assert [(c.backend, c.force) for c in filled.calls][:1] == [(other, False)]  # the one up, not the closest
