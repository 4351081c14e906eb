"""A2A tasks: who owns one, and the one place the task store is opened.

A task's owner is ``"{owner_of(principal)}/{agent_id}"`` (:func:`task_owner`): the a2a-sdk stores
filter ``get`` and ``list`` by it, so a task is invisible to every other principal *and* through
every other agent (``docs/a2a.md``). :func:`owner_of` is the user id for a user (OAuth token or
``oag_`` key) and for a ``bak_`` key (the key's user); an anonymous caller of an ``auth = "none"``
agent is ``anonymous:`` + its client address key (the key MCP budgets use, an IPv6 address by its
/64), so two anonymous addresses never see each other's tasks.

The binding (:mod:`hivegate.a2a.bindings`) computes the owner once per request and puts it in the
``ServerCallContext``'s state under :data:`OWNER_STATE_KEY`; :func:`owner_from_context` is the
stores' ``owner_resolver``.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.errors import InternalError

from hivegate.auth.principal import CredentialKind, Principal
from hivegate.errors import StoreUnavailableError
from hivegate.mcp.budgets import principal_key
from hivegate.storage.tasks import A2ATasks, GatewayTaskStore

__all__ = ["OWNER_STATE_KEY", "open_task_store", "owner_from_context", "owner_of", "task_owner"]

OWNER_STATE_KEY = "hivegate.task_owner"
"""``ServerCallContext.state`` key of the request's task owner (:func:`task_owner`)."""

_ADDRESS_PREFIX = "addr:"


def owner_of(principal: Principal, client: tuple[str, int] | None) -> str:
    """Whose tasks a caller sees: the user id, or ``anonymous:{address key}`` for an anonymous caller.

    Args:
        client: the ASGI ``scope["client"]`` (only read for an anonymous caller).
    """
    if principal.kind is CredentialKind.NONE or principal.user_id is None:
        return "anonymous:" + principal_key(principal, client).removeprefix(_ADDRESS_PREFIX)
    return principal.user_id


def task_owner(principal: Principal, client: tuple[str, int] | None, agent_id: str) -> str:
    """The owner string of the caller's tasks on ``agent_id``: ``"{owner_of(principal)}/{agent_id}"``."""
    return f"{owner_of(principal, client)}/{agent_id}"


def owner_from_context(context: ServerCallContext) -> str:
    """The stores' ``owner_resolver``: the owner the binding put in the call context.

    Raises:
        KeyError: a context the binding did not build (never served: it would be an unowned task).
    """
    owner: str = context.state[OWNER_STATE_KEY]
    return owner


def open_task_store(tasks: A2ATasks) -> GatewayTaskStore:
    """The gateway's one task store, shared by every agent (owners keep them apart): ``tasks`` of the
    gateway's storage (SQL-persisted; in memory for ``memory://``), with :func:`owner_from_context`
    naming each call's owner (``docs/a2a.md``, "Tasks"), its outages turned into the A2A plane's error."""
    return _OutagesAsA2AErrors(tasks.open(owner_from_context))


STORE_UNAVAILABLE_MESSAGE = "The task store is unavailable; try again later."


@contextmanager
def _outage_as_internal_error() -> Generator[None]:
    try:
        yield
    except StoreUnavailableError:
        raise InternalError(message=STORE_UNAVAILABLE_MESSAGE) from None


class _OutagesAsA2AErrors(GatewayTaskStore):
    """``store`` with a database outage (:class:`~hivegate.errors.StoreUnavailableError`) raised as the
    a2a-sdk's ``InternalError`` with a fixed message.

    The SDK's dispatchers answer any other exception with its ``str()``, which for an outage names the
    database (its URL, on PostgreSQL its host and user: found by issue 9's attack trial), and the
    HTTP+JSON binding with a bare 500. Spec: A2A 1.0 §3.3.2 (InternalError, -32603).
    """

    def __init__(self, store: GatewayTaskStore) -> None:
        self._store = store

    async def save(self, task: Task, context: ServerCallContext) -> None:
        with _outage_as_internal_error():
            await self._store.save(task, context)

    async def save_rendered(self, task: Task, rendered: dict[str, Any], context: ServerCallContext) -> None:
        with _outage_as_internal_error():
            await self._store.save_rendered(task, rendered, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        with _outage_as_internal_error():
            return await self._store.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        with _outage_as_internal_error():
            return await self._store.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        with _outage_as_internal_error():
            await self._store.delete(task_id, context)
