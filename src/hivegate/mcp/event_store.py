"""The SSE event store of one MCP endpoint: events bound to their endpoint, session, stream and principal.

The SDK's ``EventStore`` interface names events by stream id only, and its stream ids repeat
across sessions (a POST's stream is its JSON-RPC request id, the GET stream a constant). So
each request the SDK serves runs under a *binding* (a context variable set by :meth:`handle`):
the endpoint's store and the session's :class:`~hivegate.mcp.event_journal.SessionEvents`,
found by ``Mcp-Session-Id`` when the caller is the principal that opened the session. The SDK
stores a session's events from two places, and both see that binding:

* the request's own task (the priming event of a POST stream or of a resumed stream);
* the session's message router, a task spawned while ``initialize`` was served, which keeps a
  copy of that request's context variables (anyio's ``TaskGroup.start`` runs the new task in a
  copy of the caller's context) and so the binding of the session it opened.

A resume (``GET`` with ``Last-Event-ID``) replays only the later events of the stream that id
belongs to, oldest first, and only if the id belongs to the session named by ``Mcp-Session-Id``
and the caller is the session's principal; otherwise it is refused with 400 ``unknown_event_id``
(JSON-RPC -32600) before the SDK opens a stream. An id that was evicted is unknown too. A
session's events are forgotten when it ends (``DELETE``, idle expiry, shutdown: the SDK unwinds
the session connection's ``exit_stack``).

Principals: a user credential (OAuth token or ``oag_`` key) is its user, a ``bak_`` key is that
key, an anonymous caller (``auth = "none"``) is "anonymous" for binding and its client address
for the byte budget.

Spec: MCP 2025-11-25 basic/transports#resumability-and-redelivery, basic/security_best_practices
#session-hijacking ("bind session IDs to user-specific information").
"""

from __future__ import annotations

import secrets
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http import EventCallback, EventId, EventStore, StreamId
from mcp_types import JSONRPCMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hivegate.auth.principal import CredentialKind, Principal, current_principal
from hivegate.errors import UnknownEventIdError
from hivegate.mcp.budgets import principal_key
from hivegate.mcp.event_journal import EventJournal, SessionEvents
from hivegate.mcp.sdk_bridge import session_connection

__all__ = ["EndpointEventStore", "principal_keys"]

_SESSION_HEADER = b"mcp-session-id"
_LAST_EVENT_HEADER = b"last-event-id"
_VERSION_HEADER = b"mcp-protocol-version"
_CONNECTION_STATE_KEY = "hivegate.session_events"


@dataclass(frozen=True, slots=True)
class _Binding:
    store: EndpointEventStore
    session: SessionEvents | None
    """None: the caller is not the session's principal, or the session is unknown; nothing is kept."""
    method: str


_binding: ContextVar[_Binding | None] = ContextVar("hivegate_sse_binding", default=None)


def principal_keys(principal: Principal, scope: Scope) -> tuple[str, str]:
    """``(owner, account)`` of ``principal``: who may resume a session's streams, and whose budget pays.

    The account is the principal's budget key (:func:`hivegate.mcp.budgets.principal_key`: a user,
    a ``bak_`` key, or an anonymous caller's address), so "per principal" means the same for events
    as for sessions and streams. The owner is the account, except that every anonymous caller is
    ``anonymous`` (an ``auth = "none"`` session is bound by its id alone).
    """
    account = principal_key(principal, scope.get("client"))
    return ("anonymous" if principal.kind is CredentialKind.NONE else account), account


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


class EndpointEventStore(EventStore):
    """The SDK ``EventStore`` of one endpoint's session manager, over the process's :class:`EventJournal`.

    Serve every request to the manager through :meth:`handle`, and add :meth:`track_session` to
    the endpoint server's middleware.
    """

    def __init__(self, journal: EventJournal) -> None:
        self._journal = journal
        self._sessions: dict[str, SessionEvents] = {}
        self._ids: dict[SessionEvents, str] = {}

    async def handle(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request with ``app`` (the SDK session manager) under its event binding.

        Call with the request's principal current (:func:`~hivegate.auth.principal.principal_scope`).

        Raises:
            UnknownEventIdError: a ``GET`` in a known session whose ``Last-Event-ID`` is not an event of
                that session kept for this caller (400, JSON-RPC -32600).
        """
        version = _header(scope, _VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await app(scope, receive, send)  # the 2026-07-28 era keeps no events
            return
        owner, account = principal_keys(current_principal(), scope)
        method: str = scope["method"]
        session_id = _header(scope, _SESSION_HEADER)
        if session_id is None:
            if method != "POST":
                await app(scope, receive, send)
                return
            await self._open(app, scope, receive, send, self._journal.open_session(account, owner))
            return
        session = self._sessions.get(session_id)
        known = session is not None
        if session is not None and session.owner != owner:
            session = None
        last_event_id = _header(scope, _LAST_EVENT_HEADER) if method == "GET" else None
        if last_event_id and known and (session is None or not session.holds(last_event_id)):
            raise UnknownEventIdError("Unknown Last-Event-ID: no such event on this session's streams.")
        if method == "DELETE":
            send = self._end_on_success(session_id, send)
        token = _binding.set(_Binding(self, session, method))
        try:
            await app(scope, receive, send)
        finally:
            _binding.reset(token)

    async def _open(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send, session: SessionEvents) -> None:
        """Serve a request without a session (``initialize``); keep its events if it opens one."""

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers", ()):
                    if name.lower() == _SESSION_HEADER:
                        self._register(value.decode("latin-1"), session)
            await send(message)

        token = _binding.set(_Binding(self, session, "POST"))
        try:
            await app(scope, receive, watched)
        finally:
            _binding.reset(token)
            if session not in self._ids:
                session.close()

    def _register(self, session_id: str, session: SessionEvents) -> None:
        self._sessions[session_id] = session
        self._ids[session] = session_id

    def _end_on_success(self, session_id: str, send: Send) -> Send:
        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                self._end(session_id)
            await send(message)

        return watched

    def _end(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            self._ended(session)

    async def track_session(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: forget a session's events once the SDK ends its connection (DELETE, expiry)."""
        binding = _binding.get()
        if binding is not None and binding.store is self and binding.session is not None:
            connection = session_connection(ctx.session)
            if _CONNECTION_STATE_KEY not in connection.state:
                connection.state[_CONNECTION_STATE_KEY] = binding.session
                connection.exit_stack.callback(self._ended, binding.session)
        return await call_next(ctx)

    def _ended(self, session: SessionEvents) -> None:
        session_id = self._ids.pop(session, None)
        if session_id is not None:
            self._sessions.pop(session_id, None)
        session.close()

    def close(self) -> None:
        """Forget every session's events (the endpoint stopped)."""
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()
        self._ids.clear()

    # -- the SDK's EventStore ----------------------------------------------------------

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Keep an event of the bound session (an unbound one is not kept: its id resumes nothing)."""
        binding = _binding.get()
        if binding is None or binding.store is not self or binding.session is None:
            return secrets.token_urlsafe(16)
        # A priming event minted by a POST opens that request's stream; one minted by a GET resumes one.
        new_stream = message is None and binding.method == "POST"
        return binding.session.append(str(stream_id), message, new_stream=new_stream)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Send the later events of ``last_event_id``'s stream, oldest first, if it is the bound session's."""
        binding = _binding.get()
        if binding is None or binding.store is not self or binding.session is None:
            return None
        found = binding.session.replay_after(last_event_id)
        if found is None:
            return None
        stream_id, later = found
        for event in later:
            await send_callback(event)
        return stream_id
