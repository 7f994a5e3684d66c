"""The official filesystem MCP server (from npm, on stdio) behind the router, with the local model and no LLM: a
question that names a file or folder is answered by the tool that takes a path, and a request to change files
is still not acted on a guess."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from benchmarks.example_questions import connected_router
from router.core import Router
from router.errors import RouterError
from router.models import QueryRequest
from router.settings import RouterSettings
from tests.conftest import EXAMPLES
from tests.unit.router_world import query

pytestmark = pytest.mark.asyncio(loop_scope="module")
SERVER = EXAMPLES / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("files")
    (root / "notes.txt").write_text("buy milk\n")
    (root / "later.txt").write_text("buy bread\n")
    (root / "plans").mkdir()
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def router(folder: Path) -> AsyncIterator[Router]:
    if not SERVER.is_file():
        pytest.skip("the filesystem server is not installed (make setup)")
    settings = RouterSettings.model_validate({"backends": [
        {"name": "filesystem", "kind": "mcp_stdio", "command": "node", "args": [str(SERVER), str(folder)]},
        {"name": "time", "kind": "mcp_stdio", "command": "mcp-server-time"}]})
    async with connected_router(settings) as r:
        yield r


async def test_a_file_the_question_names_is_read_and_a_folder_listed(router: Router, folder: Path) -> None:
    # Both were a 422 asking for `path`: no path was taken from a question.
    read = await query(router, QueryRequest(question=f"Read {folder}/notes.txt"))
    assert read.backend == "filesystem" and read.capability in ("read_file", "read_text_file")
    assert "buy milk" in read.answer and read.routing is not None and read.routing.arguments_source
    listed = await query(router, QueryRequest(question=f"List the files in {folder}"))
    assert listed.capability == "list_directory" and "notes.txt" in listed.answer and "plans" in listed.answer


async def test_the_files_a_question_names_are_read_together(router: Router, folder: Path) -> None:
    # A 422 asking `read_multiple_files` for `paths`: no array of paths was taken from a question.
    both = await query(router, QueryRequest(question=f"Compare {folder}/notes.txt and {folder}/later.txt"))
    assert both.capability == "read_multiple_files" and both.routing is not None
    assert both.routing.arguments == {"paths": [f"{folder}/notes.txt", f"{folder}/later.txt"]}
    assert "buy milk" in both.answer and "buy bread" in both.answer


@pytest.mark.parametrize("question", ["Copy {f}/notes.txt to {f}/plans/notes.txt",
                                      "Rename {f}/notes.txt to {f}/todo.txt"])
async def test_a_request_to_move_files_is_not_acted_on_a_guess(router: Router, folder: Path, question: str) -> None:
    # move_file takes both paths, but copying is no move, and a rename is not clearly meant enough to act on.
    with pytest.raises(RouterError) as info:
        await query(router, QueryRequest(question=question.format(f=folder)))
    assert info.value.status_code in (404, 409, 422)
    assert (folder / "notes.txt").read_text() == "buy milk\n" and not (folder / "plans" / "notes.txt").exists()


async def test_the_biggest_file_of_a_folder_is_found_in_its_listing_by_size(router: Router, folder: Path) -> None:
    # The folder's own information answered this (its size, not its files'): "the biggest" names an order, which
    # the listing with sizes takes.
    listed = await query(router, QueryRequest(question=f"What is the biggest file in {folder}?"))
    assert listed.capability == "list_directory_with_sizes" and listed.routing is not None
    assert listed.routing.arguments == {"path": str(folder), "sortBy": "size"}
    assert listed.answer.index("later.txt") < listed.answer.index("notes.txt")  # "buy bread" is the longer
