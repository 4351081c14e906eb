"""Cancel a call whose client is gone, on the paths that answer without the SDK's transport.

The SDK cancels its own handler tasks (a 2026-07-28 client closing its response stream, a
handshake-era ``notifications/cancelled``). hivegate's lean paths answer one JSON object and do not
run on the SDK's dispatcher, so they use these helpers:

- :func:`cancel_on_disconnect`: a client that disconnects before the answer cancels the work
  (Spec: MCP 2026-07-28 basic/transports: closing the response stream cancels the request; a
  JSON reply cannot be resumed on either era, so nobody is left to read it).
- :class:`LeanCalls`: handshake-era requests in flight on the lean path, by session and request id,
  so a ``notifications/cancelled`` for one of them cancels it (Spec: MCP 2025-11-25
  basic/utilities/cancellation; the cancelled request is then not answered).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio
from starlette.types import Message, Receive, Send

from hivegate.auth.principal import current_principal

__all__ = ["WATCH_AFTER_SECONDS", "LeanCalls", "cancel_on_disconnect"]


WATCH_AFTER_SECONDS = 0.05
"""A call still running after this long starts watching for the client's disconnect. Shorter calls
(most lean requests) pay for a timer only, not a task; a disconnect is noticed this much later at most."""


async def cancel_on_disconnect(receive: Receive, work: Callable[[], Awaitable[None]], *, invokes: bool = True) -> bool:
    """Run ``work``; a client that disconnects while it runs cancels it.

    ``receive`` must have nothing left to deliver but the disconnect (the body has been read; a
    replaying ``receive`` may repeat it first). ``invokes=False`` (a request that runs no agent call,
    so ends promptly) just runs ``work``. Returns True when ``work`` finished, False when the client
    left first. Spec: ASGI HTTP connection scope (``http.disconnect``).
    """
    if not invokes:
        await work()
        return True
    # anyio's scope (level cancellation, shields respected), as the invoke deadline inside it.
    with anyio.CancelScope() as scope:
        await _watched(receive, work, scope)
    return not scope.cancelled_caught


async def _watched(receive: Receive, work: Callable[[], Awaitable[None]], scope: anyio.CancelScope) -> None:
    """Run ``work`` inside ``scope`` (entered by the caller); after :data:`WATCH_AFTER_SECONDS`, a task
    waits for ``http.disconnect`` on ``receive`` and cancels ``scope``.

    asyncio only (uvicorn's loop): anyio has no timer, and a task per call would cost every short
    call what only long ones need.
    """
    loop = asyncio.get_running_loop()
    watcher: asyncio.Task[None] | None = None

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        scope.cancel()

    def start_watching() -> None:
        nonlocal watcher
        watcher = loop.create_task(watch())

    timer = loop.call_later(WATCH_AFTER_SECONDS, start_watching)
    try:
        await work()
    finally:
        timer.cancel()
        if watcher is not None:
            watcher.cancel()


class LeanCalls:
    """Handshake-era requests answered on a lean path while they run, by caller, session and request id.

    One per process. A cancel counts only from the caller (user) that sent the request, in the same
    session (session ids are unguessable), so nobody can cancel another's work.
    """

    def __init__(self) -> None:
        self._running: dict[tuple[str | None, str, str], anyio.CancelScope] = {}

    @contextmanager
    def _track(self, session_id: str, request_id: str | int) -> Generator[anyio.CancelScope]:
        key = (current_principal().user_id, session_id, _id_key(request_id))
        scope = anyio.CancelScope()
        self._running[key] = scope
        try:
            with scope:
                yield scope
        finally:
            if self._running.get(key) is scope:
                del self._running[key]

    async def serve(
        self,
        session_id: str,
        request_id: str | int,
        receive: Receive,
        send: Send,
        work: Callable[[Send], Awaitable[None]],
        *,
        invokes: bool = True,
    ) -> None:
        """Run ``work(send)`` (which answers the request) until it ends, the client disconnects or
        :meth:`cancel` names the request. A request cancelled before its answer started gets ``202
        Accepted`` with no body (Spec: MCP 2025-11-25 basic/utilities/cancellation: a cancelled
        request is not answered). ``invokes=False`` (a request that runs no agent call) just runs ``work``.
        """
        if not invokes:
            await work(send)
            return
        started = False

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        with self._track(session_id, request_id) as scope:
            await _watched(receive, lambda: work(watched_send), scope)
        if scope.cancelled_caught and not started:
            await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})

    def cancel(self, session_id: str | None, message: Mapping[str, Any]) -> bool:
        """Apply ``message`` if it is a ``notifications/cancelled`` for a running request; True if one was cancelled.

        The notification still goes on to the SDK (which answers it, and ignores ids it does not run).
        """
        if session_id is None or message.get("method") != "notifications/cancelled":
            return False
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, Mapping) else None
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return False
        scope = self._running.get((current_principal().user_id, session_id, _id_key(request_id)))
        if scope is None:
            return False
        scope.cancel()
        return True


def _id_key(request_id: str | int) -> str:
    """JSON-RPC ids compare by type and value ("1" is not 1)."""
    return f"{type(request_id).__name__}:{request_id}"
