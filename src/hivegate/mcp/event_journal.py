"""Handshake-era SSE events kept for resumption, bounded in bytes per account and in total.

One :class:`EventJournal` serves the whole process (every agent endpoint and ``/mcp``); the
SDK-facing side, which binds events to an endpoint, a session and a principal, is
:mod:`hivegate.mcp.event_store`. Events are kept by session (:class:`SessionEvents`, opened by
:meth:`EventJournal.open_session`) and, within it, by stream; each session is charged to one
*account*: the principal that opened it, or its client address when it presented nothing.

Bounds, checked before an event is added (so they are never exceeded, not even briefly):

* an account holds at most ``bytes_per_account``: its own oldest events are dropped first;
* anonymous accounts (client addresses, ``addr:…``) together hold at most ``bytes_anonymous``
  (``mcp.anonymous_budget_share`` of the total): the oldest anonymous events are dropped first.
  An attacker has many addresses, so without this share a few of them would fill the total and
  push every user's events out; users always keep ``bytes_total - bytes_anonymous``;
* the journal holds at most ``bytes_total``: the oldest events of all are dropped first.

An event is charged the length of its JSON (UTF-8) plus :data:`EVENT_OVERHEAD_BYTES`. Both rules
drop the oldest event of some stream, so every cursor still held resumes without a gap. A
message larger than a budget is not kept; the earlier events of its stream go with it (a resume
from them would skip it silently), and it leaves a cursor only, so a client that received it
can still resume after it. A session's events go when it is closed (session ended).

Spec: MCP 2025-11-25 basic/transports#resumability-and-redelivery ("replay messages that would
have been sent after the last event ID, on the stream that was disconnected"; "MUST NOT replay
messages that would have been delivered on a different stream").
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from itertools import count

from mcp.server.streamable_http import EventId, EventMessage, StreamId
from mcp_types import JSONRPCMessage

__all__ = ["EVENT_OVERHEAD_BYTES", "EventJournal", "SessionEvents"]

_ANONYMOUS = "addr:"
"""Prefix of anonymous accounts (:func:`hivegate.mcp.budgets.principal_key`)."""

EVENT_OVERHEAD_BYTES = 400
"""Charged per event on top of its JSON: the event object, its id and its index entries (about
370 bytes on CPython 3.11, measured with ``tracemalloc`` over 20,000 events). Bounds the count of
tiny events too."""


class _Event:
    __slots__ = ("event_id", "message", "sequence", "size", "stream")

    def __init__(self, event_id: str, stream: _Stream, message: JSONRPCMessage | None, size: int, sequence: int):
        self.event_id = event_id
        self.stream = stream
        self.message = message
        self.size = size
        self.sequence = sequence


class _Stream:
    """One SSE stream of one session: its events, oldest first."""

    __slots__ = ("events", "session", "stream_id")

    def __init__(self, session: SessionEvents, stream_id: str) -> None:
        self.session = session
        self.stream_id = stream_id
        self.events: OrderedDict[str, _Event] = OrderedDict()


class _Account:
    __slots__ = ("bytes", "events", "sessions")

    def __init__(self) -> None:
        self.bytes = 0
        self.events: OrderedDict[str, _Event] = OrderedDict()
        self.sessions = 0


class SessionEvents:
    """The kept events of one handshake-era session, by stream.

    Attributes:
        account: the account charged (see the module docstring).
        owner: who may resume the session's streams (opaque to the journal).
    """

    def __init__(self, journal: EventJournal, account: str, owner: str) -> None:
        self._journal = journal
        self.account = account
        self.owner = owner
        self.closed = False
        self._current: dict[str, _Stream] = {}
        """The stream that new events of each stream id join."""
        self._retired: set[_Stream] = set()
        """Earlier streams of a reused stream id that still hold events."""

    def append(self, stream_id: StreamId, message: JSONRPCMessage | None, *, new_stream: bool = False) -> EventId:
        """Keep ``message`` (None: a priming event, a cursor without a message) on stream ``stream_id``.

        ``new_stream`` starts a new stream under that id (a POST's priming event): events of an
        earlier stream with the same id are not replayed after the new one's cursors.
        Returns the event id (random, URL-safe). After :meth:`close`, nothing is kept and the id
        resumes nothing.
        """
        if self.closed:
            return secrets.token_urlsafe(16)
        stream = self._current.get(stream_id)
        if stream is None or new_stream:
            if stream is not None:
                self._retired.add(stream)
            stream = self._current[stream_id] = _Stream(self, stream_id)
        return self._journal.append_event(stream, message)

    def holds(self, event_id: str) -> bool:
        """Whether ``event_id`` is a kept event of this session."""
        event = self._journal.event(event_id)
        return event is not None and event.stream.session is self

    def replay_after(self, event_id: str) -> tuple[StreamId, list[EventMessage]] | None:
        """The stream of ``event_id`` and its later messages, oldest first; None if this session has no such event."""
        event = self._journal.event(event_id)
        if event is None or event.stream.session is not self:
            return None
        later = [
            EventMessage(e.message, e.event_id)
            for e in event.stream.events.values()
            if e.sequence > event.sequence and e.message is not None
        ]
        return event.stream.stream_id, later

    def close(self) -> None:
        """Forget every event of the session (it ended); idempotent."""
        if self.closed:
            return
        self.closed = True
        for stream in [*self._current.values(), *self._retired]:
            self._journal.drop_stream(stream)
        self._current.clear()
        self._retired.clear()
        self._journal.session_closed(self.account)

    def stream_joined(self, stream: _Stream) -> None:
        """The journal kept an event on ``stream`` (it is current again if it was emptied)."""
        self._current.setdefault(stream.stream_id, stream)

    def stream_emptied(self, stream: _Stream) -> None:
        """The journal evicted the last event of ``stream``."""
        if self._current.get(stream.stream_id) is stream:
            del self._current[stream.stream_id]
        self._retired.discard(stream)


class EventJournal:
    """Every kept SSE event of the process, bounded in bytes per account and in total.

    Args:
        bytes_per_account: the most one account's events may weigh (``mcp.event_store_bytes_per_principal``).
        bytes_total: the most all events may weigh (``mcp.event_store_bytes_total``).
        bytes_anonymous: the most all anonymous accounts' events may weigh together (default
            ``bytes_total``).

    Raises:
        ValueError: a budget smaller than one event's overhead, or ``bytes_anonymous`` above the total.
    """

    def __init__(self, bytes_per_account: int, bytes_total: int, *, bytes_anonymous: int | None = None) -> None:
        bytes_anonymous = bytes_total if bytes_anonymous is None else bytes_anonymous
        if min(bytes_per_account, bytes_total, bytes_anonymous) < EVENT_OVERHEAD_BYTES:
            raise ValueError(f"event budgets must be at least {EVENT_OVERHEAD_BYTES} bytes")
        if bytes_anonymous > bytes_total:
            raise ValueError("bytes_anonymous must not exceed bytes_total")
        self._bytes_per_account = bytes_per_account
        self._bytes_total = bytes_total
        self._bytes_anonymous = bytes_anonymous
        self._events: OrderedDict[str, _Event] = OrderedDict()
        self._anonymous_events: OrderedDict[str, _Event] = OrderedDict()
        self._anonymous_bytes = 0
        self._accounts: dict[str, _Account] = {}
        self._bytes = 0
        self._sequence = count()

    @property
    def bytes(self) -> int:
        """What all kept events weigh, in bytes (never above ``bytes_total``)."""
        return self._bytes

    def bytes_of(self, account: str) -> int:
        """What ``account``'s kept events weigh, in bytes (never above ``bytes_per_account``)."""
        found = self._accounts.get(account)
        return found.bytes if found is not None else 0

    def __len__(self) -> int:
        """The number of kept events (cursors included)."""
        return len(self._events)

    def open_session(self, account: str, owner: str) -> SessionEvents:
        """Start keeping the events of a new session charged to ``account``."""
        self._accounts.setdefault(account, _Account()).sessions += 1
        return SessionEvents(self, account, owner)

    # -- the sessions' side ------------------------------------------------------------

    def event(self, event_id: str) -> _Event | None:
        """The kept event ``event_id``, if any (for :class:`SessionEvents`)."""
        return self._events.get(event_id)

    def append_event(self, stream: _Stream, message: JSONRPCMessage | None) -> EventId:
        """Keep ``message`` on ``stream`` (a session's: :meth:`SessionEvents.append`), evicting oldest first."""
        size = EVENT_OVERHEAD_BYTES
        if message is not None:
            size += len(message.model_dump_json(by_alias=True, exclude_unset=True).encode())
        anonymous = stream.session.account.startswith(_ANONYMOUS)
        limit = min(self._bytes_per_account, self._bytes_anonymous if anonymous else self._bytes_total)
        if size > limit:
            # Too large to keep: keep a cursor, and no earlier cursor of the stream (that would skip it).
            self.drop_stream(stream)
            message, size = None, EVENT_OVERHEAD_BYTES
        account = self._accounts[stream.session.account]
        while account.bytes + size > self._bytes_per_account:
            self._evict(next(iter(account.events.values())))
        while anonymous and self._anonymous_bytes + size > self._bytes_anonymous:
            self._evict(next(iter(self._anonymous_events.values())))
        while self._bytes + size > self._bytes_total:
            self._evict(next(iter(self._events.values())))
        event = _Event(secrets.token_urlsafe(16), stream, message, size, next(self._sequence))
        self._events[event.event_id] = event
        account.events[event.event_id] = event
        stream.events[event.event_id] = event
        stream.session.stream_joined(stream)  # evictions above may have emptied it
        account.bytes += size
        self._bytes += size
        if anonymous:
            self._anonymous_events[event.event_id] = event
            self._anonymous_bytes += size
        return event.event_id

    def _evict(self, event: _Event) -> None:
        """Forget ``event`` (always the oldest of its stream: both budgets drop oldest first)."""
        del self._events[event.event_id]
        stream = event.stream
        del stream.events[event.event_id]
        account = self._accounts[stream.session.account]
        del account.events[event.event_id]
        account.bytes -= event.size
        self._bytes -= event.size
        if self._anonymous_events.pop(event.event_id, None) is not None:
            self._anonymous_bytes -= event.size
        if not stream.events:
            stream.session.stream_emptied(stream)

    def drop_stream(self, stream: _Stream) -> None:
        """Forget every event of ``stream``."""
        for event in list(stream.events.values()):
            self._evict(event)

    def session_closed(self, account: str) -> None:
        """A session charged to ``account`` closed (the account goes once it has no sessions and no events)."""
        found = self._accounts.get(account)
        if found is None:
            return
        found.sessions -= 1
        if found.sessions <= 0 and not found.events:
            del self._accounts[account]
