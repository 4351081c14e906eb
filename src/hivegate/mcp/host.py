"""The set of running agent MCP servers: built lazily on first request, kept in step with the registry.

Costs that must not grow with the number of registered agents stay flat: an agent's
runtime is built only when a request first reaches it, and lookups are dict lookups.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream

from hivegate.agents.model import AgentSpec
from hivegate.agents.registry import AgentChange, AgentRegistry
from hivegate.calls.cancel import LeanCalls
from hivegate.errors import AgentServiceUnavailableError
from hivegate.mcp.budgets import McpBudgets
from hivegate.mcp.event_journal import EVENT_OVERHEAD_BYTES, EventJournal
from hivegate.mcp.pagination import CursorCodec
from hivegate.mcp.runtime import AgentRuntime
from hivegate.policy.calls import OPEN_POLICY, CallPolicy
from hivegate.settings import Settings

__all__ = ["AgentHost"]

logger = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 1.0
"""After a backend first fails to start, requests get 503 for this long; then the next request retries."""
RETRY_MAX_SECONDS = 30.0
"""Each further failure doubles the wait, up to this."""


@dataclass(frozen=True, slots=True)
class _Failure:
    """A spec whose backend failed to start, and when (monotonic seconds) the next request may retry it."""

    spec: AgentSpec
    retry_at: float
    delay: float


class AgentHost:
    """Runtimes by agent id. Use as ``async with host.running(): ...``."""

    def __init__(
        self,
        registry: AgentRegistry,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.monotonic,
        policy: CallPolicy = OPEN_POLICY,
    ) -> None:
        self._registry = registry
        self.policy = policy
        """The rate limits and uploaded files every plane checks a call against (:mod:`hivegate.policy.calls`)."""
        self._clock = clock
        self._settings = settings
        self._codec = CursorCodec(settings.security.cursor_key.get_secret_value().encode())
        self.budgets = McpBudgets(settings.mcp)
        """What callers hold open on every MCP endpoint of this process (sessions, streams)."""
        total = settings.mcp.event_store_bytes_total
        self.events = EventJournal(
            settings.mcp.event_store_bytes_per_principal,
            total,
            bytes_anonymous=max(EVENT_OVERHEAD_BYTES, int(total * settings.mcp.anonymous_budget_share)),
        )
        """The process's kept SSE events: every agent endpoint's and ``/mcp``'s (one byte budget)."""
        self.lean_calls = LeanCalls()
        """Handshake-era requests running on the lean path (a ``notifications/cancelled`` cancels one)."""
        self._runtimes: dict[str, AgentRuntime] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._failed: dict[str, _Failure] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        self._changes: MemoryObjectSendStream[AgentChange] | None = None

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[AgentHost]:
        """Own the runtimes' tasks; on exit every runtime is closed."""
        send, receive = anyio.create_memory_object_stream[AgentChange](1024)
        unsubscribe = self._registry.subscribe(self._on_change)
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            self._changes = send
            tg.start_soon(self._apply_changes, receive)
            try:
                yield self
            finally:
                unsubscribe()
                for runtime in list(self._runtimes.values()):
                    await runtime.aclose()
                self._runtimes.clear()
                self._changes = None
                send.close()
                tg.cancel_scope.cancel()
        self._task_group = None

    @property
    def registry(self) -> AgentRegistry:
        """The registry the runtimes follow (the user-level endpoint lists and watches agents through it)."""
        return self._registry

    def cached(self, agent_id: str) -> AgentRuntime | None:
        """The runtime of ``agent_id`` if already built (no I/O)."""
        return self._runtimes.get(agent_id)

    def spec(self, agent_id: str) -> AgentSpec | None:
        """The registered spec of ``agent_id`` (no runtime is built)."""
        return self._registry.get(agent_id)

    async def runtime(self, agent_id: str) -> AgentRuntime | None:
        """The runtime of a registered agent, built on first use; None for an unknown agent.

        A backend that failed to start is retried by the first request after a back-off
        (:data:`RETRY_FIRST_SECONDS`, doubling per failure up to :data:`RETRY_MAX_SECONDS`), or at
        once when the agent's spec changes; each failure is logged with its traceback. Requests
        within the back-off get the error without an import attempt.

        Raises:
            AgentServiceUnavailableError: the agent's backend cannot be loaded or started.
        """
        runtime = self._runtimes.get(agent_id)
        if runtime is not None:
            return runtime
        spec = self._registry.get(agent_id)
        if spec is None or self._task_group is None:
            return None
        failure = self._failed.get(agent_id)
        if failure is not None and failure.spec == spec and self._clock() < failure.retry_at:
            raise AgentServiceUnavailableError()
        lock = self._locks.setdefault(agent_id, anyio.Lock())
        async with lock:
            runtime = self._runtimes.get(agent_id)
            if runtime is None:
                try:
                    runtime = await AgentRuntime.start(
                        spec, self._settings, self._codec, self._task_group, self.events, self.policy
                    )
                except Exception:  # the agent's own code failed to import or start; details stay in the log
                    previous = self._failed.get(agent_id)
                    delay = RETRY_FIRST_SECONDS
                    if previous is not None and previous.spec == spec:
                        delay = min(previous.delay * 2, RETRY_MAX_SECONDS)
                    logger.exception("cannot start agent %s; the first request after %g s tries again", agent_id, delay)
                    self._failed[agent_id] = _Failure(spec, self._clock() + delay, delay)
                    raise AgentServiceUnavailableError() from None
                self._failed.pop(agent_id, None)
                self._runtimes[agent_id] = runtime
        return runtime

    def _on_change(self, change: AgentChange) -> None:
        if change.agent_id in self._runtimes and self._changes is not None:
            try:
                self._changes.send_nowait(change)
            except anyio.WouldBlock:
                logger.warning("agent change backlog full; dropping the runtime of %s", change.agent_id)

    async def _apply_changes(self, receive: anyio.abc.ObjectReceiveStream[AgentChange]) -> None:
        async with receive:
            async for change in receive:
                runtime = self._runtimes.get(change.agent_id)
                if runtime is None:
                    continue
                try:
                    if change.after is None:
                        del self._runtimes[change.agent_id]
                        await runtime.aclose()
                    else:
                        await runtime.update(change.after)
                except Exception:  # a broken new spec must not stop the host from applying later ones
                    logger.exception("cannot apply the change to agent %s; closing its runtime", change.agent_id)
                    self._runtimes.pop(change.agent_id, None)
                    await runtime.aclose()
