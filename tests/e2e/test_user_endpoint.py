"""The user-level endpoint ``/mcp`` against a real server: one tool per agent the caller may use.

Three agents: ``alice-echo`` (alice, MCP on), ``alice-quiet`` (alice, MCP off) and ``bob-echo``
(bob). Users and keys are made with the CLI. The official MCP client is driven on both eras
(a handshake-era session and the 2026-07-28 revision); raw httpx checks the challenges and the
binding of a handshake-era session to the user who opened it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.subscriptions import ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference, Resource, TextContent, TextResourceContents, ToolListChangedNotification

from tests.e2e.registry_cli import cli_at_once, first_line
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

AGENTS = """
[[agents]]
id = "alice-echo"
name = "Alice's echo"
description = "Echoes what Alice says."
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents.prompts]]
name = "greet"
description = "Greet someone."
arguments = [{ name = "who", required = true, completions = ["world", "wonderland", "bob"] }]
messages = [{ role = "user", text = "Say hello to {who}." }]

[[agents.resources]]
uri = "memo://alice/today?lang=en&tag=a b"
name = "today"
mime_type = "text/plain"
text = "Buy milk."

[[agents]]
id = "alice-quiet"
name = "Alice's quiet agent"
owner = "alice"
mcp_enabled = false
backend = { type = "python", callable = "echo_agent:reply" }

[[agents.prompts]]
name = "secret"
messages = [{ role = "user", text = "hidden" }]

[[agents]]
id = "bob-echo"
name = "Bob's echo"
owner = "bob"
backend = { type = "python", callable = "echo_agent:reply" }
"""
MODES = ["legacy", "2026-07-28"]
EXPECTED_VERSION = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
TODAY_URI = "memo://alice/today?lang=en&tag=a b"
WRAPPED_TODAY = "hivegate://agents/alice-echo/resource?uri=" + quote(TODAY_URI, safe="")
EXAMPLES = (str(ROOT / "examples"),)
CALL_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class World:
    gateway: GatewayProcess
    database_url: str
    alice: str
    alice_other: str
    """A second oag_ key of alice's."""
    bob: str
    alice_agent_key: str
    """A bak_ key bound to alice-echo."""

    @property
    def url(self) -> str:
        return f"{self.gateway.url}/mcp"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("user-endpoint")
    config = folder / "agents.toml"
    config.write_text(AGENTS, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    cli_at_once(
        database_url, (("users", "create", "alice", "--password-stdin"), "alice's password\n"), pythonpath=EXAMPLES
    )
    _, alice, alice_other, _ = cli_at_once(
        database_url,
        (("users", "create", "bob", "--password-stdin"), "bob's password\n"),
        (("keys", "create", "--user", "alice"), ""),
        (("keys", "create", "--user", "alice", "--name", "second"), ""),
        (("agents", "apply", str(config)), ""),
        pythonpath=EXAMPLES,
    )
    bob, agent_key = cli_at_once(
        database_url,
        (("keys", "create", "--user", "bob"), ""),
        (("keys", "create", "--user", "alice", "--agent", "alice-echo"), ""),
        pythonpath=EXAMPLES,
    )
    env = {
        "PYTHONPATH": str(ROOT / "examples"),
        "HIVEGATE_DATABASE__POLL_INTERVAL_SECONDS": "0.1",
        "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": "0",
        "HIVEGATE_MCP__DEFAULT_PAGE_SIZE": "2",
    }
    with run_gateway(config, database_url=database_url, env=env) as gateway:
        yield World(
            gateway, database_url, first_line(alice), first_line(alice_other), first_line(bob), first_line(agent_key)
        )


@asynccontextmanager
async def _client(url: str, key: str, mode: str, **options: Any) -> AsyncGenerator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=CALL_TIMEOUT_SECONDS) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client,  # type: ignore[arg-type]
    ):
        yield client


async def _tool_names(client: Client) -> list[str]:
    """Every tool's name, all pages (``discover_agents`` comes first; the page size here is 2)."""
    page = await client.list_tools()
    names = [t.name for t in page.tools]
    for _ in range(10):
        if page.next_cursor is None:
            break
        page = await client.list_tools(cursor=page.next_cursor)
        names += [t.name for t in page.tools]
    return names


