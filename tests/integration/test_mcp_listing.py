"""Listing a real MCP server's catalog over stdio (no Ray): every page of its tools, prompts and resources."""

from __future__ import annotations

import sys

from actors.backends import build_backend
from router.settings import McpStdioSpec
from router.values import CallContext
from tests.conftest import TEST_SERVERS


async def test_every_page_of_tools_prompts_and_resources_is_listed_and_a_resource_on_the_last_one_is_read() -> None:
    backend = build_backend(McpStdioSpec(name="paged", command=sys.executable, args=[str(TEST_SERVERS / "paged.py")]))
    await backend.connect()
    try:
        catalog = await backend.list_capabilities()
        by_kind = {kind: [c.name for c in catalog.capabilities if c.kind == kind]
                   for kind in ("tool", "prompt", "resource")}
        assert by_kind == {"tool": [f"tool_{i}" for i in range(5)], "prompt": [f"prompt_{i}" for i in range(3)],
                           "resource": [f"doc_{i}" for i in range(5)]}
        last = next(c for c in catalog.capabilities if c.name == "doc_4")
        outcome = await backend.call(last, {}, timeout_s=10, context=CallContext(question="doc 4", intent="general"))
        assert outcome.ok and outcome.text == "read paged://doc/4"
    finally:
        await backend.shutdown()
