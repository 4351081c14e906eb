"""A bounded in-memory SSE event store for handshake-era streams (resumability, SEP-1699 polling).

Event ids are random (not sequential) so one session cannot replay another session's
events by guessing ids. Each agent has its own store, so an id from one agent's stream
finds nothing on another agent's path.

Spec: MCP 2025-11-25 basic/transports#resumability-and-redelivery.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

__all__ = ["MemoryEventStore"]


class MemoryEventStore(EventStore):
    """Keeps the last ``capacity`` events (all streams together); older ones are forgotten."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._events: OrderedDict[str, tuple[int, StreamId, JSONRPCMessage | None]] = OrderedDict()
        self._sequence = 0

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        self._sequence += 1
        event_id = secrets.token_urlsafe(12)
        self._events[event_id] = (self._sequence, stream_id, message)
        while len(self._events) > self._capacity:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        found = self._events.get(last_event_id)
        if found is None:
            return None
        after, stream, _ = found
        for event_id, (sequence, stream_id, message) in list(self._events.items()):
            if stream_id == stream and sequence > after and message is not None:  # None marks a priming event
                await send_callback(EventMessage(message, event_id))
        return stream