async def _all_resources(client: Client) -> list[Resource]:
    page = await client.list_resources()
    resources = list(page.resources)
    while page.next_cursor is not None:
        page = await client.list_resources(cursor=page.next_cursor)
        resources.extend(page.resources)
    return resources


def _text(content: Any) -> str:
    assert isinstance(content, TextContent)
    return content.text


# -- the gate --------------------------------------------------------------------------------


def test_no_credential_is_401_with_the_endpoint_metadata(world: World) -> None:
    for method in ("POST", "GET"):
        response = httpx.request(method, world.url, json=INITIALIZE, headers=HEADERS, timeout=10)
        assert response.status_code == 401
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        assert f'resource_metadata="{world.gateway.url}/.well-known/oauth-protected-resource/mcp"' in challenge
        assert 'scope="mcp"' in challenge  # Issue 7 item 11: clients take the scope to ask for from here
        assert response.json()["error"]["data"]["code"] == "unauthorized"


def test_unknown_key_is_401_invalid_token(world: World) -> None:
    bogus = "oag_" + "0" * 64
    response = httpx.post(world.url, json=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {bogus}"})
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_agent_key_is_403(world: World) -> None:
    headers = {**HEADERS, "Authorization": f"Bearer {world.alice_agent_key}"}
    response = httpx.post(world.url, json=INITIALIZE, headers=headers, timeout=10)
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert f'resource_metadata="{world.gateway.url}/.well-known/oauth-protected-resource/mcp"' in challenge
    # The same key still opens its agent's own endpoint.
    own = httpx.post(f"{world.gateway.url}/alice-echo/mcp", json=INITIALIZE, headers=headers, timeout=10)
    assert own.status_code == 200


# -- tools -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_alice_sees_and_calls_only_her_enabled_agent(world: World, mode: str) -> None:
    deltas: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        deltas.append(message)

    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with _client(world.url, world.alice, mode) as client:
            assert client.protocol_version == EXPECTED_VERSION[mode]
            if mode == "legacy":
                assert client.server_info is not None
                assert client.server_info.name == "hivegate"
            tools = await client.list_tools()
            assert [t.name for t in tools.tools] == ["discover_agents", "alice-echo"]
            if mode != "legacy":
                assert (tools.ttl_ms, tools.cache_scope) == (0, "private")
            result = await client.call_tool("alice-echo", {"message": "hello from the top"})
            assert not result.is_error
            assert _text(result.content[0]) == "hello from the top"
            streamed = await client.call_tool("alice-echo", {"message": "one two three"}, progress_callback=on_progress)
            assert _text(streamed.content[0]) == "one two three"
            invalid = await client.call_tool("alice-echo", {})
            assert invalid.is_error  # as on the agent's own endpoint: argument errors are tool results
        async with _client(f"{world.gateway.url}/alice-echo/mcp", world.alice, mode) as own:
            own_tools = await own.list_tools()
    assert deltas == ["one ", "two ", "three"]
    # Exactly the message tool the agent's own endpoint lists.
    assert tools.tools[1] == next(t for t in own_tools.tools if t.name == "alice-echo")


@pytest.mark.parametrize("mode", MODES)
async def test_bob_sees_only_his_agent_and_cannot_call_alices(world: World, mode: str) -> None:
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with _client(world.url, world.bob, mode) as client:
            assert await _tool_names(client) == ["discover_agents", "bob-echo"]
            assert _text((await client.call_tool("bob-echo", {"message": "hi"})).content[0]) == "hi"
            for name in ("alice-echo", "alice-quiet", "nobody"):
                with pytest.raises(MCPError) as refused:
                    await client.call_tool(name, {"message": "hi"})
                assert refused.value.code == -32602
                assert refused.value.message == f"Unknown tool: {name}"
            assert [r.name for r in await _all_resources(client)] == [
                "bob-echo.agent-config",
                "bob-echo.agent-skills",
            ]
            assert (await client.list_prompts()).prompts == []
            with pytest.raises(MCPError) as hidden:
                await client.read_resource(WRAPPED_TODAY)
            assert hidden.value.code == (-32002 if mode == "legacy" else -32602)
            with pytest.raises(MCPError) as hidden_prompt:
                await client.get_prompt("alice-echo.greet", {"who": "x"})
            assert hidden_prompt.value.code == -32602


# -- resources and prompts -------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_resources_and_prompts_are_prefixed_and_served(world: World, mode: str) -> None:
    legacy = mode == "legacy"
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with _client(world.url, world.alice, mode) as client:
            resources = await _all_resources(client)
            assert [(r.name, r.uri) for r in resources] == [
                (
                    "alice-echo.agent-config",
                    "hivegate://agents/alice-echo/resource?uri=hivegate%3A%2F%2Fagent%2Fconfig",
                ),
                (
                    "alice-echo.agent-skills",
                    "hivegate://agents/alice-echo/resource?uri=hivegate%3A%2F%2Fagent%2Fskills",
                ),
                ("alice-echo.today", WRAPPED_TODAY),
            ]
            read = await client.read_resource(WRAPPED_TODAY)
            first = read.contents[0]
            assert isinstance(first, TextResourceContents)
            assert (first.uri, first.text, first.mime_type) == (WRAPPED_TODAY, "Buy milk.", "text/plain")
            config = await client.read_resource(resources[0].uri)
            assert '"id": "alice-echo"' in config.contents[0].text  # type: ignore[union-attr]
            assert (await client.list_resource_templates()).resource_templates == []

            missing = "hivegate://agents/alice-echo/resource?uri=" + quote("memo://alice/none", safe="")
            for uri in (missing, "hivegate://agents/alice-quiet/resource?uri=x", "memo://alice/today"):
                with pytest.raises(MCPError) as not_found:
                    await client.read_resource(uri)
                assert not_found.value.code == (-32002 if legacy else -32602)
                assert not_found.value.data == {"uri": uri}

            prompts = (await client.list_prompts()).prompts
            assert [p.name for p in prompts] == ["alice-echo.greet"]
            prompt = await client.get_prompt("alice-echo.greet", {"who": "world"})
            assert _text(prompt.messages[0].content) == "Say hello to world."
            with pytest.raises(MCPError) as missing_argument:
                await client.get_prompt("alice-echo.greet", {})
            assert missing_argument.value.code == -32602
            for name in ("alice-echo.nope", "alice-quiet.secret", "greet"):
                with pytest.raises(MCPError) as unknown:
                    await client.get_prompt(name, {})
                assert unknown.value.code == -32602
                assert unknown.value.data == {"name": name}
            completion = await client.complete(
                PromptReference(type="ref/prompt", name="alice-echo.greet"), {"name": "who", "value": "w"}
            )
            assert completion.completion.values == ["world", "wonderland"]


async def test_lists_are_paginated_with_cursors_bound_to_the_user(world: World) -> None:
    """``mcp.default_page_size`` is 2 here: alice's three resources take two pages."""
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with _client(world.url, world.alice, "2026-07-28", cache=None) as client:
            first = await client.list_resources()
            assert [r.name for r in first.resources] == ["alice-echo.agent-config", "alice-echo.agent-skills"]
            assert first.next_cursor is not None
            second = await client.list_resources(cursor=first.next_cursor)
            assert [r.name for r in second.resources] == ["alice-echo.today"]
            assert second.next_cursor is None
            with pytest.raises(MCPError) as forged:
                await client.list_tools(cursor="bm9wZQ")
            assert forged.value.code == -32602
        async with _client(world.url, world.bob, "2026-07-28", cache=None) as client:
            with pytest.raises(MCPError) as foreign:
                await client.list_resources(cursor=first.next_cursor)
            assert foreign.value.code == -32602


# -- sessions ---------------------------------------------------------------------------------


def _post(world: World, key: str, message: dict[str, Any], session_id: str | None = None) -> httpx.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {key}"}
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
    return httpx.post(world.url, json=message, headers=headers, timeout=CALL_TIMEOUT_SECONDS)


def test_a_session_belongs_to_the_user_who_opened_it(world: World) -> None:
    opened = _post(world, world.alice, INITIALIZE)
    assert opened.status_code == 200
    session_id = opened.headers["mcp-session-id"]
    assert "hivegate" in opened.text
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert _post(world, world.alice, initialized, session_id).status_code == 202
    tools_list = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}

    refused = _post(world, world.bob, tools_list, session_id)
    assert refused.status_code == 404
    assert refused.json()["error"]["message"] == "Session not found"

    # Any of alice's credentials continues her session, and the handlers see that request's caller.
    listed = _post(world, world.alice_other, tools_list, session_id)
    assert listed.status_code == 200
    assert '"name":"alice-echo"' in listed.text.replace(" ", "")

    bob_headers = {"Authorization": f"Bearer {world.bob}", "Mcp-Session-Id": session_id}
    assert httpx.delete(world.url, headers=bob_headers, timeout=10).status_code == 404
    alice_headers = {"Authorization": f"Bearer {world.alice}", "Mcp-Session-Id": session_id}
    assert httpx.delete(world.url, headers=alice_headers, timeout=10).status_code == 200
    assert _post(world, world.alice, tools_list, session_id).status_code == 404


