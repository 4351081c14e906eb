"""Whom an upstream MCP server's messages for a call go to: its progress, its log messages, and its
requests (sampling, elicitation, roots) of the caller.

The SDK client runs an upstream's callbacks in the calling task when it can (then :data:`CALLER` names
the call) and otherwise in its reader task, where no call runs (a stdio upstream's out-of-call messages
carry no request id): :func:`caller_of` then decides, from the calls in flight on that client
(:class:`Callers`), whether exactly one caller may have it. One caller never gets what belongs to
another. Used by :mod:`hivegate.backends.mcp_upstream`.

Spec: MCP 2025-11-25 basic/utilities/progress, server/utilities/logging, client/sampling,
client/elicitation, client/roots; MCP 2026-07-28 SEP-2577 (log messages opt-in per request).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import mcp_types as types
from mcp.client.session import ClientRequestContext
from mcp.server.context import ServerRequestContext
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["CALLER", "Callers", "ask_caller", "ask_caller_for_roots", "caller_of", "log_to_caller", "progress_to"]


CALLER: ContextVar[ServerRequestContext[Any, Any] | None] = ContextVar("hivegate_upstream_caller", default=None)
"""The request whose upstream call is running in this task (the input-required driver runs in it)."""


class Callers:
    """The calls in flight on one upstream client (by ``id`` of their request context), and whose calls
    it has served: one signed-in user's only (``user``), or anyone's (``mixed``)."""

    __slots__ = ("calls", "mixed", "user")

    def __init__(self) -> None:
        self.calls: dict[int, ServerRequestContext[Any, Any]] = {}
        self.user: str | None = None
        self.mixed = False

    def enter(self, ctx: ServerRequestContext[Any, Any], user: str | None) -> None:
        self.calls[id(ctx)] = ctx
        if user is None or (self.user is not None and self.user != user):
            self.mixed = True
        self.user = self.user or user


def caller_of(callers: Callers) -> ServerRequestContext[Any, Any] | None:
    """Whom an upstream's request or log message is for: the call running in this task; else (the SDK
    hands a stdio upstream's messages to its callbacks from its reader task, where no call runs, and
    stdio carries no request id with them) the only call in flight on that client, when every call the
    client has served was one signed-in user's (a message left over from an ended call then still goes
    to its own user). Otherwise it cannot be told whose it is: nobody gets it (a log message is dropped,
    a request declined), so one caller never sees what belongs to another (an anonymous caller, or
    another user)."""
    caller = CALLER.get()
    if caller is None and len(callers.calls) == 1 and not callers.mixed:
        caller = next(iter(callers.calls.values()))
    if (
        caller is not None
        and caller.protocol_version in MODERN_PROTOCOL_VERSIONS
        and LOG_LEVEL_META_KEY not in (caller.meta or {})
    ):
        # A 2026-07-28 caller takes no request from the server, and log messages only when its request
        # asked for them (SEP-2577): one that asked for none gets nothing (on the lean path its session
        # could not send it anyway).
        return None
    return caller


async def ask_caller(callers: Callers, context: ClientRequestContext, params: Any) -> Any:
    """An upstream's sampling or elicitation request, asked of the caller whose call it belongs to.

    A question embedded in an ``InputRequiredResult`` is asked in the calling task; one the upstream
    sends on its own (a handshake-era server's request, which the SDK hands over outside the call's task)
    goes to the only call in flight on that client, and is declined when there is none or more than one
    (:func:`caller_of`)."""
    caller = caller_of(callers)
    if caller is None:
        return types.ErrorData(code=types.INVALID_REQUEST, message="the gateway has no caller to ask")
    try:
        if isinstance(params, types.CreateMessageRequestParams):
            result_type: Any = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
            request: Any = types.CreateMessageRequest(params=params)
        else:
            result_type, request = types.ElicitResult, types.ElicitRequest(params=params)
        return await caller.session.send_request(request, result_type)
    except MCPError as exc:
        return exc.error


async def log_to_caller(callers: Callers, params: types.LoggingMessageNotificationParams) -> None:
    """An upstream's log message for a call, relayed to that call's caller (:func:`caller_of`; a message
    without one caller to go to is dropped)."""
    caller = caller_of(callers)
    if caller is not None:
        # Deprecated as of 2026-07-28 (SEP-2577), the handshake era's way still: the session applies the
        # caller's level (logging/setLevel, or its request's opt-in).
        await caller.session.send_log_message(  # pyright: ignore[reportDeprecated]
            params.level, params.data, params.logger, caller.request_id
        )


async def ask_caller_for_roots(callers: Callers, context: ClientRequestContext) -> Any:
    """An upstream's ``roots/list``, asked of the caller (as :func:`ask_caller`)."""
    caller = caller_of(callers)
    if caller is None:
        return types.ErrorData(code=types.INVALID_REQUEST, message="the gateway has no caller to ask")
    try:
        return await caller.session.send_request(types.ListRootsRequest(), types.ListRootsResult)
    except MCPError as exc:
        return exc.error


def progress_to(ctx: ServerRequestContext[Any, Any]) -> ProgressFnT:
    """Relay upstream progress to the caller's request (a no-op when the caller asked for none).

    While one notification is being sent to a slow caller, later ones replace each other and only the
    latest is sent next: an upstream's flood of progress costs the gateway one pending notification
    per call, not one per notification (the attack trial saw 100,000 of them pile up as 800 MB). Spec:
    MCP 2025-11-25 basic/utilities/progress (progress increases; intermediate values may be skipped).
    """
    latest: tuple[float, float | None, str | None] | None = None
    sending = False

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        nonlocal latest, sending
        latest = (progress, total, message)
        if sending:
            return  # the running send goes on with the latest
        sending = True
        try:
            while latest is not None:
                notification, latest = latest, None
                await ctx.session.report_progress(*notification)
        finally:
            sending = False

    return relay
