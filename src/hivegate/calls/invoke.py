"""Run one call of an agent: the backend's ``invoke`` under the agent's deadline, deltas to a sink.

Spec: the original platform's MCP ``tools/call`` (a 60 s default deadline, then JSON-RPC -32003
"Agent reply timeout"; see /work/shared/reference/product-surface.md §3.4).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import anyio

from hivegate.agents.model import AgentSpec
from hivegate.auth.principal import Principal
from hivegate.backends.base import Backend, Invocation
from hivegate.calls.events import (
    CallFailed,
    CallOutcome,
    FinalResult,
    Reply,
    ReplyDelta,
    ReplySink,
    StatusNote,
    render_parts,
)
from hivegate.errors import GatewayError, ServiceTimeoutError

__all__ = ["CallTarget", "invoke"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CallTarget:
    """The agent a call goes to: its spec (for the deadline) and its started backend."""

    spec: AgentSpec
    backend: Backend


async def invoke(
    principal: Principal, target: CallTarget, request: Invocation, on_delta: ReplySink | None = None
) -> CallOutcome:
    """Run ``target``'s backend on ``request`` as ``principal``; the outcome is the terminal event.

    Each reply delta reaches ``on_delta`` (when given) before the outcome is returned. The call is
    cancelled when it runs past ``target.spec.invoke_timeout_seconds`` (the backend sees the
    cancellation; a synchronous callable's worker thread is abandoned and finishes on its own) and
    when the caller's task is cancelled (the cancellation propagates after the backend has seen it).

    Returns:
        :class:`FinalResult` with the reply text, or :class:`CallFailed` with an
        :class:`~hivegate.errors.AgentError` (the agent failed), a
        :class:`~hivegate.errors.ServiceTimeoutError` (deadline passed) or any other
        :class:`~hivegate.errors.GatewayError` the backend raised (e.g.
        :class:`~hivegate.errors.AgentServiceUnavailableError`).
    """
    invocation = request if request.principal is principal else replace(request, principal=principal)
    timeout = target.spec.invoke_timeout_seconds
    sent = 0

    async def forward(text: str) -> None:
        nonlocal sent
        sent += 1
        assert on_delta is not None
        await on_delta(ReplyDelta(str(text), sent, status=isinstance(text, StatusNote)))

    # anyio's scope, not asyncio.timeout: level cancellation (a backend that swallows one cancel is
    # cancelled again at its next await) that respects a backend's shielded sections.
    with anyio.move_on_after(timeout) as deadline:
        try:
            reply = await target.backend.invoke(invocation, forward if on_delta is not None else None)
        except GatewayError as exc:
            return CallFailed(exc)
        if isinstance(reply, Reply):
            return FinalResult(render_parts(reply.parts), reply.parts)
        return FinalResult(reply)
    assert deadline.cancelled_caught
    logger.warning("agent %s: no reply within %g s; the call was cancelled", target.spec.id, timeout)
    return CallFailed(ServiceTimeoutError(timeout))
