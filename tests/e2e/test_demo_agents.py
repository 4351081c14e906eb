"""The official MCP Python client, in legacy, auto and 2026-07-28 modes, against a real hivegate server.

Acceptance for issue 2: on both demo agents, list and call tools, read resources, get prompts
and complete arguments, through every era the client speaks.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference, ResourceTemplateReference, TextContent, TextResourceContents

from tests.gateway_process import GatewayProcess

MODES = ["legacy", "auto", "2026-07-28"]
EXPECTED_VERSION = {"legacy": "2025-11-25", "auto": "2026-07-28", "2026-07-28": "2026-07-28"}


def _text(content: Any) -> str:
    assert isinstance(content, TextContent)
    return content.text


@pytest.mark.parametrize("mode", MODES)
async def test_echo_agent_tools_resources_prompts(demo_gateway: GatewayProcess, mode: str) -> None:
    async with Client(f"{demo_gateway.url}/echo/mcp", mode=mode) as client:  # type: ignore[arg-type]
        assert client.protocol_version == EXPECTED_VERSION[mode]
        tools = await client.list_tools()
        assert [t.name for t in tools.tools] == ["echo", "shout"]
        assert tools.tools[0].input_schema["required"] == ["message"]

        result = await client.call_tool("echo", {"message": "hello big world"})
        assert not result.is_error
        assert _text(result.content[0]) == "hello big world"
        skill = await client.call_tool("shout", {"message": "hi"})
        assert _text(skill.content[0]) == "hi"

        resources = await client.list_resources()
        uris = [r.uri for r in resources.resources]
        assert uris == ["hivegate://agent/config", "hivegate://agent/skills", "echo://readme"]
        config = await client.read_resource("hivegate://agent/config")
        first = config.contents[0]
        assert isinstance(first, TextResourceContents)
        document = json.loads(first.text)
        assert (document["id"], document["page_size"]) == ("echo", 50)  # the server default applies
        readme = await client.read_resource("echo://readme")
        assert "Echo" in readme.contents[0].text  # type: ignore[union-attr]

        prompt = await client.get_prompt("echo_twice", {"phrase": "bonjour"})
        assert _text(prompt.messages[0].content) == "Please repeat this twice: bonjour"
        completion = await client.complete(
            PromptReference(type="ref/prompt", name="echo_twice"), {"name": "phrase", "value": "hello"}
        )
        assert completion.completion.values == ["hello", "hello world"]
        assert completion.completion.total == 2


@pytest.mark.parametrize("mode", MODES)
async def test_echo_streams_progress_when_asked(demo_gateway: GatewayProcess, mode: str) -> None:
    deltas: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        deltas.append(message)

    async with Client(f"{demo_gateway.url}/echo/mcp", mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool("echo", {"message": "one two three"}, progress_callback=on_progress)
    assert _text(result.content[0]) == "one two three"
    assert deltas == ["one ", "two ", "three"]


@pytest.mark.parametrize("mode", MODES)
async def test_notes_agent_template_prompt_completion(demo_gateway: GatewayProcess, mode: str) -> None:
    async with Client(f"{demo_gateway.url}/notes/mcp", mode=mode) as client:  # type: ignore[arg-type]
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["note://{note_id}"]
        note = await client.read_resource("note://12")
        assert note.contents[0].text.startswith("Lab report due Monday")  # type: ignore[union-attr]
        if mode != "legacy":
            assert (note.ttl_ms, note.cache_scope) == (60000, "private")

        prompts = await client.list_prompts()
        assert [p.name for p in prompts.prompts] == ["summarize_note"]
        prompt = await client.get_prompt("summarize_note", {"note_id": "12", "style": "sentence"})
        assert _text(prompt.messages[0].content).startswith("Summarize note 12 as sentence.")

        by_prompt = await client.complete(
            PromptReference(type="ref/prompt", name="summarize_note"), {"name": "note_id", "value": "1"}
        )
        assert by_prompt.completion.values == ["12", "15"]
        by_template = await client.complete(
            ResourceTemplateReference(type="ref/resource", uri="note://{note_id}"), {"name": "style", "value": "s"}
        )
        assert by_template.completion.values == ["sentence"]

        tools = await client.list_tools()
        assert tools.tools == []


@pytest.mark.parametrize("mode", MODES)
async def test_spec_errors_not_sdk_deviations(demo_gateway: GatewayProcess, mode: str) -> None:
    """Spec: MCP 2026-07-28 server/tools, server/prompts, server/resources (SEP-2164): all -32602."""
    legacy = mode == "legacy"
    async with Client(f"{demo_gateway.url}/notes/mcp", mode=mode) as client:  # type: ignore[arg-type]
        with pytest.raises(MCPError) as unknown_tool:
            await client.call_tool("nope", {})
        assert unknown_tool.value.code == -32602
        with pytest.raises(MCPError) as unknown_prompt:
            await client.get_prompt("nope", {})
        assert unknown_prompt.value.code == -32602
        with pytest.raises(MCPError) as missing_argument:
            await client.get_prompt("summarize_note", {})
        assert missing_argument.value.code == -32602
        with pytest.raises(MCPError) as missing_note:
            await client.read_resource("note://99")
        assert missing_note.value.code == (-32002 if legacy else -32602)
        assert missing_note.value.data == {"uri": "note://99"}


async def test_unknown_agent_is_404(demo_gateway: GatewayProcess) -> None:
    with anyio.fail_after(10), pytest.raises(Exception):  # noqa: B017, PT011  # the client surfaces the 404 as an HTTP error
        async with Client(f"{demo_gateway.url}/nobody/mcp", mode="2026-07-28") as client:
            await client.list_tools()
