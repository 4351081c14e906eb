"""The upstream clients of one ``mcp`` agent: one for the agent, or one per user (``isolation = "per_user"``,
stdio), each opened by the first request that needs it, kept, and opened again after it is lost.

:class:`UpstreamPool` keeps the clients' restart state (:class:`UpstreamConnection`, which outlives each
client): the back-off after an upstream that fails to open or dies young, the room for at most
``max_processes`` processes (the least recently used idle one is stopped for a new one), the stop of a
stdio process idle for ``idle_stop_seconds``, and the bounded wait for every process to stop when the
agent closes. How a client is opened and held is the backend's
(:class:`~hivegate.backends.mcp_upstream.McpUpstreamBackend`), given as ``hold``.

Errors (the catalogue): no client can be had (the back-off runs, all processes are busy, the agent is
closing, an anonymous caller of a per_user agent) is ``agent_service_unavailable``; opening takes
longer than ``timeout_seconds``, ``service_timeout``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import anyio
import anyio.abc
from mcp import Client

from hivegate.agents.model import McpBackendSpec
from hivegate.auth.principal import current_principal
from hivegate.backends.base import failure_line
from hivegate.backends.stdio_upstream import KILL_GRACE_SECONDS, STOP_GRACE_SECONDS, StdioTransport
from hivegate.errors import AgentServiceUnavailableError, ServiceTimeoutError

__all__ = ["Hold", "UpstreamConnection", "UpstreamPool"]

logger = logging.getLogger(__name__)

_RETRY_FIRST_SECONDS = 1.0
_RETRY_MAX_SECONDS = 30.0
_SHORT_LIVED_SECONDS = 10.0
"""A connection lost sooner than this after it opened counts towards the restart back-off."""
_EVICTABLE_AFTER_SECONDS = 1.0
"""A per_user process with no request for this long may be stopped to make room for another user's."""
_CLOSE_SECONDS = STOP_GRACE_SECONDS + KILL_GRACE_SECONDS + 3.0
"""The longest :meth:`UpstreamPool.aclose` waits for the processes to stop (their stop is bounded)."""

Hold = Callable[..., Coroutine[Any, Any, None]]
"""``hold(conn, *, task_status)``: open ``conn``'s client, hand it over with ``task_status.started(client)``,
and keep it open until ``conn.lost`` is set (run in the runtime's task group by :meth:`UpstreamPool.connected`)."""


