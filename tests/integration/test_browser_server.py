"""Microsoft's Playwright MCP server (from npm, on stdio) driving Debian's Chromium behind the router, with the local
model and no LLM, on a page served on 127.0.0.1: what a user asks of a browser in plain words is answered with the
arguments the server needs, and a request to act on the page is not acted on a guess."""

from __future__ import annotations

import functools
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
import pytest_asyncio

from benchmarks.browser_servers import PLAYWRIGHT
from benchmarks.example_questions import connected_router
from router.core import Router
from router.errors import RouterError
from router.models import QueryRequest
from router.settings import RouterSettings
from tests.unit.router_world import query

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
CHROMIUM = shutil.which("chromium")
PAGE = """<html><head><title>Router check</title></head>
<body><h1>Pricing</h1><button>Log in</button><script>console.log("hello from the page")</script></body></html>"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("site")
    (root / "page.html").write_text(PAGE)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SimpleHTTPRequestHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/page.html"
    server.shutdown()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def router(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Router]:
    if not PLAYWRIGHT.is_file():
        pytest.skip("the Playwright server is not installed (make setup)")
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed: `apt-get install chromium` (make setup does it where it can)")
    out = tmp_path_factory.mktemp("browser-output")
    settings = RouterSettings.model_validate({"backends": [{
        "name": "playwright", "kind": "mcp_stdio", "command": "node",
        "args": [str(PLAYWRIGHT), "--headless", "--browser", "chromium", "--executable-path", CHROMIUM,
                 "--no-sandbox", "--output-dir", str(out)]}]})
    async with connected_router(settings) as r:
        # Navigating may change something (the server says so): the caller names the tool and its URL.
        opened = await query(r, QueryRequest(question="Open the page", backend="playwright", tool="browser_navigate",
                                             arguments={"url": site}))
        assert "Router check" in opened.answer
        yield r


async def test_a_required_parameter_with_a_default_is_sent_its_default(router: Router) -> None:
    # The server lists `scale` and `level` as required (zod 4 does so for every default): both were a 422.
    shot = await query(router, QueryRequest(question="Take a screenshot"))
    assert shot.capability == "browser_take_screenshot" and shot.routing is not None
    assert shot.routing.arguments == {"scale": "css"} and ".png" in shot.answer
    console = await query(router, QueryRequest(question="Show the console messages"))
    assert console.capability == "browser_console_messages" and "hello from the page" in console.answer


async def test_a_number_of_seconds_is_waited_not_looked_for_as_text(router: Router) -> None:
    # It waited 5 s for the text "Wait 1 second" to appear, and failed.
    waited = await query(router, QueryRequest(question="Wait 1 second"))
    assert waited.capability == "browser_wait_for" and waited.routing is not None
    assert waited.routing.arguments == {"time": 1} and "Waited for 1" in waited.answer


async def test_a_key_is_pressed_by_its_name(router: Router) -> None:
    # "Press Enter" was a 422 asking for `key`.
    pressed = await query(router, QueryRequest(question="Press the Escape key"))
    assert pressed.capability == "browser_press_key" and pressed.routing is not None
    assert pressed.routing.arguments == {"key": "Escape"} and "keyboard.press('Escape')" in pressed.answer


async def test_a_size_written_with_an_x_is_the_windows_width_and_height(router: Router) -> None:
    # "Resize the window to 800x600" was a 422 asking for `width`.
    resized = await query(router, QueryRequest(question="Resize the window to 800x600"))
    assert resized.capability == "browser_resize" and resized.routing is not None
    assert resized.routing.arguments == {"width": 800, "height": 600} and "width: 800, height: 600" in resized.answer


async def test_a_click_is_not_made_on_a_guess(router: Router) -> None:
    with pytest.raises(RouterError) as info:
        await query(router, QueryRequest(question="Click the login button"))
    assert info.value.status_code == 409 and "browser_click" in info.value.message


async def test_the_tabs_are_listed_by_the_tool_that_also_opens_and_closes_them(router: Router) -> None:
    # `browser_tabs` lists, opens, closes and selects tabs: the question's action is the one it is called with. (Beside
    # other servers, where it is less likely to be meant, listing is answered on a reader's bars: test_plan_guards.)
    listed = await query(router, QueryRequest(question="List the open tabs"))
    assert listed.capability == "browser_tabs" and listed.routing is not None
    assert listed.routing.arguments == {"action": "list"} and "Router check" in listed.answer


async def test_a_page_is_opened_at_the_address_the_question_gives(router: Router, site: str) -> None:
    # Asked in words alone, the server navigates to the address, taken whole for `url` (how an address is read
    # for retrieval, as its site: test_routing_with_real_model).
    opened = await query(router, QueryRequest(question=f"Navigate to {site}"))
    assert opened.capability == "browser_navigate" and opened.routing is not None
    assert opened.routing.arguments == {"url": site} and "Router check" in opened.answer
