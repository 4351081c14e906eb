"""Issue 11 item 2: an ``mcp`` agent's selection of its upstream (``include_*``, ``exclude_*``, ``prefix``),
an upstream tool whose name is not valid, an upstream name that clashes with the agent's own, and OAuth
client credentials for an HTTP upstream.

The upstream (``tests/upstreams/mcp_selection_upstream.py``) pages its own lists (4 a page) and, with
``--oauth``, is its own token endpoint; ``hivegate serve`` federates it; the official MCP client calls
the gateway in both eras. Everything runs on 127.0.0.1.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from collections.abc import AsyncGenerator, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import IO, Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import PaginatedRequestParams, PromptReference, TextContent

from tests.e2e.registry_cli import create_user_with_key, run_cli
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

TIMEOUT = 60
START_SECONDS = 30.0
MODES = ["2026-07-28", "legacy"]
UPSTREAM = ROOT / "tests" / "upstreams" / "mcp_selection_upstream.py"
READY = "mcp-selection-upstream listening on "
CLIENT = "gw:s3cret"


@dataclass
class World:
    gateway: GatewayProcess
    alice: str
    plain: str  # the upstream's base URL
    guarded: str  # the upstream that wants OAuth tokens


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


@contextmanager
def _upstream(*args: str) -> Generator[str]:
    """Run the selection upstream; its base URL once it listens (a bounded wait); stopped afterwards."""
    process = subprocess.Popen(
        [sys.executable, str(UPSTREAM), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    pump = threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True)
    pump.start()
    try:
        seen: list[str] = []
        while True:
            line = lines.get(timeout=START_SECONDS)
            assert line is not None, "the upstream exited during start-up:\n" + "".join(seen)
            seen.append(line)
            if line.startswith(READY):
                break
        yield line.removeprefix(READY).strip()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        pump.join(timeout=10)
        process.stdout.close()


AGENTS = """
[[agents]]
id = "sel"
name = "Selected, prefixed"
owner = "alice"
page_size = 3

[agents.backend]
type = "mcp"
url = "{plain}/mcp"
prefix = "gh_"
include_tools = ["t00", "t01", "t02", "t03", "t04", "t05", "t06", "t07", "t08", "t09", "secret"]
exclude_tools = ["t03", "secret"]
exclude_prompts = ["hidden"]

[[agents.prompts]]
name = "mine"
messages = [{{ role = "user", text = "mine" }}]

[[agents]]
id = "raw"
name = "Everything the upstream has"
owner = "alice"
page_size = 5
backend = {{ type = "mcp", url = "{plain}/mcp" }}

[[agents.prompts]]
name = "hidden"
description = "own"
messages = [{{ role = "user", text = "the agent's own" }}]

[[agents]]
id = "oauth"
name = "An upstream that wants OAuth client credentials"
owner = "alice"
backend.type = "mcp"
backend.url = "{guarded}/mcp"
backend.oauth = {{ token_url = "{guarded}/token", client_id = "gw", client_secret_env = "SEL_UPSTREAM_SECRET" }}

[[agents]]
id = "oauth-wrong"
name = "The same upstream, a wrong secret"
owner = "alice"
backend.type = "mcp"
backend.url = "{guarded}/mcp"
backend.timeout_seconds = 5
backend.oauth = {{ token_url = "{guarded}/token", client_id = "gw", client_secret_env = "SEL_WRONG_SECRET" }}
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("mcp-selection")
    with _upstream() as plain, _upstream("--oauth", CLIENT) as guarded:
        url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
        config = folder / "agents.toml"
        config.write_text(AGENTS.format(plain=plain, guarded=guarded), encoding="utf-8")
        alice = create_user_with_key(url, "alice")
        run_cli(url, "agents", "apply", str(config))
        env = {"SEL_UPSTREAM_SECRET": "s3cret", "SEL_WRONG_SECRET": "nope"}
        with run_gateway(None, database_url=url, env=env) as gateway:
            yield World(gateway, alice, plain, guarded)


@asynccontextmanager
async def client_of(world: World, agent: str, mode: str) -> AsyncGenerator[McpClient]:
    url = f"{world.gateway.url}/{agent}/mcp"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {world.alice}"}, timeout=TIMEOUT) as http,
        McpClient(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client,
    ):
        yield client


async def _all(client: McpClient, method: str) -> tuple[list[Any], int]:
    """Every item of ``tools/list`` or ``prompts/list``, page by page; and the number of pages."""
    items: list[Any] = []
    cursor = None
    for pages in range(1, 100):
        params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
        if method == "tools/list":
            page: Any = await client.session.list_tools(params=params)
            items.extend(page.tools)
        else:
            page = await client.session.list_prompts(params=params)
            items.extend(page.prompts)
        cursor = page.next_cursor
        if not cursor:
            return items, pages
    raise AssertionError("the pages never ended")


def _text(result: Any) -> str:
    content = result.content[0] if hasattr(result, "content") else result.messages[0].content
    assert isinstance(content, TextContent)
    return content.text


