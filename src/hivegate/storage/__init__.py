"""Persistence: the store protocols, their memory and SQL implementations, and :func:`open_storage`.

Layout (protocol modules import no implementation; implementations import their protocol):

- :mod:`~hivegate.storage.agents`, :mod:`~hivegate.storage.credentials`, :mod:`~hivegate.storage.oauth`,
  :mod:`~hivegate.storage.tasks`, :mod:`~hivegate.storage.files`, :mod:`~hivegate.storage.calls`: the
  ``AgentStore``, ``CredentialStore``, ``OAuthStore``, ``A2ATasks``, ``FileStore`` and ``CallRecords``
  protocols, their records and errors;
- :mod:`hivegate.storage.memory`: the stores in process memory (``memory://``);
- :mod:`hivegate.storage.sql`: the stores in one SQL database, its engine, tables and migrations.

``open_storage(url)`` returns one :class:`Storage`: the stores on one backend. For a
database URL (``sqlite+aiosqlite:///path.db``, ``postgresql+asyncpg://user@host/db``) it builds
one engine, migrates the database once to the newest schema, and builds the stores on that
engine; :meth:`Storage.close` closes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType

from hivegate.storage.agents import AgentStore, ApplyReport, RegistryChanges, StoredAgent
from hivegate.storage.calls import CallRecords
from hivegate.storage.credentials import CredentialStore
from hivegate.storage.files import FileStore
from hivegate.storage.memory.agents import MemoryAgentStore
from hivegate.storage.memory.calls import MemoryCallRecords
from hivegate.storage.memory.credentials import MemoryCredentialStore
from hivegate.storage.memory.files import MemoryFileStore
from hivegate.storage.memory.oauth import MemoryOAuthStore
from hivegate.storage.memory.tasks import MemoryA2ATasks
from hivegate.storage.oauth import OAuthStore
from hivegate.storage.sql.agents import SqlAgentStore
from hivegate.storage.sql.calls import SqlCallRecords
from hivegate.storage.sql.credentials import SqlCredentialStore
from hivegate.storage.sql.engine import DEFAULT_LIMITS, DatabaseLimits, SqlDatabase
from hivegate.storage.sql.files import SqlFileStore
from hivegate.storage.sql.migrate import migrate
from hivegate.storage.sql.oauth import SqlOAuthStore
from hivegate.storage.sql.tasks import SqlA2ATasks
from hivegate.storage.tasks import A2ATasks

__all__ = [
    "DEFAULT_LIMITS",
    "MEMORY_URL",
    "A2ATasks",
    "AgentStore",
    "ApplyReport",
    "CredentialStore",
    "DatabaseLimits",
    "FileStore",
    "OAuthStore",
    "RegistryChanges",
    "Storage",
    "StoredAgent",
    "open_storage",
]

MEMORY_URL = "memory://"
"""The URL of the stores in process memory (nothing persists)."""


async def _nothing_to_release() -> None:
    """Closing memory stores: there is nothing to release."""


@dataclass(frozen=True, slots=True)
class Storage:
    """The gateway's stores on one backend, and what they share (one engine for SQL).

    Use it as ``async with await open_storage(url) as storage:`` or call :meth:`close` once done.
    """

    agents: AgentStore
    credentials: CredentialStore
    oauth: OAuthStore
    tasks: A2ATasks
    """The A2A tasks: ``storage.tasks.open(owner_resolver)`` is an a2a-sdk ``TaskStore`` (:class:`A2ATasks`)."""
    files: FileStore
    """Uploaded files' records (their bytes are in a blob store: :mod:`hivegate.files.blobs`)."""
    calls: CallRecords
    """What calls leave behind: conversations, their turns, idempotency records (:mod:`hivegate.storage.calls`)."""
    database: str = MEMORY_URL
    """The database URL without its password (``memory://`` for the memory stores)."""
    _release: Callable[[], Awaitable[None]] = field(default=_nothing_to_release, repr=False)

    async def ping(self) -> None:
        """Raise unless the database answers and accepts a write (``/readyz``; :meth:`AgentStore.ping`).

        Raises:
            StoreUnavailableError: the database cannot be reached or refuses the write.
        """
        await self.agents.ping()

    async def close(self) -> None:
        """Close the database connections (the engine's pool). Idempotent."""
        await self._release()

    async def __aenter__(self) -> Storage:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


async def open_storage(url: str, limits: DatabaseLimits = DEFAULT_LIMITS) -> Storage:
    """The stores for ``url``, ready to use; the caller closes them (:meth:`Storage.close`).

    Args:
        url: :data:`MEMORY_URL` (nothing persists), or a database URL as for
            :func:`hivegate.storage.sql.engine.create_sql_engine`; the database is migrated to the
            newest schema first (idempotent), on the one engine the stores then share.
        limits: the database time limits (connect, statement, pool).

    Raises:
        StoreUnavailableError: when the database is unreachable or refuses the migration.
        sqlalchemy.exc.ArgumentError: for a URL that is not a database URL.
        ValueError: for an in-memory SQLite URL (use ``memory://``).
    """
    if url == MEMORY_URL:
        return Storage(
            MemoryAgentStore(),
            MemoryCredentialStore(),
            MemoryOAuthStore(),
            MemoryA2ATasks(),
            MemoryFileStore(),
            MemoryCallRecords(),
        )
    database = SqlDatabase(url, limits)
    try:
        await migrate(database)
    except BaseException:
        await database.close()
        raise
    return Storage(
        SqlAgentStore(database),
        SqlCredentialStore(database),
        SqlOAuthStore(database),
        SqlA2ATasks(database),
        SqlFileStore(database),
        SqlCallRecords(database),
        database.name,
        database.close,
    )
