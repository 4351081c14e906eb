"""A bounded in-memory SSE event store for the standalone fixture's ``--resumable`` mode.

Handshake-era streams can then be resumed with ``Last-Event-ID`` (SEP-1699 polling, exercised by
``test_reconnection`` and the ``server-sse-polling`` scenario). Not used when hivegate hosts the fixture.
"""

from __future__ import annotations

import itertools
from collections import deque

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage


class MemoryEventStore(EventStore):
    """Keeps the last ``capacity`` events of every stream, ids increasing across streams."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._events: deque[tuple[int, StreamId, JSONRPCMessage | None]] = deque(maxlen=capacity)
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = next(self._ids)
        self._events.append((event_id, stream_id, message))
        return str(event_id)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        if not last_event_id.isdigit():
            return None
        after = int(last_event_id)
        stream = next((sid for eid, sid, _ in self._events if eid == after), None)
        if stream is None:
            return None
        for event_id, stream_id, message in list(self._events):
            if stream_id == stream and event_id > after and message is not None:  # None = priming event
                await send_callback(EventMessage(message, str(event_id)))
        return stream
