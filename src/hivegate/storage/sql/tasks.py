"""A2A tasks in the gateway's database: a2a-sdk's ``DatabaseTaskStore`` on the stores' engine.

Reads (``get``, ``list``: owner filter, newest first, page tokens, the ``contextId``/``status``
filters) are the SDK's, unchanged. Writes are hivegate's, on :data:`~hivegate.storage.sql.task_tables.tasks`:

- ``save`` is one statement in one write transaction: ``INSERT … ON CONFLICT (id) DO UPDATE … WHERE
  tasks.owner = excluded.owner`` (SQLite and PostgreSQL). A crash leaves the old row or the new one;
  a task id another owner holds is refused (``TaskNotFoundError``), where the SDK's ``session.merge``
  (keyed by ``id`` only) would hand the task over to the new owner. It also sets ``saved_at``.
- ``delete`` is one ``DELETE … WHERE id = :id AND owner = :owner``.

The schema belongs to migration ``0007``: the SDK store is built with ``create_table=False`` and never
creates anything. Database failures become :class:`~hivegate.errors.StoreUnavailableError` as in every
SQL store (:class:`~hivegate.storage.sql.engine.SqlStore`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from a2a.compat.v0_3.conversions import to_compat_task_status
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver
from a2a.server.tasks.database_task_store import DatabaseTaskStore
from a2a.server.tasks.task_store import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState, TaskStatus
from a2a.utils.errors import TaskNotFoundError
from sqlalchemy import delete
from sqlalchemy.dialects import postgresql, sqlite

from hivegate.storage.oauth import require_aware
from hivegate.storage.sql.engine import SqlDatabase, SqlStore
from hivegate.storage.sql.task_tables import SDK_ATTRIBUTES, tasks
from hivegate.storage.tasks import TERMINAL_STATES, check_ids, stored_owner

__all__ = ["SqlA2ATasks", "SqlTaskStore"]

TERMINAL_STATE_NAMES = sorted(
    {TaskState.Name(state) for state in TERMINAL_STATES}
    | {to_compat_task_status(TaskStatus(state=state)).state.value for state in TERMINAL_STATES}
)
"""``status.state`` as stored for a terminal task: the 1.0 names, and the v0.3 ones of rows the SDK's
compatibility layer may have written."""


class SqlA2ATasks(SqlStore):
    """:class:`~hivegate.storage.tasks.A2ATasks` in the database: the ``tasks`` table on the shared engine."""

    def open(self, owner_resolver: OwnerResolver) -> TaskStore:
        """See :meth:`A2ATasks.open`."""
        return SqlTaskStore(self._db, owner_resolver)

    async def purge_expired(self, saved_before: datetime) -> int:
        """See :meth:`A2ATasks.purge_expired`: one ``DELETE`` on ``saved_at`` and ``status.state``."""
        require_aware(saved_before)
        state = tasks.c.status["state"].as_string()
        async with self._write_transaction() as conn:
            result = await conn.execute(
                delete(tasks).where(tasks.c.saved_at < saved_before, state.in_(TERMINAL_STATE_NAMES))
            )
        return result.rowcount


class _SdkStore(DatabaseTaskStore):
    """The SDK's store on our engine, never creating the table, and lending its row conversion."""

    def __init__(self, database: SqlDatabase, owner_resolver: OwnerResolver) -> None:
        super().__init__(database.engine, create_table=False, owner_resolver=owner_resolver)

    def row(self, task: Task, owner: str) -> dict[str, Any]:
        """The column values the SDK would store for ``task`` of ``owner``."""
        model = self._to_orm(task, owner)
        return {column: getattr(model, attribute) for column, attribute in SDK_ATTRIBUTES.items()}


class SqlTaskStore(SqlStore, TaskStore):
    """An a2a-sdk ``TaskStore`` on the ``tasks`` table, confined to the owner its resolver names."""

    def __init__(self, database: SqlDatabase, owner_resolver: OwnerResolver) -> None:
        super().__init__(database)
        self._owner_resolver = owner_resolver
        self._sdk = _SdkStore(database, self._owner)

    def _owner(self, context: ServerCallContext) -> str:
        return stored_owner(self._owner_resolver(context))

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Save or replace ``task`` for the caller's owner, in one statement (module docstring).

        Raises:
            InvalidParamsError: an id or context id the table cannot hold.
            TaskNotFoundError: another owner holds a task with this id.
            StoreUnavailableError: the database failed.
        """
        check_ids(task)
        values = self._sdk.row(task, self._owner(context)) | {"saved_at": datetime.now(UTC)}
        async with self._write_transaction() as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            insert = dialect.insert(tasks).values(values)
            upsert = insert.on_conflict_do_update(
                index_elements=[tasks.c.id],
                set_={name: insert.excluded[name] for name in values if name != "id"},
                where=tasks.c.owner == insert.excluded.owner,
            )
            result = await conn.execute(upsert)
            if result.rowcount != 1:
                raise TaskNotFoundError()

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The caller's task ``task_id``, or None (also for another owner's task)."""
        return await self._sdk.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks, newest status first, filtered and paginated by the SDK."""
        return await self._sdk.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the caller's task ``task_id`` (nothing for an unknown or another owner's id)."""
        owner = self._owner(context)
        async with self._write_transaction() as conn:
            await conn.execute(delete(tasks).where(tasks.c.id == task_id, tasks.c.owner == owner))
