"""The agent registry: the live, in-memory view of the store, kept current, with change events.

Request handling reads agents with :meth:`AgentRegistry.get` (a dict lookup). Writes go to the
store (``apply``/``delete`` here, or the CLI from another process); :meth:`AgentRegistry.refresh`
pulls what changed since the last known revision, and the poll loop calls it every
``poll_interval_seconds`` so changes made elsewhere reach a running server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio

from hivegate.agents.model import AgentSpec
from hivegate.errors import StoreUnavailableError
from hivegate.storage.agents import AgentStore, ApplyReport

__all__ = ["AgentChange", "AgentRegistry"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AgentChange:
    """One agent changed: ``before`` is None for a new agent, ``after`` None for a deleted one."""

    agent_id: str
    before: AgentSpec | None
    after: AgentSpec | None


Listener = Callable[[AgentChange], None]


class AgentRegistry:
    """Live agents by id, refreshed from an :class:`AgentStore`."""

    def __init__(self, store: AgentStore) -> None:
        self._store = store
        self._agents: dict[str, AgentSpec] = {}
        self._revision = 0
        self._listeners: dict[object, Listener] = {}
        self._refresh_lock = anyio.Lock()

    @property
    def store(self) -> AgentStore:
        return self._store

    @property
    def revision(self) -> int:
        """The store revision this view reflects (0 before the first refresh)."""
        return self._revision

    def get(self, agent_id: str) -> AgentSpec | None:
        """The live spec for ``agent_id``, or None."""
        return self._agents.get(agent_id)

    def all(self) -> list[AgentSpec]:
        """Every live spec, ordered by id."""
        return [self._agents[k] for k in sorted(self._agents)]

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` (synchronously, must not raise) on every change; returns an unsubscribe callable."""
        token = object()
        self._listeners[token] = listener
        return lambda: self._listeners.pop(token, None) and None

    async def refresh(self) -> int:
        """Pull changes since the last known revision and emit events; returns the number of changes."""
        async with self._refresh_lock:
            changes = await self._store.changes_since(self._revision)
            emitted = 0
            for stored in changes.upserted:
                before = self._agents.get(stored.spec.id)
                if before != stored.spec:
                    self._agents[stored.spec.id] = stored.spec
                    self._emit(AgentChange(stored.spec.id, before, stored.spec))
                    emitted += 1
            for agent_id in changes.deleted:
                before = self._agents.pop(agent_id, None)
                if before is not None:
                    self._emit(AgentChange(agent_id, before, None))
                    emitted += 1
            self._revision = changes.revision
            return emitted

    async def apply(self, specs: Sequence[AgentSpec], *, prune: bool = False) -> ApplyReport:
        """Write ``specs`` to the store and refresh this view (events fire before returning)."""
        report = await self._store.apply(specs, prune=prune)
        await self.refresh()
        return report

    async def delete(self, agent_id: str) -> bool:
        """Delete ``agent_id`` from the store and refresh this view."""
        deleted = await self._store.delete(agent_id)
        await self.refresh()
        return deleted

    async def poll(self, interval_seconds: float) -> None:
        """Refresh forever, every ``interval_seconds``; store errors are logged and retried."""
        while True:
            await anyio.sleep(interval_seconds)
            try:
                if await self._store.revision() != self._revision:
                    await self.refresh()
            except StoreUnavailableError as exc:  # an outage: the store logs it, /readyz reports it
                logger.debug("agent registry refresh failed; retrying: %s", exc)
            except Exception:  # the poll loop must survive anything else too
                logger.warning("agent registry refresh failed; retrying", exc_info=True)

    def _emit(self, change: AgentChange) -> None:
        for listener in list(self._listeners.values()):
            try:
                listener(change)
            except Exception:  # one bad listener must not starve the others
                logger.exception("agent change listener raised")
