"""Smart tool selection: thresholds, retrieval, the LLM path and its fallbacks, session reuse."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from router.errors import InvalidRequest, LLMNotConfigured
from router.llm.selection import ToolSelector
from router.llm.tool_loop import unique_tool_names
from router.retrieval.catalog import CatalogIndex, CatalogTexts
from router.settings import RoutingSettings, ToolSelectionSettings
from router.values import Capability, Catalog
from tests.unit.helpers import embed_texts, fake_embed

TOPICS = {
    "weather": ["forecast rain temperature", "weather alerts storms", "wind speed humidity"],
    "finance": ["stock price ticker", "company earnings report", "currency exchange rate"],
    "files": ["read file from disk", "write file to disk", "list directory contents"],
    "maps": ["geocode address", "route directions driving", "nearby places search"],
    "music": ["beat tracking audio", "tempo of a song", "chord detection"],
    "chess": ["best chess move", "analyse chess position", "chess opening name"],
}


def index(catalogs: list[Catalog]) -> CatalogIndex:
    texts = CatalogTexts.build(catalogs)
    return CatalogIndex(texts, embed_texts(texts.tool_dense), embed_texts(texts.server_dense), RoutingSettings())


def catalogs() -> list[Catalog]:
    out = []
    for server, descriptions in TOPICS.items():
        caps = tuple(Capability(backend=server, name=f"{server}_tool_{i}", description=d,
                                input_schema={"type": "object", "properties": {"q": {"type": "string"}}})
                     for i, d in enumerate(descriptions))
        out.append(Catalog(backend=server, version="1", description=f"{server} server", capabilities=caps))
    return out


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


SMALL = ToolSelectionSettings(min_tools=5, min_servers=3, max_tool_share=0.34)


async def test_below_the_thresholds_every_tool_is_returned() -> None:
    sel = await ToolSelector(ToolSelectionSettings(), fake_embed).select(index(catalogs()), user("rain tomorrow?"))
    assert sel.path == "below_threshold" and len(sel.tools) == 18 and sel.metrics["reduction_ratio"] == 0.0
    assert "18 tools, no more than tool_selection.min_tools (30)" in sel.reasoning  # the threshold that holds
    few_servers = ToolSelectionSettings(min_tools=5, min_servers=10)
    many_tools = await ToolSelector(few_servers, fake_embed).select(index(catalogs()), user("rain tomorrow?"))
    assert "servers, no more than tool_selection.min_servers (10)" in many_tools.reasoning


async def test_above_the_thresholds_retrieval_keeps_the_relevant_servers_tools() -> None:
    sel = await ToolSelector(SMALL, fake_embed).select(index(catalogs()), user("will it rain, what is the forecast"))
    assert sel.path == "retrieval" and sel.servers[0] == "weather"
    assert {t["function"]["name"] for t in sel.tools} >= {"weather__weather_tool_0", "weather__weather_tool_1"}
    assert sel.metrics["reduction_ratio"] >= 0.6
    assert sel.tools[0]["type"] == "function" and "parameters" in sel.tools[0]["function"]


def test_a_server_too_big_for_the_budget_is_passed_over_for_smaller_ones() -> None:
    tools = [Capability(backend=b, name=f"{b}_{i}") for b, n in (("a", 2), ("big", 6), ("c", 2), ("d", 2))
             for i in range(n)]
    selector = ToolSelector(ToolSelectionSettings(max_tool_share=0.5), fake_embed)  # 6 of 12 tools
    assert selector._budget(["a", "big", "c", "d"], tools, max_servers=10) == ["a", "c", "d"]
    assert selector._budget(["a", "big", "c", "d"], tools, max_servers=2) == ["a", "c"]
    assert selector._budget(["big", "a", "c"], tools, max_servers=10) == ["big"]  # the best one always


async def test_each_step_of_a_multi_step_request_gets_its_servers() -> None:
    sel = await ToolSelector(SMALL.model_copy(update={"max_tool_share": 0.5}), fake_embed).select(
        index(catalogs()), user("Find the stock price of ACME, then write file to disk with it"))
    assert {"finance", "files"} <= set(sel.servers)


class Chooser:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.seen: list[Any] = []

    async def select_servers(self, conversation: list[dict[str, Any]], candidates: list[Any]) -> tuple[list[str], str]:
        self.seen.append(candidates)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer, "because"


async def test_the_llm_chooses_among_retrievals_best_servers() -> None:
    chooser = Chooser(["maps", "weather"])
    sel = await ToolSelector(SMALL, fake_embed, chooser).select(index(catalogs()), user("rain on my route"))
    assert sel.path == "llm" and sel.servers == ["maps", "weather"] and sel.reasoning == "because"
    assert {c[0] for c in chooser.seen[0]} >= {"maps", "weather"}


@pytest.mark.parametrize("answer", [["atlantis"], LLMNotConfigured("no model")])
async def test_an_llm_failure_or_unknown_server_keeps_retrievals_choice(answer: Any) -> None:
    sel = await ToolSelector(SMALL, fake_embed, Chooser(answer)).select(index(catalogs()), user("forecast rain"))
    assert sel.path == "llm_fallback" and sel.servers[0] == "weather"


async def test_a_sessions_selection_is_reused_on_later_turns() -> None:
    selector = ToolSelector(SMALL, fake_embed)
    first = await selector.select(index(catalogs()), user("forecast rain"), session_id="s1")
    later = await selector.select(index(catalogs()), [
        *user("forecast rain"), {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "and chess moves?"}], session_id="s1")
    assert later.path == "session_cache" and later.servers == first.servers
    # A narrower view of the catalog (the caller's policy changed, a server left) selects again.
    narrower = await selector.select(index([c for c in catalogs() if c.backend != first.servers[0]]),
                                     user("forecast rain"), session_id="s1")
    assert narrower.path != "session_cache" and first.servers[0] not in narrower.servers
    # So does a request that allows fewer servers than the session's selection holds.
    await selector.select(index(catalogs()), user("forecast rain"), session_id="s2")
    fewer = await selector.select(index(catalogs()), user("forecast rain and chess"), session_id="s2", max_servers=1)
    assert fewer.path == "retrieval" and len(fewer.servers) == 1


async def test_the_llms_choice_is_held_to_the_servers_and_share_of_tools_retrieval_is() -> None:
    everything = Chooser(list(TOPICS))  # six servers, all eighteen tools
    sel = await ToolSelector(SMALL, fake_embed, everything).select(index(catalogs()), user("rain"), max_servers=1)
    assert sel.path == "llm" and len(sel.servers) == 1 and len(sel.tools) == 3
    capped = ToolSelector(SMALL.model_copy(update={"max_servers": 2, "max_tool_share": 1.0}), fake_embed)
    asked_more = await capped.select(index(catalogs()), user("rain and chess and maps"), max_servers=6)
    assert len(asked_more.servers) == 2  # a request may ask for fewer servers than configured, never more


async def test_a_cached_selection_is_made_again_when_a_tool_it_offers_changed() -> None:
    selector = ToolSelector(SMALL, fake_embed)
    first = await selector.select(index(catalogs()), user("forecast rain"), session_id="s1")
    changed = [Catalog(backend=c.backend, version="2", description=c.description,
                       capabilities=tuple(replace(t, read_only=True) for t in c.capabilities)) for c in catalogs()]
    later = await selector.select(index(changed), user("forecast rain"), session_id="s1")
    assert later.path == "retrieval" and later.servers == first.servers
    assert all(c.read_only for c in later.name_map.values())  # the tools as the catalog has them now
    again = await selector.select(index(changed), user("forecast rain"), session_id="s1")
    assert again.path == "session_cache" and again.tools == later.tools


async def test_one_callers_many_sessions_push_out_only_its_own() -> None:
    selector = ToolSelector(SMALL.model_copy(update={"session_cache_size": 2}), fake_embed)
    await selector.select(index(catalogs()), user("forecast rain"), session_id="bob/s1", owner="bob")
    for i in range(5):
        await selector.select(index(catalogs()), user("chess"), session_id=f"mallory/s{i}", owner="mallory")
    kept = await selector.select(index(catalogs()), user("forecast rain"), session_id="bob/s1", owner="bob")
    assert kept.path == "session_cache"


async def test_a_backend_known_only_by_its_description_is_no_tool_to_offer() -> None:
    described = Catalog(backend="ops", version="1", description="Operations agent for databases", capabilities=())
    sel = await ToolSelector(ToolSelectionSettings(), fake_embed).select(index([*catalogs(), described]),
                                                                         user("restart the database"))
    assert "ops" not in sel.servers and all(not c.server_level for c in sel.name_map.values())


async def test_only_the_text_of_a_message_is_ranked() -> None:
    """An image part is neither embedded nor split into steps (its data is no question)."""
    seen: list[str] = []

    async def embed(texts: list[str]) -> Any:
        seen.extend(texts)
        return await fake_embed(texts)

    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 5000}}
    content = [{"type": "text", "text": "will it rain? then the best chess move"}, image]
    await ToolSelector(SMALL, embed).select(index(catalogs()), [{"role": "user", "content": content}])
    assert seen and all("base64" not in t and "image_url" not in t for t in seen)


async def test_a_conversation_without_user_text_is_rejected() -> None:
    with pytest.raises(InvalidRequest, match="no user message"):
        await ToolSelector(SMALL, fake_embed).select(index(catalogs()), [{"role": "system", "content": "x"}])


def test_tool_names_are_unique_valid_and_map_back() -> None:
    caps = [Capability(backend="a b", name="read.file"), Capability(backend="a_b", name="read_file"),
            Capability(backend="x" * 40, name="y" * 40)]
    names = unique_tool_names(caps)
    assert len(names) == 3 and all(len(n) <= 64 for n in names)
    assert all(n.replace("_", "").replace("-", "").isalnum() for n in names)
    assert list(names.values()) == caps


def test_thousands_of_names_sharing_their_first_64_characters_are_made_unique_in_linear_time() -> None:
    same_start = [Capability(backend="b", name="t" * 70 + str(i)) for i in range(3000)]
    # Different names, the same once a suffix replaces their last characters.
    same_stem = [Capability(backend="b", name="t" * 58 + f"{i:02d}" + xy) for i in range(2000) for xy in "XY"]
    for caps in (same_start, same_stem):
        started = time.perf_counter()
        names = unique_tool_names(caps)
        assert time.perf_counter() - started < 0.1  # each name no longer tries every suffix before it
        assert len(names) == len(caps) and all(len(n) <= 64 for n in names)


@pytest.mark.parametrize("kind", ["flow", "prompt"])
async def test_a_server_with_no_tool_to_offer_takes_no_place_among_the_servers(kind: str) -> None:
    # it was ranked first and took the only place: an empty tool set for a question the weather server answers
    forecasts = Catalog(backend="forecast-flow", version="1", description="forecast rain weather flow",
                        capabilities=(Capability(backend="forecast-flow", name="forecast", kind=kind,
                                                 description="forecast rain temperature weather alerts"),))
    sel = await ToolSelector(SMALL, fake_embed).select(index([*catalogs(), forecasts]),
                                                       user("forecast rain weather alerts"), max_servers=1)
    assert sel.servers == ["weather"] and len(sel.name_map) == 3
