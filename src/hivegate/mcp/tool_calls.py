"""An agent's own tools (message tool, skill tools) on MCP: ``tools/call`` through the invocation layer.

Both the agent endpoint and the user-level endpoint ``/mcp`` call :func:`call_own_tool`, so a call
behaves alike on both: reply deltas become ``notifications/progress`` when the request carried a
``progressToken`` (``progress`` counts the deltas, ``message`` is the delta's text); an agent
failure is an ``isError`` result; a deadline passed or an unavailable backend is a JSON-RPC error
(raised here as :class:`~hivegate.errors.GatewayError`, converted by the handlers' one converter).

The call runs under the call contract (:mod:`hivegate.calls.contract`): ``context_id`` and
``idempotency_key`` come from the arguments or ``params._meta``; a call in a handshake-era session with
no ``context_id`` continues the session's conversation. The result carries the conversation id in
``structuredContent`` (``{"reply", "context_id"}``, and ``data``: the values of a reply's data parts;
a reply's file parts follow its text as image, audio, embedded-resource or resource-link content)
and ``_meta`` (``context_id``, and
``idempotency_replayed`` true for a replayed outcome); a changed payload under a used key is a
JSON-RPC error (-32602, ``data.code`` ``conflict``), as is a ``context_id`` that names no
conversation of the caller's (``invalid_params``: nothing is invoked).

Spec: MCP 2026-07-28 server/tools#error-handling (input validation and tool failures are
``isError`` results), server/tools#structured-content, basic/utilities/progress.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from mcp.server.context import ServerRequestContext
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types import CallToolRequestParams

from hivegate.calls.events import CallFailed, ReplyDelta, ReplyPart, ReplySink
from hivegate.errors import InvalidParamsError
from hivegate.mcp.session_context import current_session
from hivegate.mcp.tools import CONTRACT_META_KEYS, build_invocation, call_key
from hivegate.mcp.view import AgentView
from hivegate.policy.calls import OPEN_POLICY, CallPolicy

__all__ = ["call_own_tool", "file_content_block"]


def _text_result(
    text: str,
    *,
    is_error: bool = False,
    context_id: str | None = None,
    replayed: bool = False,
    parts: tuple[ReplyPart, ...] = (),
    version: str | None = None,
) -> dict[str, Any]:
    """A ``CallToolResult`` (``resultType`` ``complete``), as its wire mapping: the reply as one text
    block, then one content block per file part of ``parts`` (:func:`file_content_block`); the conversation id
    in ``structuredContent`` and ``_meta`` when there is one, and the data parts' values in
    ``structuredContent.data`` (their JSON is in the text block too, as the spec asks of structured
    content).

    The SDK shapes a mapping as it does a model: cache hints, then validation and the per-version
    surface (Spec: MCP 2026-07-28 server/tools, ``CallToolResult``, server/tools#structured-content).
    """
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [file_content_block(i, part, version) for i, part in enumerate(parts) if part.kind == "file"]
    result: dict[str, Any] = {"content": content, "isError": is_error, "resultType": "complete"}
    data = [part.data for part in parts if part.kind == "data"]
    if context_id is not None or data:
        structured: dict[str, Any] = {"reply": text}
        if context_id is not None:
            structured["context_id"] = context_id
        if data:
            structured["data"] = data
        result["structuredContent"] = structured
    if context_id is not None:
        meta: dict[str, Any] = {"context_id": context_id}
        if replayed:
            meta["idempotency_replayed"] = True
        result["_meta"] = meta
    return result


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
        ConflictError: ``idempotency_key`` used with another payload (-32602, ``data.code`` ``conflict``).
        InvalidParamsError: a ``context_id`` that names no conversation of the caller with the agent.
        InvalidParamsError: an attachment's ``file_id`` the caller may not use, or too many attachments (-32602).
        ServiceTimeoutError: the agent did not reply within its ``invoke_timeout_seconds`` (-32003).
        GatewayError: any other plane-level failure of the call (e.g. AgentServiceUnavailableError).
    """
    target = view.call_target
    assert target is not None  # own tools exist only for an invocable backend
    arguments = params.arguments or {}
    meta = _contract_meta(params)
    try:
        request = build_invocation(view.spec, view.tool_index[params.name], arguments, meta)
        key = call_key(arguments, meta)
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
    settled = await policy.contract.run(request.principal, target, request, sink, key=key, session=current_session())
    outcome = settled.outcome
    replayed = settled.replayed is not None
    if isinstance(outcome, CallFailed):
        if outcome.agent_failed:
            return _text_result(outcome.error.message, is_error=True, context_id=settled.context_id, replayed=replayed)
        raise outcome.error
    version = ctx.protocol_version or None
    return _text_result(
        outcome.text, context_id=settled.context_id, replayed=replayed, parts=outcome.parts, version=version
    )


def file_content_block(index: int, part: ReplyPart, version: str | None) -> dict[str, Any]:
    """A file part of a reply as an MCP content block, as the caller's protocol ``version`` has them:
    bytes of an ``image/*`` type as image content, of ``audio/*`` as audio content (2025-03-26 on),
    others as an embedded resource (``blob``, under a ``hivegate:`` URI naming the part); a link as a
    resource link (2025-06-18 on; for older callers the text block's description names it).

    Spec: MCP 2025-11-25 server/tools#tool-result (image, audio, resource links, embedded resources).
    """
    media_type = part.media_type or "application/octet-stream"
    newer = version is None or version >= "2025-06-18"
    if part.content is None:
        if newer:
            link: dict[str, Any] = {"type": "resource_link", "uri": part.uri or "", "name": part.name or "file"}
            if part.media_type:
                link["mimeType"] = part.media_type
            return link
        return {"type": "text", "text": f"[file {part.name or 'file'}: {part.uri}]"}
    data = base64.b64encode(part.content).decode()
    if media_type.startswith("image/"):
        return {"type": "image", "data": data, "mimeType": media_type}
    if media_type.startswith("audio/") and (version is None or version >= "2025-03-26"):
        return {"type": "audio", "data": data, "mimeType": media_type}
    uri = f"hivegate:reply/{index}/{quote(part.name or 'file', safe='')}"
    return {"type": "resource", "resource": {"uri": uri, "mimeType": media_type, "blob": data}}


def _contract_meta(params: CallToolRequestParams) -> dict[str, Any]:
    """The contract's keys the request's ``_meta`` carries (:data:`~hivegate.mcp.tools.CONTRACT_META_KEYS`)."""
    meta: Mapping[str, Any] = params.meta or {}
    return {name: meta[name] for name in CONTRACT_META_KEYS if name in meta}