def test_refused_opening_request_has_no_session_header(world: World) -> None:
    """A handshake-era request that names a revision but no session is refused, with no session header."""
    not_initialize = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {**HEADERS, "Authorization": f"Bearer {world.alice}", "MCP-Protocol-Version": "2025-11-25"}
    response = httpx.post(world.url, json=not_initialize, headers=headers, timeout=CALL_TIMEOUT_SECONDS)
    assert response.status_code == 400
    assert "mcp-session-id" not in response.headers


def test_sessionless_call_is_served_one_shot_without_a_session(world: World) -> None:
    """Issue 7 item 14: the original's documented call (no initialize, no session, no version header) is
    answered once, as JSON, and opens no session."""
    response = _post(world, world.alice, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert response.status_code == 200, response.text
    assert "mcp-session-id" not in response.headers
    assert response.json()["result"]["tools"]


def test_transport_checks_apply(world: World) -> None:
    auth = {"Authorization": f"Bearer {world.alice}"}
    wrong_type = httpx.post(world.url, content=b"{}", headers={**HEADERS, **auth, "Content-Type": "text/plain"})
    assert wrong_type.status_code == 415
    batch = httpx.post(world.url, content=b"[]", headers={**HEADERS, **auth})
    assert batch.status_code == 400
    bad_origin = httpx.post(world.url, json=INITIALIZE, headers={**HEADERS, **auth, "Origin": "https://evil.example"})
    assert bad_origin.status_code == 403


# -- list changes (last: it changes the registry) ----------------------------------------------


async def _apply(world: World, text: str, name: str) -> None:
    folder = Path(world.database_url.removeprefix("sqlite+aiosqlite:///")).parent
    file = folder / name
    file.write_text(text, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "examples")])}
    result = await anyio.run_process(
        [sys.executable, "-m", "hivegate", "agents", "apply", str(file), "--database-url", world.database_url],
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode() + result.stdout.decode()


async def test_enabling_an_agent_is_announced_on_both_eras(world: World) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    with anyio.fail_after(60):
        async with (
            _client(world.url, world.alice, "legacy", message_handler=on_message) as legacy,
            _client(world.url, world.alice, "2026-07-28", cache=None) as modern,
        ):
            assert await _tool_names(legacy) == ["discover_agents", "alice-echo"]
            async with modern.listen(tools_list_changed=True) as subscription:
                await _apply(world, AGENTS.replace("mcp_enabled = false", "mcp_enabled = true"), "enabled.toml")
                event = await subscription.__anext__()
            assert isinstance(event, ToolsListChanged)
            await changed.wait()
            assert await _tool_names(modern) == ["discover_agents", "alice-echo", "alice-quiet"]
            assert await _tool_names(legacy) == ["discover_agents", "alice-echo", "alice-quiet"]
            assert [p.name for p in (await legacy.list_prompts()).prompts] == ["alice-echo.greet", "alice-quiet.secret"]
