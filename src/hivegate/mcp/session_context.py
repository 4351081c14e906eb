"""The handshake-era MCP session a request came in, for the handlers that need it (its conversation).

The SDK runs a session's handlers in the session's own task, not the request's, so the session id is
set where each path knows it: :meth:`hivegate.mcp.surface.McpSurface` (the SDK path, per request) and
:func:`hivegate.mcp.legacy_fastpath.serve_legacy_fast` (the lean path). A 2026-07-28 request has no
session: None.

Spec: MCP 2025-11-25 basic/transports#session-management (``Mcp-Session-Id``).
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["current_session", "session_scope"]

_current: ContextVar[str | None] = ContextVar("hivegate_mcp_session", default=None)


def current_session() -> str | None:
    """The ``Mcp-Session-Id`` of the request being served (None outside a handshake-era session)."""
    return _current.get()


@contextmanager
def session_scope(session_id: str | None) -> Generator[None]:
    """Make ``session_id`` the :func:`current_session` inside the ``with`` block."""
    token = _current.set(session_id)
    try:
        yield
    finally:
        _current.reset(token)
