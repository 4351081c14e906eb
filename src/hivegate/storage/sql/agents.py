"""``SqlAgentStore``: the agent registry in SQLite (aiosqlite) or PostgreSQL (asyncpg) via SQLAlchemy 2 async.

The schema is created by the Alembic migrations (:mod:`hivegate.storage.sql.migrate`), not
here; :func:`hivegate.storage.open_storage` runs them before building the stores.

Writers serialize on the registry revision: on PostgreSQL each write transaction
starts with ``SELECT ... FOR UPDATE`` on the ``registry_state`` row; on SQLite each
write transaction starts with ``BEGIN IMMEDIATE`` (taking the database's write lock
up front, waiting up to the busy timeout), so concurrent writers queue instead of
failing with "database is locked".
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, Select, bindparam, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from hivegate.agents.model import AgentSpec
from hivegate.storage.agents import (
    AgentStore,
    ApplyReport,
    RegistryChanges,
    StoredAgent,
    decode_spec,
    encode_spec,
    plan_apply,
    require_unique_ids,
)
from hivegate.storage.sql.engine import SqlStore
from hivegate.storage.sql.tables import REGISTRY_STATE_ID, agents, registry_state

__all__ = ["SqlAgentStore"]


class SqlAgentStore(SqlStore, AgentStore):
    """An :class:`AgentStore` in a SQL database; the schema must already be migrated.

    Its :class:`~hivegate.storage.sql.engine.SqlDatabase` is shared with the other stores. Every
    method raises :class:`~hivegate.errors.StoreUnavailableError` when the database fails or does
    not answer within its limits (:class:`~hivegate.storage.sql.engine.SqlStore`); a failed
    ``apply`` or ``delete`` writes nothing.
    """

    async def apply(self, specs: Sequence[AgentSpec], *, prune: bool = False) -> ApplyReport:
        """See :meth:`AgentStore.apply`; one transaction.

        Raises:
            ValueError: when two specs share an id; nothing is written.
        """
        require_unique_ids(specs)
        texts = {spec.id: encode_spec(spec) for spec in specs}
        async with self._registry_transaction() as (conn, current):
            query = select(agents.c.id, agents.c.spec, agents.c.deleted_at)
            if prune:
                query = query.where(or_(agents.c.id.in_(texts), agents.c.deleted_at.is_(None)))
            else:
                query = query.where(agents.c.id.in_(texts))
            rows = (await conn.execute(query)).all()
            plan = plan_apply(texts, {r.id: r.spec if r.deleted_at is None else None for r in rows}, prune=prune)
            if not (plan.created or plan.updated or plan.deleted):
                return replace(plan, revision=current)
            revision = current + 1
            await _write_plan(conn, plan, texts, {r.id for r in rows}, revision)
        return replace(plan, revision=revision)

    async def get(self, agent_id: str) -> StoredAgent | None:
        """See :meth:`AgentStore.get`."""
        query = _live_agents().where(agents.c.id == agent_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return _stored_agent(row) if row is not None else None

    async def list(self) -> builtins.list[StoredAgent]:
        """See :meth:`AgentStore.list`."""
        async with self._engine.connect() as conn:
            rows = (await conn.execute(_live_agents().order_by(agents.c.id))).all()
        return [_stored_agent(row) for row in rows]

    async def delete(self, agent_id: str) -> bool:
        """See :meth:`AgentStore.delete`; one transaction."""
        async with self._registry_transaction() as (conn, current):
            live = (await conn.execute(_live_agents().where(agents.c.id == agent_id))).first()
            if live is None:
                return False
            now = datetime.now(UTC)
            await conn.execute(
                update(agents).where(agents.c.id == agent_id).values(revision=current + 1, deleted_at=now)
            )
            await _set_revision(conn, current + 1)
        return True

    async def revision(self) -> int:
        """See :meth:`AgentStore.revision`."""
        async with self._engine.connect() as conn:
            return await _read_revision(conn)

    async def changes_since(self, revision: int) -> RegistryChanges:
        """See :meth:`AgentStore.changes_since`; ``upserted`` and ``deleted`` are ordered by id.

        The revision is read first and rows newer than it are left for the next call,
        so a concurrent writer can never make a change look older than the returned
        revision (PostgreSQL reads at READ COMMITTED, one snapshot per statement).
        """
        async with self._engine.connect() as conn:
            current = await _read_revision(conn)
            query = (
                select(agents).where(agents.c.revision > revision, agents.c.revision <= current).order_by(agents.c.id)
            )
            rows = (await conn.execute(query)).all()
        return RegistryChanges(
            upserted=tuple(_stored_agent(r) for r in rows if r.deleted_at is None),
            deleted=tuple(r.id for r in rows if r.deleted_at is not None),
            revision=current,
        )

    async def ping(self) -> None:
        """See :meth:`AgentStore.ping`: a write that changes nothing (``UPDATE registry_state SET
        revision = revision``), rolled back, so a database that answers reads but refuses writes
        (read-only file or server, locked, permission revoked) is reported too.

        Raises:
            StoreUnavailableError: the database cannot be reached or refuses the write.
        """
        probe = (
            update(registry_state)
            .where(registry_state.c.id == REGISTRY_STATE_ID)
            .values(revision=registry_state.c.revision)
        )
        async with self._engine.connect() as conn:
            await self._probe_write(conn, probe)

    @asynccontextmanager
    async def _registry_transaction(self) -> AsyncGenerator[tuple[AsyncConnection, int]]:
        """A write transaction holding the registry lock, with the revision before it; commits on exit."""
        async with self._write_transaction() as conn:
            query = select(registry_state.c.revision).where(registry_state.c.id == REGISTRY_STATE_ID).with_for_update()
            yield conn, (await conn.execute(query)).scalar_one()


def _live_agents() -> Select[str, int, datetime]:
    return select(agents.c.spec, agents.c.revision, agents.c.updated_at).where(agents.c.deleted_at.is_(None))


async def _write_plan(
    conn: AsyncConnection, plan: ApplyReport, texts: dict[str, str], row_ids: set[str], revision: int
) -> None:
    """Write ``plan`` as ``revision``: insert new ids, overwrite stored rows and tombstones, tombstone deletions."""
    now = datetime.now(UTC)
    inserts = [i for i in plan.created if i not in row_ids]
    overwrites = [i for i in (*plan.created, *plan.updated) if i in row_ids]
    if inserts:
        values = [{"id": i, "spec": texts[i], "revision": revision, "updated_at": now} for i in inserts]
        await conn.execute(insert(agents), values)
    if overwrites:
        overwrite = (
            update(agents)
            .where(agents.c.id == bindparam("key"))
            .values(spec=bindparam("new_spec"), revision=revision, updated_at=now, deleted_at=None)
        )
        await conn.execute(overwrite, [{"key": i, "new_spec": texts[i]} for i in overwrites])
    if plan.deleted:
        await conn.execute(
            update(agents).where(agents.c.id.in_(plan.deleted)).values(revision=revision, deleted_at=now)
        )
    await _set_revision(conn, revision)


def _stored_agent(row: Row[*tuple[Any, ...]]) -> StoredAgent:
    """The agent in a row with ``spec``, ``revision`` and ``updated_at`` columns."""
    return StoredAgent(spec=decode_spec(row.spec), revision=row.revision, updated_at=row.updated_at)


async def _read_revision(conn: AsyncConnection) -> int:
    query = select(registry_state.c.revision).where(registry_state.c.id == REGISTRY_STATE_ID)
    return (await conn.execute(query)).scalar_one()


async def _set_revision(conn: AsyncConnection, revision: int) -> None:
    query = update(registry_state).where(registry_state.c.id == REGISTRY_STATE_ID).values(revision=revision)
    await conn.execute(query)
