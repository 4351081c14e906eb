"""The agent registry's persistence: the ``AgentStore`` protocol, its records, and the spec rules every
store shares (canonical text, apply plan).

Implementations: :class:`hivegate.storage.memory.agents.MemoryAgentStore` (tests and ephemeral
runs) and :class:`hivegate.storage.sql.agents.SqlAgentStore` (SQLAlchemy 2 async: SQLite via
aiosqlite, PostgreSQL via asyncpg); :func:`hivegate.storage.open_storage` builds one. This module
imports neither. One contract suite (``tests/storage``) runs over both.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from hivegate.agents.model import AgentSpec

__all__ = [
    "AgentStore",
    "ApplyReport",
    "RegistryChanges",
    "StoredAgent",
    "decode_spec",
    "encode_spec",
    "plan_apply",
    "require_unique_ids",
]


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


def encode_spec(spec: AgentSpec) -> str:
    """The canonical JSON text of ``spec``: ``model_dump(mode="json", by_alias=True)``, keys sorted, compact.

    Two specs are the same for the registry exactly when their texts are equal, so
    every store compares specs through this function (``1`` and ``true`` in a JSON
    schema differ here, although they compare equal as Python values).
    """
    document: dict[str, Any] = spec.model_dump(mode="json", by_alias=True)
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def decode_spec(text: str) -> AgentSpec:
    """The spec stored as ``text`` by :func:`encode_spec`.

    Raises:
        pydantic.ValidationError: when the stored document no longer validates
            (a model change without a data migration).
    """
    return AgentSpec.model_validate_json(text)


def require_unique_ids(specs: Sequence[AgentSpec]) -> None:
    """Check that no two of ``specs`` share an id, before a store writes any of them.

    Raises:
        ValueError: naming the duplicated ids.
    """
    duplicates = sorted(agent_id for agent_id, n in Counter(spec.id for spec in specs).items() if n > 1)
    if duplicates:
        raise ValueError(f"duplicate agent ids in one apply: {duplicates}")


def plan_apply(texts: Mapping[str, str], stored: Mapping[str, str | None], *, prune: bool) -> ApplyReport:
    """What an ``apply`` of ``texts`` does to ``stored``, before anything is written.

    Args:
        texts: id → :func:`encode_spec` text of each spec to apply, in the caller's order.
        stored: id → stored text of every stored id that ``texts`` names (and, with
            ``prune``, of every live id); None marks a tombstone.
        prune: delete live ids that ``texts`` does not name.

    Returns:
        The report with ``revision`` 0: ``created``/``updated``/``unchanged`` in the
        order of ``texts`` (a tombstoned id counts as created), ``deleted`` sorted.
    """
    created = tuple(i for i in texts if stored.get(i) is None)
    updated = tuple(i for i, text in texts.items() if stored.get(i) not in (None, text))
    unchanged = tuple(i for i, text in texts.items() if stored.get(i) == text)
    deleted = tuple(sorted(i for i, text in stored.items() if prune and text is not None and i not in texts))
    return ApplyReport(created=created, updated=updated, unchanged=unchanged, deleted=deleted)
