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

from dataclasses import replace
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types import CallToolRequestParams

from hivegate.calls.events import CallFailed, ReplyDelta, ReplySink
from hivegate.calls.invoke import invoke
from hivegate.errors import InvalidParamsError
from hivegate.mcp.tools import build_invocation
from hivegate.mcp.view import AgentView
from hivegate.policy.calls import OPEN_POLICY, CallPolicy

__all__ = ["call_own_tool"]


def _text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    """A ``CallToolResult`` of one text block (``resultType`` ``complete``), as its wire mapping.

    The SDK shapes a mapping as it does a model: cache hints, then validation and the per-version
    surface (Spec: MCP 2026-07-28 server/tools, ``CallToolResult``).
    """
    return {"content": [{"type": "text", "text": text}], "isError": is_error, "resultType": "complete"}


async def call_own_tool(
    ctx: ServerRequestContext[Any, Any],
    view: AgentView,
    params: CallToolRequestParams,
    policy: CallPolicy = OPEN_POLICY,
) -> dict[str, Any]:
    """Call the tool ``params.name`` of ``view.tool_index`` with ``params.arguments``, once ``policy`` admits it:
    the caller's rate limit on the agent, then the attachments (each ``file_id`` resolved to the file's bytes).

    Returns:
        The ``CallToolResult`` wire mapping: the reply as one text block, or the agent's failure
        (or invalid arguments) with ``isError`` true.

    Raises:
        RateLimitedError: over the caller's limit on the agent (-32603, ``data.retryAfterSeconds``).
        InvalidParamsError: an attachment's ``file_id`` the caller may not use, or too many attachments (-32602).
        ServiceTimeoutError: the agent did not reply within its ``invoke_timeout_seconds`` (-32003).
        GatewayError: any other plane-level failure of the call (e.g. AgentServiceUnavailableError).
    """
    target = view.call_target
    assert target is not None  # own tools exist only for an invocable backend
    try:
        request = build_invocation(view.spec, view.tool_index[params.name], params.arguments or {})
    except InvalidParamsError as exc:
        return _text_result(exc.message, is_error=True)
    # Issue 10 items 3-4: the call's admission, before anything is invoked.
    await policy.check_rate(request.principal, view.spec)
    if request.attachments:
        attachments = await policy.resolve_attachments(request.principal, view.spec.id, request.attachments)
        request = replace(request, attachments=attachments)
    sink: ReplySink | None = None
    if progress_token_from_params(ctx.params) is not None:

        async def on_delta(delta: ReplyDelta) -> None:
            await ctx.session.report_progress(delta.index, None, delta.text)

        sink = on_delta
    outcome = await invoke(request.principal, target, request, sink)
    if isinstance(outcome, CallFailed):
        if outcome.agent_failed:
            return _text_result(outcome.error.message, is_error=True)
        raise outcome.error
    return _text_result(outcome.text)
