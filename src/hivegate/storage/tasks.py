"""A2A task persistence: the ``A2ATasks`` protocol, the owner rule's storage side, and the retention rule.

Tasks are a2a-sdk ``Task`` messages kept through the SDK's own ``TaskStore`` interface (``save``,
``get``, ``list``, ``delete``), so the SDK's request handlers use them unchanged. :class:`A2ATasks`
hands out such stores, one per owner resolver, over one shared table, and purges expired tasks.

Implementations: :class:`hivegate.storage.memory.tasks.MemoryA2ATasks` (the SDK's
``InMemoryTaskStore``) and :class:`hivegate.storage.sql.tasks.SqlA2ATasks` (the SDK's
``DatabaseTaskStore`` on the gateway's engine, table ``tasks``, migration ``0007_a2a_tasks``); this
module imports neither. One contract suite (``tests/storage/test_task_store_contract.py``) runs over
memory, SQLite and PostgreSQL.

Owners are opaque strings from the resolver (the A2A bindings use ``"{owner_of(principal)}/{agent_id}"``).
Every operation is confined to the caller's owner: another owner's task is not found by ``get``, not
listed, not deleted, and a ``save`` under a task id another owner holds raises ``TaskNotFoundError``
instead of taking the task over.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from datetime import datetime
from typing import Any, Protocol

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver
from a2a.server.tasks.task_store import TaskStore
from a2a.types.a2a_pb2 import Task, TaskState
from a2a.utils.errors import InvalidParamsError

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_OWNER_LENGTH",
    "TERMINAL_STATES",
    "A2ATasks",
    "GatewayTaskStore",
    "check_context_id",
    "check_ids",
    "is_terminal",
    "stored_owner",
]

MAX_ID_LENGTH = 36
"""Longest task id and context id the ``tasks`` table holds (the SDK's ``String(36)``)."""

MAX_OWNER_LENGTH = 255
"""Longest owner the ``tasks`` table holds; longer owners are stored by digest (:func:`stored_owner`)."""

TERMINAL_STATES: frozenset[TaskState] = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
"""States after which a task never changes again: only such tasks expire."""


class GatewayTaskStore(TaskStore):
    """An a2a-sdk ``TaskStore`` that can also save a task whose JSON form its caller has already made."""

    @abstractmethod
    async def save_rendered(self, task: Task, rendered: dict[str, Any], context: ServerCallContext) -> None:
        """:meth:`save` ``task``, given ``rendered`` = ``MessageToDict(task)`` (so it is not made twice).

        Raises: as :meth:`save`.
        """


class A2ATasks(Protocol):
    """Where the gateway's A2A tasks live: SDK task stores for owner resolvers, over one shared set of tasks."""

    def open(self, owner_resolver: OwnerResolver) -> GatewayTaskStore:
        """An a2a-sdk ``TaskStore`` confining each call to the owner ``owner_resolver`` names for its context.

        Stores opened with different resolvers share the same tasks (an owner's task saved through one
        is found through another that resolves the same owner). SQL stores raise
        :class:`~hivegate.errors.StoreUnavailableError` when the database fails; ``save`` raises
        ``InvalidParamsError`` for an id or context id longer than :data:`MAX_ID_LENGTH` and
        ``TaskNotFoundError`` for a task id another owner holds.
        """
        ...

    async def purge_expired(self, saved_before: datetime) -> int:
        """Delete the tasks in a terminal state (:data:`TERMINAL_STATES`) last saved before ``saved_before``
        (aware); the number deleted. Tasks not yet terminal are kept, however old."""
        ...


def stored_owner(owner: str) -> str:
    """The owner as stored: itself, or ``sha256:<hex>`` when longer than :data:`MAX_OWNER_LENGTH`."""
    if len(owner) <= MAX_OWNER_LENGTH:
        return owner
    return "sha256:" + hashlib.sha256(owner.encode()).hexdigest()


def check_ids(task: Task) -> None:
    """Refuse a task whose id or context id the table cannot hold (both stores apply it alike).

    Raises:
        InvalidParamsError: an empty id, or an id or context id longer than :data:`MAX_ID_LENGTH`.
    """
    if not task.id:
        raise InvalidParamsError("a task needs an id")
    check_context_id(task.id)
    check_context_id(task.context_id)


def check_context_id(context_id: str) -> None:
    """Refuse an id (a message's ``contextId``, before its task is made) the table cannot hold.

    Raises:
        InvalidParamsError: longer than :data:`MAX_ID_LENGTH`.
    """
    if len(context_id) > MAX_ID_LENGTH:
        raise InvalidParamsError(f"task id and context id are at most {MAX_ID_LENGTH} characters")


def is_terminal(task: Task) -> bool:
    """Whether ``task`` is in one of the :data:`TERMINAL_STATES`."""
    return task.status.state in TERMINAL_STATES
