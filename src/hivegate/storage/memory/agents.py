"""``MemoryAgentStore``: the agent registry in process memory, for tests and ephemeral runs."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from hivegate.agents.model import AgentSpec
from hivegate.storage.agents import (
    AgentStore,
    ApplyReport,
    RegistryChanges,
    StoredAgent,
    encode_spec,
    plan_apply,
    require_unique_ids,
)

__all__ = ["MemoryAgentStore"]


@dataclass(frozen=True, slots=True)
class _Entry:
    """One stored agent with its canonical text; ``deleted_at`` set makes it a tombstone."""

    agent: StoredAgent
    text: str
    deleted_at: datetime | None = None


class MemoryAgentStore(AgentStore):
    """An :class:`AgentStore` held in a dict; nothing survives the process.

    Every method runs without awaiting, so each call is atomic with respect to other
    tasks on the event loop and needs no lock. Tombstones are kept for the life of
    the store. Not thread-safe: use it from one event loop.
    """

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._revision = 0

    async def apply(self, specs: Sequence[AgentSpec], *, prune: bool = False) -> ApplyReport:
        """See :meth:`AgentStore.apply`.

        Raises:
            ValueError: when two specs share an id; nothing is written.
        """
        require_unique_ids(specs)
        texts = {spec.id: encode_spec(spec) for spec in specs}
        stored = {i: (e.text if e.deleted_at is None else None) for i, e in self._entries.items()}
        plan = plan_apply(texts, stored, prune=prune)
        if plan.created or plan.updated or plan.deleted:
            self._revision += 1
            now = datetime.now(UTC)
            written = {*plan.created, *plan.updated}
            for spec in specs:
                if spec.id in written:
                    self._entries[spec.id] = _Entry(StoredAgent(spec, self._revision, now), texts[spec.id])
            for agent_id in plan.deleted:
                self._tombstone(agent_id, now)
        return replace(plan, revision=self._revision)

    async def get(self, agent_id: str) -> StoredAgent | None:
        """See :meth:`AgentStore.get`."""
        entry = self._entries.get(agent_id)
        return entry.agent if entry is not None and entry.deleted_at is None else None

    async def list(self) -> builtins.list[StoredAgent]:
        """See :meth:`AgentStore.list`."""
        return [e.agent for _, e in sorted(self._entries.items()) if e.deleted_at is None]

    async def delete(self, agent_id: str) -> bool:
        """See :meth:`AgentStore.delete`."""
        entry = self._entries.get(agent_id)
        if entry is None or entry.deleted_at is not None:
            return False
        self._revision += 1
        self._tombstone(agent_id, datetime.now(UTC))
        return True

    async def revision(self) -> int:
        """See :meth:`AgentStore.revision`."""
        return self._revision

    async def changes_since(self, revision: int) -> RegistryChanges:
        """See :meth:`AgentStore.changes_since`."""
        newer = [(i, e) for i, e in sorted(self._entries.items()) if e.agent.revision > revision]
        return RegistryChanges(
            upserted=tuple(e.agent for _, e in newer if e.deleted_at is None),
            deleted=tuple(i for i, e in newer if e.deleted_at is not None),
            revision=self._revision,
        )

    async def ping(self) -> None:
        """See :meth:`AgentStore.ping`; memory is always reachable."""

    def _tombstone(self, agent_id: str, now: datetime) -> None:
        entry = self._entries[agent_id]
        agent = StoredAgent(entry.agent.spec, self._revision, entry.agent.updated_at)
        self._entries[agent_id] = _Entry(agent, entry.text, deleted_at=now)
