"""A2A tasks in process memory: the SDK's ``InMemoryTaskStore``, shared by every store handed out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.errors import TaskNotFoundError

from hivegate.storage.oauth import require_aware
from hivegate.storage.tasks import GatewayTaskStore, check_ids, is_terminal, stored_owner

__all__ = ["MemoryA2ATasks", "MemoryTaskStore"]

_OWNER_KEY = "hivegate.task_owner"
"""Key of the resolved owner in the contexts handed to the shared SDK store."""


def _owner_in_state(context: ServerCallContext) -> str:
    owner = context.state[_OWNER_KEY]
    assert isinstance(owner, str)
    return owner


def _as(owner: str) -> ServerCallContext:
    return ServerCallContext(state={_OWNER_KEY: owner})


@dataclass(slots=True)
class _Entry:
    owner: str
    saved_at: datetime
    terminal: bool


class MemoryA2ATasks:
    """:class:`~hivegate.storage.tasks.A2ATasks` in memory: one SDK ``InMemoryTaskStore`` (copying) holds
    every task; each store handed out resolves its caller's owner and works on that owner's tasks only."""

    def __init__(self) -> None:
        self._store = InMemoryTaskStore(owner_resolver=_owner_in_state)
        self._entries: dict[str, _Entry] = {}

    def open(self, owner_resolver: OwnerResolver) -> GatewayTaskStore:
        """See :meth:`A2ATasks.open`."""
        return MemoryTaskStore(self, owner_resolver)

    async def purge_expired(self, saved_before: datetime) -> int:
        """See :meth:`A2ATasks.purge_expired`."""
        require_aware(saved_before)
        expired = [
            (task_id, entry.owner)
            for task_id, entry in self._entries.items()
            if entry.terminal and entry.saved_at < saved_before
        ]
        for task_id, owner in expired:
            del self._entries[task_id]
            await self._store.delete(task_id, _as(owner))
        return len(expired)

    async def save_as(self, task: Task, owner: str) -> None:
        check_ids(task)
        entry = self._entries.get(task.id)
        if entry is not None and entry.owner != owner:
            raise TaskNotFoundError()
        self._entries[task.id] = _Entry(owner, datetime.now(UTC), is_terminal(task))
        await self._store.save(task, _as(owner))

    async def get_as(self, task_id: str, owner: str) -> Task | None:
        return await self._store.get(task_id, _as(owner))

    async def list_as(self, params: ListTasksRequest, owner: str) -> ListTasksResponse:
        return await self._store.list(params, _as(owner))

    async def delete_as(self, task_id: str, owner: str) -> None:
        entry = self._entries.get(task_id)
        if entry is None or entry.owner != owner:
            return
        del self._entries[task_id]
        await self._store.delete(task_id, _as(owner))


class MemoryTaskStore(GatewayTaskStore):
    """An a2a-sdk ``TaskStore`` over :class:`MemoryA2ATasks`, confined to the owner its resolver names."""

    def __init__(self, tasks: MemoryA2ATasks, owner_resolver: OwnerResolver) -> None:
        self._tasks = tasks
        self._owner_resolver = owner_resolver

    def _owner(self, context: ServerCallContext) -> str:
        return stored_owner(self._owner_resolver(context))

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Save or replace ``task`` for the caller's owner (``TaskNotFoundError``: another owner's id)."""
        await self._tasks.save_as(task, self._owner(context))

    async def save_rendered(self, task: Task, rendered: dict[str, Any], context: ServerCallContext) -> None:
        """See :meth:`GatewayTaskStore.save_rendered` (the memory store keeps the task itself)."""
        await self.save(task, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The caller's task ``task_id``, or None (also for another owner's task)."""
        return await self._tasks.get_as(task_id, self._owner(context))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks, newest status first, filtered and paginated as the SDK does."""
        return await self._tasks.list_as(params, self._owner(context))

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the caller's task ``task_id`` (nothing for an unknown or another owner's id)."""
        await self._tasks.delete_as(task_id, self._owner(context))
