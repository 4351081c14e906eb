"""An agent's own tools (message tool, skill tools) on MCP: ``tools/call`` through the invocation layer.

Both the agent endpoint and the user-level endpoint ``/mcp`` call :func:`call_own_tool`, so a call
behaves alike on both: reply deltas become ``notifications/progress`` when the request carried a
``progressToken`` (``progress`` counts the deltas, ``message`` is the delta's text); an agent
failure is an ``isError`` result; a deadline passed or an unavailable backend is a JSON-RPC error
(raised here as :class:`~hivegate.errors.GatewayError`, converted by the handlers' one converter).

Spec: MCP 2026-07-28 server/tools#error-handling (input validation and tool failures are
``isError`` results), basic/utilities/progress.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types import CallToolRequestParams, CallToolResult, TextContent

from hivegate.auth.principal import current_principal
from hivegate.calls.events import CallFailed, ReplyDelta
from hivegate.calls.invoke import CallTarget, invoke
from hivegate.errors import InvalidParamsError
from hivegate.mcp.tools import build_invocation
from hivegate.mcp.view import AgentView

__all__ = ["call_own_tool"]


def _text_result(text: str, *, is_error: bool = False) -> CallToolResult:
    """One text block; built without validation (``text`` is a str, so the models hold by construction),
    and the result is validated once, by the SDK's per-version result surface, when it is shaped."""
    content: list[Any] = [TextContent.model_construct(type="text", text=text)]
    if is_error:
        return CallToolResult.model_construct(content=content, is_error=True)
    return CallToolResult.model_construct(content=content)


async def call_own_tool(
    ctx: ServerRequestContext[Any, Any], view: AgentView, params: CallToolRequestParams
) -> CallToolResult:
    """Call the tool ``params.name`` of ``view.tool_index`` with ``params.arguments``.

    Raises:
        ServiceTimeoutError: the agent did not reply within its ``invoke_timeout_seconds`` (-32003).
        GatewayError: any other plane-level failure of the call (e.g. AgentServiceUnavailableError).
    """
    assert view.backend is not None  # own tools exist only for an invocable backend
    try:
        request = build_invocation(view.spec, view.tool_index[params.name], params.arguments or {})
    except InvalidParamsError as exc:
        return _text_result(exc.message, is_error=True)

    async def on_delta(delta: ReplyDelta) -> None:
        await ctx.session.report_progress(delta.index, None, delta.text)

    wants_progress = progress_token_from_params(ctx.params) is not None
    outcome = await invoke(
        current_principal(), CallTarget(view.spec, view.backend), request, on_delta if wants_progress else None
    )
    if isinstance(outcome, CallFailed):
        if outcome.agent_failed:
            return _text_result(outcome.error.message, is_error=True)
        raise outcome.error
    return _text_result(outcome.text)
