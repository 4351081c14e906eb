"""Persistence for the agent registry: the ``AgentStore`` protocol and its stores.

``create_agent_store(url)`` picks the store from the URL: ``memory://`` for
:class:`MemoryAgentStore`, any SQLAlchemy async URL (``sqlite+aiosqlite:///path.db``,
``postgresql+asyncpg://user@host/db``) for :class:`SqlAgentStore`, after migrating
the database to the newest schema.
"""

from __future__ import annotations

from hivegate.storage.base import AgentStore, ApplyReport, RegistryChanges, StoredAgent
from hivegate.storage.engine import DEFAULT_LIMITS, DatabaseLimits
from hivegate.storage.memory import MemoryAgentStore
from hivegate.storage.migrate import upgrade
from hivegate.storage.sql import SqlAgentStore

__all__ = [
    "AgentStore",
    "ApplyReport",
    "DatabaseLimits",
    "MemoryAgentStore",
    "RegistryChanges",
    "SqlAgentStore",
    "StoredAgent",
    "create_agent_store",
]

MEMORY_URL = "memory://"


async def create_agent_store(url: str, limits: DatabaseLimits = DEFAULT_LIMITS) -> AgentStore:
    """The store for ``url``, ready to use; the caller closes it.

    Args:
        url: ``memory://`` (nothing persists), or a database URL as for
            :func:`hivegate.storage.engine.create_sql_engine`; the database is migrated
            to the newest schema first (idempotent).
        limits: the database time limits (connect, statement, pool).

    Raises:
        StoreUnavailableError: when the database is unreachable or refuses the migration.
        sqlalchemy.exc.ArgumentError: for a URL that is not a database URL.
        ValueError: for an in-memory SQLite URL (use ``memory://``).
    """
    if url == MEMORY_URL:
        return MemoryAgentStore()
    await upgrade(url, limits=limits)
    return SqlAgentStore(url, limits)