@pytest.mark.parametrize("mode", MODES)
async def test_the_selection_and_prefix_are_what_the_agent_lists_page_by_page(world: World, mode: str) -> None:
    async with client_of(world, "sel", mode) as client:
        with anyio.fail_after(TIMEOUT):
            tools, pages = await _all(client, "tools/list")
            prompts, _ = await _all(client, "prompts/list")
    want = [f"gh_t0{i}" for i in range(10) if i != 3]
    assert [t.name for t in tools] == want  # the upstream's 4 pages, filtered, paged again by 3
    assert pages == 3
    assert [p.name for p in prompts] == ["mine"] + [f"gh_p{i}" for i in range(6)]


@pytest.mark.parametrize("mode", MODES)
async def test_a_prefixed_tool_prompt_and_completion_reach_the_upstream_under_its_own_name(
    world: World, mode: str
) -> None:
    async with client_of(world, "sel", mode) as client:
        with anyio.fail_after(TIMEOUT):
            await client.list_tools()
            assert _text(await client.call_tool("gh_t01", {})) == "called t01"
            assert _text(await client.get_prompt("gh_p2")) == "prompt p2"
            completed = await client.complete(PromptReference(name="gh_p2"), {"name": "topic", "value": "p2"})
    assert completed.completion.values == ["p2-a", "p2-b"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_name_the_agent_does_not_show_is_an_unknown_tool_or_prompt(world: World, mode: str) -> None:
    async with client_of(world, "sel", mode) as client:
        with anyio.fail_after(TIMEOUT):
            # unprefixed, excluded, not included, the upstream's name for an excluded one
            for name in ("t01", "gh_t03", "gh_t10", "gh_secret", "secret", "gh_bad name!"):
                with pytest.raises(MCPError) as refused:
                    await client.call_tool(name, {})
                assert (refused.value.code, refused.value.message) == (-32602, f"Unknown tool: {name}")
            for name in ("p1", "gh_hidden", "hidden"):
                with pytest.raises(MCPError) as unknown:
                    await client.get_prompt(name)
                assert (unknown.value.code, unknown.value.message) == (-32602, f"Unknown prompt: {name}")
            with pytest.raises(MCPError) as no_completion:
                await client.complete(PromptReference(name="gh_hidden"), {"name": "topic", "value": ""})
            assert no_completion.value.code == -32602


async def test_an_invalid_upstream_tool_name_is_left_out_and_the_others_kept(world: World) -> None:
    async with client_of(world, "raw", "2026-07-28") as client:
        with anyio.fail_after(TIMEOUT):
            tools, _ = await _all(client, "tools/list")
            with pytest.raises(MCPError) as refused:
                await client.call_tool("bad name!", {})
            assert refused.value.code == -32602
    assert [t.name for t in tools] == [f"t{i:02d}" for i in range(12)] + ["secret", "gh_native"]
    line = world.gateway.wait_for("not a valid MCP tool name")
    assert "agent raw" in line
    assert "'bad name!'" in line


async def test_an_upstream_prompt_named_like_the_agents_own_is_hidden_with_a_warning(world: World) -> None:
    async with client_of(world, "raw", "legacy") as client:
        with anyio.fail_after(TIMEOUT):
            prompts, _ = await _all(client, "prompts/list")
            own = await client.get_prompt("hidden")
    assert [p.name for p in prompts] == ["hidden"] + [f"p{i}" for i in range(6)]
    assert prompts[0].description == "own"
    assert _text(own) == "the agent's own"
    clash = world.gateway.wait_for("hidden behind the agent's own")
    assert "agent raw" in clash
    assert "'hidden'" in clash


async def _stats(base: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        response = await http.get(f"{base}/stats")
        return response.json()


async def _revoke(base: str) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        (await http.post(f"{base}/revoke")).raise_for_status()


async def test_oauth_client_credentials_reach_the_upstream_and_are_renewed_after_a_401(world: World) -> None:
    async with client_of(world, "oauth", "2026-07-28") as client:
        with anyio.fail_after(TIMEOUT):
            await client.list_tools()
            assert _text(await client.call_tool("t00", {})) == "called t00"
            first = await _stats(world.guarded)
            await _revoke(world.guarded)  # every token issued so far is now refused: 401
            assert _text(await client.call_tool("t01", {})) == "called t01"
            second = await _stats(world.guarded)
    assert first["token_requests"] == 1  # one token, kept for every request
    assert first["unauthorized"] == 0
    assert second["token_requests"] == 2  # renewed once after the 401
    assert second["unauthorized"] >= 1
    seen = set(second["authorizations"])
    assert all(given.startswith("Bearer tok-") for given in seen)  # never the caller's oag_ key
    assert not any(world.alice in given for given in seen)


async def test_a_refused_client_secret_is_agent_service_unavailable(world: World) -> None:
    async with client_of(world, "oauth-wrong", "2026-07-28") as client:
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as refused:
            await client.list_tools()
    assert refused.value.error.data == {"code": "agent_service_unavailable"}
    line = world.gateway.wait_for("refused the client credentials")
    assert "agent oauth-wrong" in line
