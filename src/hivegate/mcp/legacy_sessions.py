"""Handshake-era sessions of one endpoint, followed from hivegate's pipeline (for the lean legacy path).

:class:`LegacySessions` records the negotiated version when the SDK accepts ``initialize``,
readiness when it accepts ``notifications/initialized``, and the end on ``DELETE``; liveness
is always confirmed against the SDK session manager's own table, and a request served outside
the SDK restarts the session's idle countdown as one served through it would.

:class:`BudgetedSessionManager` is the SDK's session manager that also holds each session's
``sessions`` budget slot (:mod:`hivegate.mcp.budgets`) from the moment it admits the session
until it discards it, whichever way the session ends (``DELETE``, idle expiry, a refused or
failed opening request, a crash, shutdown).

Spec: MCP 2025-11-25 basic/transports#session-management, basic/lifecycle#initialization.
"""

from __future__ import annotations

from typing import Any

from mcp.server.session import ServerSession
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from starlette.types import Message, Send

from hivegate.mcp.budgets import Slot, take_opening_slot
from hivegate.mcp.sdk_bridge import (
    ObservedSessionManager,
    idle_expired,
    live_session_ids,
    restart_idle_countdown,
    session_transport,
)

__all__ = ["BudgetedSessionManager", "LegacySessions", "negotiated_version"]


def negotiated_version(initialize_params: Any) -> str:
    """The version the SDK answers ``initialize`` with: the requested one if it knows it, else its latest."""
    requested = initialize_params.get("protocolVersion") if isinstance(initialize_params, dict) else None
    return requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION


class BudgetedSessionManager(ObservedSessionManager):
    """The SDK's ``StreamableHTTPSessionManager`` (same arguments), holding one budget slot per open session.

    A session takes the slot its opening request was offered (:func:`hivegate.mcp.budgets.opening_session`)
    when the SDK admits it, and returns it when the SDK discards it: every way a session ends goes
    through that one hook (:class:`hivegate.mcp.sdk_bridge.ObservedSessionManager`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots: dict[str, Slot] = {}

    def session_admitted(self, session_id: str) -> None:
        slot = take_opening_slot()
        if slot is not None:
            self._slots[session_id] = slot

    def session_discarded(self, session_id: str) -> None:
        slot = self._slots.pop(session_id, None)
        if slot is not None:  # before any await: the slot is back even if this task is being cancelled
            slot.release()


class LegacySessions:
    """The handshake-era sessions of one endpoint's session manager, as seen from hivegate's pipeline.

    Each session has an owner (the user id on a per-user endpoint, else None: see
    :meth:`hivegate.mcp.surface.McpSurface.owner`), recorded when it opens, and an audience key
    (who hears list-change announcements on its GET stream), recorded when it is served.
    """

    def __init__(self, manager: StreamableHTTPSessionManager, idle_timeout_seconds: float) -> None:
        self._manager = manager
        self._idle_timeout_seconds = idle_timeout_seconds
        self._pending: dict[str, str] = {}
        self._ready: dict[str, str] = {}
        self._owners: dict[str, str | None] = {}
        self._sessions: dict[str, tuple[str | None, ServerSession]] = {}

    def _transport(self, session_id: str) -> StreamableHTTPServerTransport | None:
        return session_transport(self._manager, session_id)

    def watch_initialize(self, params: Any, send: Send, owner: str | None = None) -> Send:
        """Wrap ``send`` of an ``initialize`` POST: remember the session it opens, its version and ``owner``."""
        version = negotiated_version(params)

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message["headers"]:
                    if name.lower() == b"mcp-session-id":
                        self._prune()
                        session_id = value.decode("latin-1")
                        self._pending[session_id] = version
                        self._owners[session_id] = owner
            await send(message)

        return watched

    def watch_initialized(self, session_id: str, send: Send) -> Send:
        """Wrap ``send`` of a ``notifications/initialized`` POST: the session is ready once the SDK accepts it."""

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 202:
                version = self._pending.pop(session_id, None)
                if version is not None:
                    self._ready[session_id] = version
            await send(message)

        return watched

    def forget(self, session_id: str) -> None:
        """The session ended (``DELETE``, or its stream is gone)."""
        self._pending.pop(session_id, None)
        self._ready.pop(session_id, None)
        self._owners.pop(session_id, None)
        self._sessions.pop(session_id, None)

    def belongs_to(self, session_id: str, owner: str | None) -> bool:
        """Whether ``session_id`` was opened by ``owner`` (True for a session opened before hivegate watched)."""
        return self._owners.get(session_id, owner) == owner

    def remember(self, session_id: str, session: ServerSession, audience: str | None = None) -> None:
        """Keep a session handle of ``session_id`` to announce list changes on its GET stream to ``audience``."""
        if session_id not in self._sessions:
            self._prune()
        self._sessions[session_id] = (audience, session)

    def notifiable(self, audiences: frozenset[str] | None = None) -> list[tuple[str, ServerSession]]:
        """The remembered sessions the SDK still holds, of ``audiences`` (None: all), with their handles."""
        live = live_session_ids(self._manager)
        return [
            (sid, session)
            for sid, (audience, session) in self._sessions.items()
            if sid in live and (audiences is None or audience in audiences)
        ]

    def live(self, session_id: str) -> bool:
        """Whether the SDK still holds the session (not ended by ``DELETE``, idle expiry or a restart)."""
        transport = self._transport(session_id)
        return transport is not None and not transport.is_terminated

    def ready_version(self, session_id: str) -> str | None:
        """The negotiated version of an initialized, live session; None otherwise."""
        version = self._ready.get(session_id)
        if version is None:
            return None
        transport = self._transport(session_id)
        if transport is None or transport.is_terminated:
            self._ready.pop(session_id, None)
            return None
        return None if idle_expired(transport) else version

    def touch(self, session_id: str) -> None:
        """Count a request served here as activity (restart the idle countdown unless one is in flight)."""
        transport = self._transport(session_id)
        if transport is not None:
            restart_idle_countdown(transport, self._idle_timeout_seconds)

    def _prune(self) -> None:
        """Drop records of sessions the SDK no longer holds (expired), keeping the tables bounded."""
        live = live_session_ids(self._manager)
        if len(self._pending) + len(self._ready) + len(self._owners) + len(self._sessions) > 4 * len(live) + 64:
            self._pending = {k: v for k, v in self._pending.items() if k in live}
            self._ready = {k: v for k, v in self._ready.items() if k in live}
            self._owners = {k: v for k, v in self._owners.items() if k in live}
            self._sessions = {k: v for k, v in self._sessions.items() if k in live}
