"""A2A tasks in the gateway's database: a2a-sdk's ``DatabaseTaskStore`` on the stores' engine.

Reads (``get``, ``list``: owner filter, newest first, page tokens, the ``contextId``/``status``
filters) are the SDK's, unchanged. Writes are hivegate's, on :data:`~hivegate.storage.sql.task_tables.tasks`:

- ``save`` is one row of an ``INSERT … ON CONFLICT (id) DO UPDATE … WHERE tasks.owner =
  excluded.owner … RETURNING id`` (SQLite and PostgreSQL). A crash leaves the old row or the new one;
  a task id another owner holds is refused (``TaskNotFoundError``), where the SDK's ``session.merge``
  (keyed by ``id`` only) would hand the task over to the new owner. It also sets ``saved_at``.
- Saves are **group-committed** (:class:`~hivegate.storage.sql.group_commit.GroupCommit`): the
  saves that arrive while one write transaction runs are written together by the next, one statement
  over all their rows, so concurrent saves share one transaction (one ``BEGIN IMMEDIATE``/``COMMIT``,
  one trip to the driver's thread) instead of queueing on SQLite's single writer lock one by one.
  Each ``save`` still returns only once its row is committed; a batch holds each task id at most
  once (a second save of a task waits for the next batch, so saves of one task keep their order).
- ``delete`` is one ``DELETE … WHERE id = :id AND owner = :owner``.

The schema belongs to migration ``0007``: the SDK store is built with ``create_table=False`` and never
creates anything. Database failures become :class:`~hivegate.errors.StoreUnavailableError` as in every
SQL store (:class:`~hivegate.storage.sql.engine.SqlStore`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from a2a.compat.v0_3.conversions import to_compat_task_status
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver
from a2a.server.tasks.database_task_store import DatabaseTaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState, TaskStatus
from a2a.utils.errors import TaskNotFoundError
from google.protobuf.json_format import MessageToDict
from sqlalchemy import Connection, delete
from sqlalchemy.dialects import postgresql, sqlite

from hivegate.storage.oauth import require_aware
from hivegate.storage.sql.engine import SqlDatabase, SqlStore
from hivegate.storage.sql.group_commit import GroupCommit
from hivegate.storage.sql.task_tables import tasks
from hivegate.storage.tasks import TERMINAL_STATES, GatewayTaskStore, check_ids, stored_owner

__all__ = ["SqlA2ATasks", "SqlTaskStore", "task_row"]

TERMINAL_STATE_NAMES = sorted(
    {TaskState.Name(state) for state in TERMINAL_STATES}
    | {to_compat_task_status(TaskStatus(state=state)).state.value for state in TERMINAL_STATES}
)
"""``status.state`` as stored for a terminal task: the 1.0 names, and the v0.3 ones of rows the SDK's
compatibility layer may have written."""


class SqlA2ATasks(SqlStore):
    """:class:`~hivegate.storage.tasks.A2ATasks` in the database: the ``tasks`` table on the shared engine."""

    def __init__(self, database: SqlDatabase) -> None:
        super().__init__(database)
        self._writer = _TaskWriter(database)

    def open(self, owner_resolver: OwnerResolver) -> GatewayTaskStore:
        """See :meth:`A2ATasks.open`."""
        return SqlTaskStore(self._db, owner_resolver, self._writer)

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
    """The SDK's store on our engine (its reads), never creating the table."""

    def __init__(self, database: SqlDatabase, owner_resolver: OwnerResolver) -> None:
        super().__init__(database.engine, create_table=False, owner_resolver=owner_resolver)


def task_row(task: Task, rendered: dict[str, Any], owner: str) -> dict[str, Any]:
    """The ``tasks`` columns (but ``saved_at``) of ``task`` of ``owner``, from ``rendered`` = ``MessageToDict(task)``.

    The values the SDK's ``DatabaseTaskStore._to_orm`` gives its model (its JSON columns hold each
    part's ``MessageToDict``, which is the part's value in the task's own JSON form), without building
    the ORM model or rendering the task a second time; ``tests/storage/test_task_rows.py`` compares
    the two on generated tasks.
    """
    status = task.status
    return {
        "id": task.id,
        "context_id": task.context_id,
        "kind": "task",
        "owner": owner,
        "last_updated": status.timestamp.ToDatetime() if status.HasField("timestamp") else None,
        "status": rendered.get("status", {}),
        "artifacts": rendered.get("artifacts", []),
        "history": rendered.get("history", []),
        "metadata": rendered.get("metadata") if task.metadata.fields else None,
        "protocol_version": "1.0",
    }


class SqlTaskStore(SqlStore, GatewayTaskStore):
    """An a2a-sdk ``TaskStore`` on the ``tasks`` table, confined to the owner its resolver names."""

    def __init__(self, database: SqlDatabase, owner_resolver: OwnerResolver, writer: _TaskWriter) -> None:
        super().__init__(database)
        self._owner_resolver = owner_resolver
        self._sdk = _SdkStore(database, self._owner)
        self._writer = writer

    def _owner(self, context: ServerCallContext) -> str:
        return stored_owner(self._owner_resolver(context))

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Save or replace ``task`` for the caller's owner, in one statement (module docstring).

        Raises:
            InvalidParamsError: an id or context id the table cannot hold.
            TaskNotFoundError: another owner holds a task with this id.
            StoreUnavailableError: the database failed.
        """
        await self.save_rendered(task, MessageToDict(task), context)

    async def save_rendered(self, task: Task, rendered: dict[str, Any], context: ServerCallContext) -> None:
        """See :meth:`GatewayTaskStore.save_rendered`; raises as :meth:`save`."""
        check_ids(task)
        values = task_row(task, rendered, self._owner(context)) | {"saved_at": datetime.now(UTC)}
        if not await self._writer.save(values):
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


MAX_BATCH_ROWS = 256
"""Most task rows one group-committed write transaction holds."""


class _TaskWriter:
    """The ``tasks`` table's one writer: a :class:`GroupCommit` of upserts (module docstring)."""

    def __init__(self, database: SqlDatabase) -> None:
        self._statements: dict[str, Any] = {}
        self._group: GroupCommit[dict[str, Any], bool] = GroupCommit(
            database, self._write, keys=_task_id, max_batch=MAX_BATCH_ROWS, name="hivegate-task-writer"
        )

    async def save(self, row: dict[str, Any]) -> bool:
        """Queue ``row`` (every column of ``tasks``) and wait until its batch is committed.

        Returns:
            True when the row is stored; False when another owner holds its task id.

        Raises:
            StoreUnavailableError: the database failed while writing its batch.
        """
        return await self._group.submit(row)

    def _write(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> list[bool]:
        """Upsert ``rows`` in the batch's transaction; whether each is stored (not when another owner holds its id)."""
        result = conn.execute(self._upsert(conn.dialect.name), list(rows))
        stored = {row.id for row in result}
        return [row["id"] in stored for row in rows]

    def _upsert(self, dialect_name: str) -> Any:
        statement = self._statements.get(dialect_name)
        if statement is None:
            dialect = postgresql if dialect_name == "postgresql" else sqlite
            insert = dialect.insert(tasks)
            statement = insert.on_conflict_do_update(
                index_elements=[tasks.c.id],
                set_={column.name: insert.excluded[column.name] for column in tasks.columns if column.name != "id"},
                where=tasks.c.owner == insert.excluded.owner,
            ).returning(tasks.c.id)
            self._statements[dialect_name] = statement
        return statement


def _task_id(row: dict[str, Any]) -> tuple[str]:
    """A batch holds each task id at most once (a second save of a task waits for the next batch)."""
    return (row["id"],)
