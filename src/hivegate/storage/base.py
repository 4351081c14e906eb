"""Storage protocols: what the gateway needs from a store, independent of the mechanism.

Implementations live beside this module: ``memory.py`` (``MemoryAgentStore``, tests
and ephemeral runs) and ``sql.py`` (``SqlAgentStore`` on SQLAlchemy 2 async: SQLite via
aiosqlite, PostgreSQL via asyncpg). One contract suite (``tests/storage``) runs over both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from hivegate.agents.model import AgentSpec

__all__ = ["AgentStore", "ApplyReport", "RegistryChanges", "StoredAgent"]


@dataclass(frozen=True, slots=True)
class StoredAgent:
    """An agent as stored: its spec, the registry revision that last wrote it, and when (aware UTC)."""

    spec: AgentSpec
    revision: int
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ApplyReport:
    """What one ``apply`` did, by agent id; ``revision`` is the registry revision after it."""

    created: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    revision: int = 0


@dataclass(frozen=True, slots=True)
class RegistryChanges:
    """Changes after a known revision: agents written since, ids deleted since, and the current revision."""

    upserted: tuple[StoredAgent, ...] = ()
    deleted: tuple[str, ...] = ()
    revision: int = 0


class AgentStore(Protocol):
    """The agent registry's persistence.

    The registry revision is one integer, strictly increasing, bumped once per
    ``apply`` or ``delete`` that changes anything, in the same transaction as the
    change; readers poll it to learn that something changed (``changes_since``).
    """

    async def apply(self, specs: Sequence[AgentSpec], *, prune: bool = False) -> ApplyReport:
        """Create or update ``specs`` atomically (all or nothing).

        A spec equal to the stored one (same canonical JSON) is ``unchanged`` and does
        not bump the revision. With ``prune``, stored agents absent from ``specs`` are
        deleted in the same transaction. An apply that changes anything bumps the
        revision exactly once, and every agent it writes carries that revision. A
        deleted id given again is ``created``.

        Returns:
            ``created``/``updated``/``unchanged`` in the order of ``specs``,
            ``deleted`` sorted by id, and the revision after the apply.

        Raises:
            ValueError: when two specs share an id (before anything is written).
        """
        ...

    async def get(self, agent_id: str) -> StoredAgent | None:
        """The live agent with this id, or None (also for a deleted one)."""
        ...

    async def list(self) -> list[StoredAgent]:
        """All live agents, ordered by id."""
        ...

    async def delete(self, agent_id: str) -> bool:
        """Delete one agent; False when there was none. Deletions are remembered for ``changes_since``."""
        ...

    async def revision(self) -> int:
        """The current registry revision (0 for an empty, never-written registry)."""
        ...

    async def changes_since(self, revision: int) -> RegistryChanges:
        """Agents written and ids deleted after ``revision``, plus the current revision.

        Both tuples are ordered by id; an id appears in at most one of them (its latest
        state). Passing the returned ``revision`` to the next call yields only later changes.
        """
        ...

    async def ping(self) -> None:
        """Raise if the store cannot be reached (``/readyz``)."""
        ...

    async def close(self) -> None:
        """Release connections. Idempotent."""
        ...
