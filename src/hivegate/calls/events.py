"""What a call of an agent produces: reply deltas while it runs, then one terminal event.

A plane renders them on its wire: MCP sends a delta as ``notifications/progress`` (when the
request carried a ``progressToken``) and the terminal event as a ``tools/call`` result or a
JSON-RPC error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from hivegate.errors import AgentError, GatewayError

__all__ = [
    "CallFailed",
    "CallOutcome",
    "FinalResult",
    "Reply",
    "ReplyDelta",
    "ReplyPart",
    "ReplySink",
    "StatusNote",
    "render_parts",
]


@dataclass(frozen=True, slots=True)
class ReplyPart:
    """One part of a reply, as A2A has them (A2A 1.0 §4.1.6 ``Part``).

    Attributes:
        kind: ``"text"`` (``text``), ``"data"`` (``data``: a JSON value) or ``"file"`` (``content``: its
            bytes, or ``uri``: a link; ``name`` and ``media_type`` when known).
    """

    kind: Literal["text", "data", "file"]
    text: str = ""
    data: Any = None
    content: bytes | None = None
    uri: str | None = None
    name: str | None = None
    media_type: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply with more than text (what a backend may return instead of a ``str``): its parts, in order.

    Planes pass the parts on as they can (MCP: the text, data as ``structuredContent``, files as image,
    audio, embedded-resource or resource-link content; A2A: the parts as they are); the conversation and
    an idempotency key keep the text of :func:`render_parts`.
    """

    parts: tuple[ReplyPart, ...]


def render_parts(parts: tuple[ReplyPart, ...]) -> str:
    """The text of ``parts``: text parts as they are, data parts as compact JSON, file parts as one line
    (``[file name (type), N bytes]`` or ``[file name (type): url]``); joined with nothing when every part
    is text, else one part a line."""
    out: list[str] = []
    for part in parts:
        if part.kind == "text":
            out.append(part.text)
        elif part.kind == "data":
            out.append(orjson.dumps(part.data, option=orjson.OPT_NON_STR_KEYS).decode())
        else:
            label = " ".join(filter(None, [part.name or "file", f"({part.media_type})" if part.media_type else ""]))
            if part.content is not None:
                out.append(f"[file {label}, {len(part.content)} bytes]")
            else:
                out.append(f"[file {label}: {part.uri}]")
    return "".join(out) if all(part.kind == "text" for part in parts) else "\n".join(out)


@dataclass(frozen=True, slots=True)
class ReplyDelta:
    """One piece of the reply as a streaming backend produced it; the pieces, in order, make the reply."""

    text: str
    index: int
    """1 for the first delta of the call, then 2, 3, … (MCP's monotonically increasing ``progress``)."""
    status: bool = False
    """A note of what the agent is doing (:class:`StatusNote`), not a piece of the reply: MCP shows it as
    progress, A2A as a ``working`` status message, REST as a ``status`` frame; the reply leaves it out."""


class StatusNote(str):
    """What a streaming backend hands its delta sink for a note of what the agent is doing ("Searching
    flights…"; an A2A ``working`` status message) rather than a piece of its reply."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class FinalResult:
    """The agent's whole reply: its text, and its parts when it had more than text (:class:`Reply`;
    ``text`` is then :func:`render_parts` of them)."""

    text: str
    parts: tuple[ReplyPart, ...] = ()


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
