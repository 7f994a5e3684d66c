"""The official git MCP server (from PyPI, on stdio) behind the router, with the local model and no LLM: the
repository it works on is the operator's (`fixed_arguments`), whatever a caller gives, so questions that name no
repository are answered; a branch the question names is the one used."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from benchmarks.example_questions import connected_router
from router.core import Router
from router.errors import RouterError
from router.models import QueryRequest
from router.settings import RouterSettings
from tests.unit.router_world import query

pytestmark = pytest.mark.asyncio(loop_scope="module")


def repository(root: Path, file: str) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    (root / "README.md").write_text("hello\n")
    for args in (["add", "README.md"], ["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m",
                                        "first commit"]):
        subprocess.run(["git", "-C", str(root), *args], check=True)
    (root / file).write_text("not yet added\n")
    return root


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return (repository(tmp_path_factory.mktemp("served"), "only-in-served.txt"),
            repository(tmp_path_factory.mktemp("other"), "only-in-other.txt"))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def router(repos: tuple[Path, Path]) -> AsyncIterator[Router]:
    server = Path(sys.executable).parent / "mcp-server-git"
    assert server.is_file(), "mcp-server-git is a dev dependency (make setup)"
    served, _ = repos
    settings = RouterSettings.model_validate({"backends": [
        {"name": "git", "kind": "mcp_stdio", "command": str(server), "args": ["--repository", str(served)],
         "fixed_arguments": {"repo_path": str(served)}},
        {"name": "time", "kind": "mcp_stdio", "command": "mcp-server-time"}]})
    async with connected_router(settings) as r:
        yield r


async def test_a_question_that_names_no_repository_is_answered_on_the_operators(router: Router) -> None:
    # Every tool of the server requires `repo_path`: without the fixed value each of these was a 422.
    status = await query(router, QueryRequest(question="Show the git status"))
    assert (status.backend, status.capability) == ("git", "git_status") and "only-in-served.txt" in status.answer
    log = await query(router, QueryRequest(question="Show the git log"))
    assert log.capability == "git_log" and "first commit" in log.answer


async def test_a_callers_own_repository_is_replaced_by_the_operators(router: Router, repos: tuple[Path, Path]) -> None:
    _, other = repos
    # Asked of another repository, a tool that takes none would answer about the operator's: not called.
    with pytest.raises(RouterError) as info:
        await query(router, QueryRequest(question=f"Show the git status of {other}"))
    assert info.value.status_code == 404 and f"gives '{other}'" in info.value.message
    served, _ = repos  # the operator's own, written out, is no other
    named_so = await query(router, QueryRequest(question=f"Show the git status of {served}/"))
    assert named_so.capability == "git_status" and "only-in-served.txt" in named_so.answer
    named = await query(router, QueryRequest(question="status", backend="git", tool="git_status",
                                             arguments={"repo_path": str(other)}))
    assert "only-in-served.txt" in named.answer and "only-in-other.txt" not in named.answer


async def test_a_branch_called_by_its_name_is_created_and_one_described_is_not_guessed(
        router: Router, repos: tuple[Path, Path]) -> None:
    served, _ = repos

    def branches() -> list[str]:
        return subprocess.run(["git", "-C", str(served), "branch", "--format=%(refname:short)"], capture_output=True,
                              text=True, check=True).stdout.split()

    with pytest.raises(RouterError) as info:
        await query(router, QueryRequest(question="Create a new branch"))
    assert info.value.status_code in (404, 409, 422) and branches() == ["main"]
    created = await query(router, QueryRequest(question="Create a branch called feature-x"))
    assert created.capability == "git_create_branch"
    assert branches() == ["feature-x", "main"]


async def test_a_commit_is_made_with_the_message_the_question_gives(router: Router, repos: tuple[Path, Path]) -> None:
    # A 422 asking `git_commit` for `message`: "with message ..." gave none.
    served, _ = repos
    (served / "staged.txt").write_text("ready\n")

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(served), *args], capture_output=True, text=True, check=True).stdout

    git("add", "staged.txt")

    def last() -> str:
        return git("log", "-1", "--format=%s").strip()

    with pytest.raises(RouterError) as info:  # more asked after the message: which part is the message is unsaid
        await query(router, QueryRequest(question="Commit my changes with message fix typo and push them"))
    assert info.value.status_code in (404, 409, 422) and last() == "first commit"
    committed = await query(router, QueryRequest(question="Commit my changes with message fix typo"))
    assert committed.capability == "git_commit" and committed.routing is not None
    assert committed.routing.arguments == {"message": "fix typo"}  # the repository is added by its backend
    assert last() == "fix typo"


async def test_the_last_commit_is_shown_as_git_names_it(router: Router, repos: tuple[Path, Path]) -> None:
    # A 422 asking `git_show` for `revision`: "the last commit" is HEAD, and a hash written out is that commit.
    served, _ = repos

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(served), *args], capture_output=True, text=True, check=True).stdout

    shown = await query(router, QueryRequest(question="Show me the last commit"))
    assert shown.capability == "git_show" and shown.routing is not None
    assert shown.routing.arguments == {"revision": "HEAD"} and git("log", "-1", "--format=%s").strip() in shown.answer
    first = git("log", "--reverse", "--format=%H").split()[0]  # a short one may be all digits, which is no hash
    by_hash = await query(router, QueryRequest(question=f"Show commit {first}"))
    assert by_hash.capability == "git_show" and by_hash.routing is not None
    assert by_hash.routing.arguments == {"revision": first} and "first commit" in by_hash.answer


async def test_a_choice_a_description_quotes_is_taken_as_named(router: Router) -> None:
    # A 422 asking `git_branch` for `branch_type`, whose choices its description quotes instead of listing them in
    # an enum ("local branches ('local'), remote branches ('remote') or all branches ('all')").
    listed = await query(router, QueryRequest(question="List all branches"))
    assert listed.capability == "git_branch" and listed.routing is not None
    assert listed.routing.arguments == {"branch_type": "all"} and "main" in listed.answer