class UpstreamPool:
    """The upstream clients of one agent (module docstring).

    Args:
        agent_id: the gateway's agent (for the logs).
        spec: the ``mcp`` backend spec (``isolation``, ``max_processes``, ``idle_stop_seconds``,
            ``timeout_seconds``).
        hold: opens and holds one client (:data:`Hold`).
    """

    def __init__(self, agent_id: str, spec: McpBackendSpec, hold: Hold) -> None:
        self._agent_id = agent_id
        self._spec = spec
        self._hold = hold
        self._task_group: anyio.abc.TaskGroup | None = None
        # The clients by caller key (caller_key): "" for the agent's one, the user's id per_user.
        self._connections: dict[str, UpstreamConnection] = {}
        self.running: set[anyio.Event] = set()
        """One event per client task still running: set once its client (and process) is closed."""
        self._closed = False

    def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Remember ``task_group``: each client is held by a task of it."""
        self._task_group = task_group

    def connections(self) -> list[UpstreamConnection]:
        """Every connection with restart state (open or not)."""
        return list(self._connections.values())

    async def aclose(self) -> None:
        """Stop every client, and wait (bounded) until each stdio process is stopped: its stdin closed, then
        its process group ended. Idempotent."""
        self._closed = True
        for conn in list(self._connections.values()):
            self.stop(conn)
        running = list(self.running)
        with anyio.move_on_after(_CLOSE_SECONDS, shield=True):
            for stopped in running:
                await stopped.wait()

    async def connected(self) -> Client:
        """The caller's upstream client (the agent's, or per_user the user's), opened when there is none (a
        process started), unless the back-off after failures to open it is running."""
        key = self.caller_key()
        if key is None:
            raise AgentServiceUnavailableError("this agent runs a process per user: an anonymous caller has none")
        while True:
            conn = self._connections.get(key)
            if conn is not None and conn.client is not None:
                conn.last_used = time.monotonic()
                return conn.client
            if self._closed or self._task_group is None:
                raise AgentServiceUnavailableError()
            if conn is None:
                self._prune()
                conn = self._connections[key] = UpstreamConnection(key)
            async with conn.connecting:
                if self._connections.get(key) is not conn:  # stopped while this call waited: start over
                    continue
                if conn.client is not None:
                    conn.last_used = time.monotonic()
                    return conn.client
                return await self._open(conn)

    async def _open(self, conn: UpstreamConnection) -> Client:
        """Open ``conn``'s client (its lock held), unless its back-off is running or there is no room."""
        if self._closed or self._task_group is None or time.monotonic() < conn.retry_at:
            raise AgentServiceUnavailableError()
        self._make_room(conn)
        try:
            with anyio.fail_after(self._spec.timeout_seconds):
                client = await self._task_group.start(self._hold, conn)
        except Exception as exc:  # the upstream could not be reached, started or spoken to
            conn.retry_at = time.monotonic() + conn.retry_pause
            conn.retry_pause = min(conn.retry_pause * 2, _RETRY_MAX_SECONDS)
            logger.warning("agent %s: the upstream MCP server cannot be opened: %s", self._agent_id, failure_line(exc))
            if isinstance(exc, TimeoutError):
                raise ServiceTimeoutError(self._spec.timeout_seconds) from None
            raise AgentServiceUnavailableError() from None
        finally:
            conn.opening = False
        if self._closed or self._connections.get(conn.key) is not conn:  # closed while it opened
            if conn.lost is not None:
                conn.lost.set()
            raise AgentServiceUnavailableError()
        conn.retry_pause = _RETRY_FIRST_SECONDS
        conn.client = client
        conn.opened_at = conn.last_used = time.monotonic()
        return client

    def _make_room(self, conn: UpstreamConnection) -> None:
        """Count ``conn`` among the agent's processes; past ``max_processes``, stop the least recently used
        idle one (no request in flight, none for :data:`_EVICTABLE_AFTER_SECONDS`), or refuse when all are
        busy (``agent_service_unavailable``)."""
        while True:
            others = [c for c in self._connections.values() if c is not conn and (c.client is not None or c.opening)]
            if len(others) < self._spec.max_processes:
                conn.opening = True
                return
            now = time.monotonic()
            idle = [c for c in others if c.client is not None and c.idle_for(now) >= _EVICTABLE_AFTER_SECONDS]
            if not idle:
                logger.warning(
                    "agent %s: its %d upstream processes are all busy: one more is refused",
                    self._agent_id,
                    len(others),
                )
                raise AgentServiceUnavailableError()
            victim = max(idle, key=lambda c: c.idle_for(now))
            logger.info("agent %s: stopping its least recently used upstream process to make room", self._agent_id)
            self.stop(victim)

    def _prune(self) -> None:
        """Let go of the restart state of connections that are down and not backing off, once there are many
        (per_user: one per user who called)."""
        if len(self._connections) < 2 * self._spec.max_processes:
            return
        now = time.monotonic()
        for key, conn in list(self._connections.items()):
            if conn.client is None and not conn.opening and not conn.connecting.locked() and conn.retry_at <= now:
                del self._connections[key]

    async def supervise(self, conn: UpstreamConnection, client: Client, transport: StdioTransport) -> None:
        """A stdio upstream's process: when it ends (it exited, or was cut off), its connection is lost at once
        (the next call starts a new process, after the back-off); when it has had no request for
        ``idle_stop_seconds``, it is stopped."""
        idle_stop = self._spec.idle_stop_seconds
        wait = idle_stop if idle_stop > 0 else math.inf
        while True:
            with anyio.move_on_after(wait):
                await transport.ended.wait()
            if conn.client is not client:
                return
            if transport.ended.is_set():
                logger.warning(
                    "agent %s: the stdio upstream (pid %s) ended%s",
                    self._agent_id,
                    transport.pid,
                    "" if transport.cut_off is None else f": cut off ({transport.cut_off})",
                )
                self.forget(client)
                return
            idle_for = conn.idle_for(time.monotonic())
            if idle_for >= idle_stop:
                logger.info(
                    "agent %s: the stdio upstream (pid %s) had no request for %.1f s: stopping it",
                    self._agent_id,
                    transport.pid,
                    idle_for,
                )
                self.stop(conn)
                return
            wait = idle_stop - idle_for

    def stop(self, conn: UpstreamConnection) -> None:
        """Let ``conn`` go and close its client (its process is stopped): the next request opens a new one, at
        once (an idle or evicted process, or the backend closing)."""
        if self._connections.get(conn.key) is conn:
            del self._connections[conn.key]
        conn.client = None
        if conn.lost is not None:
            conn.lost.set()

    def forget(self, client: Client) -> None:
        """The connection of ``client`` failed (a stdio upstream crashed): the next request opens a new one,
        at once the first time; when the new one fails too within :data:`_SHORT_LIVED_SECONDS`, after a
        back-off that doubles (1 s to 30 s), so a process that dies at once is not restarted by every call.
        Each connection (per_user: each user's) has its own back-off."""
        conn = next((c for c in self._connections.values() if c.client is client), None)
        if conn is None:
            return
        conn.client = None
        now = time.monotonic()
        conn.short_lived = conn.short_lived + 1 if now - conn.opened_at < _SHORT_LIVED_SECONDS else 0
        if conn.short_lived > 1:  # the process it was restarted into died young too
            conn.retry_at = now + min(_RETRY_FIRST_SECONDS * 2 ** (conn.short_lived - 2), _RETRY_MAX_SECONDS)
        if conn.lost is not None:
            conn.lost.set()

    def caller_key(self) -> str | None:
        """Which connection serves the caller: ``""``, the agent's one; per_user (stdio), the caller's user id
        (None for an anonymous caller, which has none)."""
        if self._spec.isolation != "per_user" or self._spec.command is None:
            return ""
        return current_principal().user_id

    def caller_connection(self) -> UpstreamConnection | None:
        """The caller's connection, when it has one."""
        key = self.caller_key()
        return None if key is None else self._connections.get(key)


class UpstreamConnection:
    """One upstream client of an agent (per_user: of one user) and its restart state, which outlives it."""

    __slots__ = (
        "client",
        "connecting",
        "key",
        "last_used",
        "lists",
        "lost",
        "opened_at",
        "opening",
        "retry_at",
        "retry_pause",
        "schemas",
        "short_lived",
        "transport",
    )

    def __init__(self, key: str) -> None:
        self.key = key
        self.client: Client | None = None
        self.transport: StdioTransport | None = None
        self.lost: anyio.Event | None = None
        self.connecting = anyio.Lock()
        self.opening = False
        self.retry_at = 0.0
        self.retry_pause = _RETRY_FIRST_SECONDS
        self.opened_at = 0.0
        self.short_lived = 0
        self.last_used = time.monotonic()
        self.lists: dict[tuple[str, str | None], tuple[float, Any]] = {}
        self.schemas: dict[str, Mapping[str, Any]] = {}

    def idle_for(self, now: float) -> float:
        """Seconds since its last request or answer (0 while a request to a stdio process is in flight)."""
        transport = self.transport
        if transport is None:
            return now - self.last_used
        if transport.busy:
            return 0.0
        return now - max(self.last_used, transport.last_active)
