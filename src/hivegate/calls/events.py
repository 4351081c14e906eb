"""What a call of an agent produces: reply deltas while it runs, then one terminal event.

A plane renders them on its wire: MCP sends a delta as ``notifications/progress`` (when the
request carried a ``progressToken``) and the terminal event as a ``tools/call`` result or a
JSON-RPC error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from hivegate.errors import AgentError, GatewayError

__all__ = ["CallFailed", "CallOutcome", "FinalResult", "ReplyDelta", "ReplySink"]


@dataclass(frozen=True, slots=True)
class ReplyDelta:
    """One piece of the reply as a streaming backend produced it; the pieces, in order, make the reply."""

    text: str
    index: int
    """1 for the first delta of the call, then 2, 3, … (MCP's monotonically increasing ``progress``)."""


@dataclass(frozen=True, slots=True)
class FinalResult:
    """The agent's whole reply text."""

    text: str


@dataclass(frozen=True, slots=True)
class CallFailed:
    """The call ended without a reply.

    ``error`` is an :class:`~hivegate.errors.AgentError` when the agent itself failed (MCP: an
    ``isError`` result with its message), or a plane-level error such as
    :class:`~hivegate.errors.ServiceTimeoutError` (-32003) or
    :class:`~hivegate.errors.AgentServiceUnavailableError` (503), which planes render as errors.
    """

    error: GatewayError

    @property
    def agent_failed(self) -> bool:
        """Whether the agent itself failed (a result the caller reads) rather than the gateway's call of it."""
        return isinstance(self.error, AgentError)


CallOutcome = FinalResult | CallFailed
"""The terminal event of a call."""

ReplySink = Callable[[ReplyDelta], Awaitable[None]]
"""Receives each :class:`ReplyDelta` of a call, in order, before the call returns its outcome."""
