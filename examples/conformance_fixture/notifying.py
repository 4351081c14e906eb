"""Fixture tools that stream notifications or need something from the client.

Logging and progress ride the request's own SSE stream. Sampling and elicitation go through
:func:`conformance_fixture.dialog.converse`, so they are real server-to-client requests on the
handshake era and ``InputRequiredResult`` round trips on 2026-07-28. The list-changed triggers
publish to ``subscriptions/listen`` streams (2026-07-28) and to the standalone GET stream (legacy).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.types import ElicitResult, InputRequiredResult

from conformance_fixture.common import declared, is_modern, missing_capability, send_log
from conformance_fixture.dialog import Round, converse, form, sample

STEP_DELAY_S = 0.02
"""Pause between streamed notifications, so clients see them arrive one by one."""

SEP1034_PROPERTIES: dict[str, Any] = {
    "name": {"type": "string", "description": "Full name", "default": "John Doe"},
    "age": {"type": "integer", "description": "Age in years", "default": 30},
    "score": {"type": "number", "description": "Score", "default": 95.5},
    "status": {
        "type": "string",
        "description": "Account status",
        "enum": ["active", "inactive", "pending"],
        "default": "active",
    },
    "verified": {"type": "boolean", "description": "Verified account", "default": True},
}
"""SEP-1034: a default for every primitive type."""

SEP1330_PROPERTIES: dict[str, Any] = {
    "untitledSingle": {"type": "string", "description": "Plain enum", "enum": ["option1", "option2", "option3"]},
    "titledSingle": {
        "type": "string",
        "description": "Titled single choice",
        "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"},
        ],
    },
    "legacyEnum": {
        "type": "string",
        "description": "Legacy titled enum",
        "enum": ["opt1", "opt2", "opt3"],
        "enumNames": ["Option One", "Option Two", "Option Three"],
    },
    "untitledMulti": {
        "type": "array",
        "description": "Plain multi-select",
        "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
    },
    "titledMulti": {
        "type": "array",
        "description": "Titled multi-select",
        "items": {
            "anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"},
            ]
        },
    },
}
"""SEP-1330: the five enum schema variants."""


def _describe(answer: ElicitResult) -> str:
    return f"action={answer.action}, content={json.dumps(answer.content or {}, sort_keys=True)}"


def _elicit_flow(
    key: str, message: str, properties: dict[str, Any], prefix: str, *, required: list[str] | None = None
) -> Callable[[Round], str | InputRequiredResult]:
    """A one-question elicitation flow that reports the answer as ``"<prefix>: action=…, content=…"``."""

    def flow(current: Round) -> str | InputRequiredResult:
        if not declared(current.capabilities, "elicitation"):
            raise missing_capability("elicitation", reason=f"{prefix}: the client did not declare elicitation")
        answer = current.elicited(key)
        if answer is None:
            return InputRequiredResult(input_requests={key: form(message, properties, required=required)})
        return f"{prefix}: {_describe(answer)}"

    return flow


def register_streaming_tools(server: MCPServer) -> None:
    """Logging, progress and SSE-reconnection tools."""

    @server.tool(description="Emits three info log notifications while it runs.")
    async def test_tool_with_logging(ctx: Context) -> str:
        for step in ("started", "halfway", "finished"):
            await send_log(ctx, "info", f"test_tool_with_logging {step}")
            await anyio.sleep(STEP_DELAY_S)
        return "test_tool_with_logging finished"

    @server.tool(description="Logs one message; on 2026-07-28 it is delivered only when _meta asks for a log level.")
    async def test_logging_tool(ctx: Context) -> str:
        await send_log(ctx, "info", "test_logging_tool says hello")
        return "test_logging_tool finished"

    @server.tool(description="Reports progress 0, 50 and 100 of 100, then returns the progress token.")
    async def test_tool_with_progress(ctx: Context) -> str:
        for value in (0, 50, 100):
            await ctx.report_progress(progress=value, total=100, message=f"{value}% done")
            await anyio.sleep(STEP_DELAY_S)
        token = (ctx.request_context.meta or {}).get("progress_token")
        return str(token) if token is not None else "no progress token"

    @server.tool(description="Closes its SSE stream mid-call so the client resumes it (SEP-1699, legacy).")
    async def test_reconnection(ctx: Context) -> str:
        await send_log(ctx, "info", "test_reconnection: closing the stream")
        await ctx.close_sse_stream()
        await anyio.sleep(0.2)
        await send_log(ctx, "info", "test_reconnection: after the reconnect")
        return "test_reconnection finished"


def register_client_input_tools(server: MCPServer) -> None:
    """Sampling, elicitation and the capability-requirement probe."""

    @server.tool(description="Asks the client's LLM to answer `prompt` (sampling).")
    async def test_sampling(prompt: str, ctx: Context) -> str | InputRequiredResult:
        def flow(current: Round) -> str | InputRequiredResult:
            if not declared(current.capabilities, "sampling"):
                raise missing_capability("sampling", reason="test_sampling needs the client's sampling capability")
            text = current.sampled_text("completion")
            if text is None:
                return InputRequiredResult(input_requests={"completion": sample(prompt, max_tokens=100)})
            return f"LLM response: {text}"

        return await converse(ctx, flow)

    @server.tool(description="Asks the user to answer `message` (form elicitation).")
    async def test_elicitation(message: str, ctx: Context) -> str | InputRequiredResult:
        properties = {"response": {"type": "string", "description": "Your answer"}}
        flow = _elicit_flow("answer", message, properties, "User response", required=["response"])
        return await converse(ctx, flow)

    @server.tool(description="Elicits a form whose fields all carry defaults (SEP-1034).")
    async def test_elicitation_sep1034_defaults(ctx: Context) -> str | InputRequiredResult:
        flow = _elicit_flow("profile", "Confirm or edit the profile", SEP1034_PROPERTIES, "Elicitation completed")
        return await converse(ctx, flow)

    @server.tool(description="Elicits a form using every enum schema variant (SEP-1330).")
    async def test_elicitation_sep1330_enums(ctx: Context) -> str | InputRequiredResult:
        flow = _elicit_flow("choices", "Pick some options", SEP1330_PROPERTIES, "Elicitation completed")
        return await converse(ctx, flow)

    @server.tool(description="Streams a progress/log update, then asks for confirmation (never a raw request on 2026).")
    async def test_streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
        await ctx.report_progress(progress=1, total=2, message="about to ask for confirmation")
        await send_log(ctx, "info", "test_streaming_elicitation: asking for confirmation")
        properties = {"proceed": {"type": "boolean", "description": "Continue?"}}
        flow = _elicit_flow("proceed", "Continue the streaming call?", properties, "Streaming elicitation")
        return await converse(ctx, flow)

    @server.tool(description="Requires the client's sampling capability; fails with -32021 without it.")
    async def test_missing_capability(ctx: Context) -> str:
        if not declared(ctx.client_capabilities, "sampling"):
            raise missing_capability("sampling", reason="test_missing_capability requires the 'sampling' capability")
        return "the client declared sampling"


def register_list_change_triggers(server: MCPServer) -> None:
    """Tools that change the tool or prompt list and announce it."""

    def ephemeral() -> str:
        """Exists only for an instant inside a list-changed trigger."""
        return "ephemeral"

    @server.tool(description="Adds and removes a tool, then announces tools/list_changed.")
    async def test_trigger_tool_change(ctx: Context) -> str:
        server.add_tool(ephemeral, name="test_ephemeral_tool")
        server.remove_tool("test_ephemeral_tool")
        await ctx.notify_tools_changed()
        if not is_modern(ctx):
            await ctx.session.send_tool_list_changed()
        return "tools/list_changed announced"

    @server.tool(description="Adds and removes a prompt, then announces prompts/list_changed.")
    async def test_trigger_prompt_change(ctx: Context) -> str:
        server.add_prompt(Prompt.from_function(ephemeral, name="test_ephemeral_prompt"))
        server.remove_prompt("test_ephemeral_prompt")
        await ctx.notify_prompts_changed()
        if not is_modern(ctx):
            await ctx.session.send_prompt_list_changed()
        return "prompts/list_changed announced"


def register(server: MCPServer) -> None:
    """Register every notifying / client-input tool on ``server``."""
    register_streaming_tools(server)
    register_client_input_tools(server)
    register_list_change_triggers(server)
