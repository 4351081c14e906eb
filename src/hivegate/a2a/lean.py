"""hivegate's lean path for a blocking A2A ``SendMessage``: one JSON-RPC object in, the finished task out.

A blocking ``SendMessage`` that starts a new task needs none of the SDK handler's machinery (its
active-task registry, event queues, a producer and a consumer task, a store write and re-read at
every event): nobody can name the task before the answer, which carries it. So such a request is
served here, with the pieces the SDK path uses:

- the params are parsed (``ParseDict``, unknown fields ignored) and checked for required fields as
  the SDK's dispatcher and handler do, and the ids come from the SDK's ``RequestContext``;
- the one executor (:class:`~hivegate.a2a.executor.InvocationExecutor`) runs the call, its events
  folded into the task in memory by the SDK's own ``TaskManager`` (over a store that keeps nothing);
- the finished task is saved **once**, through the gateway's task store (the owner rule and its
  outages as on the SDK path), and the answer is the SDK's ``SendMessageResponse`` as JSON;
- a client that disconnects cancels the call (the backend sees it, as on MCP and ``/v1/invoke``);
  the task is then saved as CANCELED, unanswered.

Taken only when all hold (:func:`lean_send_params`), else the SDK path serves the request, so both
answer alike: the method is ``SendMessage`` with a string or integer id; ``A2A-Version`` is ``1.0``;
no extension is requested (``A2A-Extensions`` / ``X-A2A-Extensions``); the params parse, have their
required fields, no ``tenant``, a message naming no existing task (``taskId`` empty), no
``returnImmediately``, no push-notification config, and a valid ``historyLength``.

What differs from the SDK path, by design (``docs/a2a.md``, "The lean path"): the task is stored
when it ends, so ``GetTask``/``ListTasks`` do not show it while it runs (its id is known to nobody
before the answer); a crash while it runs leaves no task (the SDK path leaves one WORKING forever).

Spec: A2A 1.0 §3.1.1 (SendMessage, blocking), §9.4.1 (JSON-RPC ``SendMessage``), §3.2.6
(``A2A-Version``), §3.3.2 (errors).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.tasks import TaskManager, TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, Task
from a2a.utils.errors import A2AError, InternalError
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.task import apply_history_length
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.types import Receive, Send

from hivegate.a2a.executor import InvocationExecutor
from hivegate.calls.cancel import cancel_on_disconnect
from hivegate.mcp.fastpath import respond_json
from hivegate.storage.tasks import check_context_id, is_terminal

__all__ = ["LeanSend", "lean_send_params"]

logger = logging.getLogger(__name__)

_VERSION_HEADER = "a2a-version"
_EXTENSION_HEADERS = ("a2a-extensions", "x-a2a-extensions")


def lean_send_params(headers: Mapping[str, str], decoded: Any) -> tuple[SendMessageRequest, str | int] | None:
    """The ``SendMessage`` params and id of a request the lean path may serve (module docstring), or None.

    Args:
        headers: the request headers, lower-case names.
        decoded: the parsed JSON body.
    """
    if not isinstance(decoded, dict) or decoded.get("method") != "SendMessage" or decoded.get("jsonrpc") != "2.0":
        return None
    request_id = decoded.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    if headers.get(_VERSION_HEADER) != "1.0" or any(name in headers for name in _EXTENSION_HEADERS):
        return None
    raw = decoded.get("params")
    if not isinstance(raw, dict):
        return None
    try:
        params = ParseDict(raw, SendMessageRequest(), ignore_unknown_fields=True)
        validate_proto_required_fields(params)
    except Exception:  # the SDK path parses it again and words the error its own way
        return None
    configuration = params.configuration
    if (
        params.tenant
        or params.message.task_id
        or configuration.return_immediately
        or configuration.HasField("task_push_notification_config")
        or configuration.history_length < 0
    ):
        return None
    return params, request_id


class _KeepNothing(TaskStore):
    """The store of a lean call's ``TaskManager``: the task lives in the manager until it ends."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        return None

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        return None

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return ListTasksResponse()

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        return None


_KEEP_NOTHING = _KeepNothing()


class _Folding(EventQueue):
    """An event queue that folds each event into the task at once (the SDK's ``TaskManager.process``)."""

    def __init__(self, manager: TaskManager) -> None:
        self._manager = manager

    async def enqueue_event(self, event: Event) -> None:
        await self._manager.process(event)


class LeanSend:
    """Serves the requests :func:`lean_send_params` chose (module docstring); one per A2A endpoint.

    Args:
        executor: the executor the SDK path runs too.
        store: the gateway's task store (owner-confined; outages as ``InternalError``).
    """

    def __init__(self, executor: InvocationExecutor, store: TaskStore) -> None:
        self._executor = executor
        self._store = store

    async def serve(
        self,
        params: SendMessageRequest,
        request_id: str | int,
        call_context: ServerCallContext,
        receive: Receive,
        send: Send,
    ) -> None:
        """Run the message, save its task once, answer the JSON-RPC ``SendMessageResponse``.

        A refusal before the call (no invocable backend, a part that does not convert, a role or
        id the task cannot have) and a store outage are the JSON-RPC error the SDK path gives.
        """
        try:
            task = await self._run(params, call_context, receive)
        except A2AError as exc:
            await respond_json(send, 200, build_error_response(request_id, exc))
            return
        except Exception:  # the wire boundary: internals never reach the client
            logger.exception("A2A lean SendMessage failed")
            await respond_json(send, 200, build_error_response(request_id, InternalError()))
            return
        if task is None:  # the client left; the call was cancelled and its task saved
            return
        result = MessageToDict(SendMessageResponse(task=apply_history_length(task, params.configuration)))
        await respond_json(send, 200, {"jsonrpc": "2.0", "id": request_id, "result": result})

    async def _run(self, params: SendMessageRequest, call_context: ServerCallContext, receive: Receive) -> Task | None:
        """The finished (saved) task, or None when the client left first (the task is saved CANCELED)."""
        context = RequestContext(call_context, request=params)
        task_id, context_id = context.task_id or "", context.context_id or ""  # RequestContext made both
        check_context_id(context_id)  # before the call, not after it
        manager = TaskManager(_KEEP_NOTHING, call_context, task_id, context_id, params.message)
        queue = _Folding(manager)

        async def work() -> None:
            await self._executor.execute(context, queue)

        finished = await cancel_on_disconnect(receive, work)
        task = await manager.get_task()
        if task is None:  # cancelled before the executor made it: nothing to keep
            return None
        if not finished and not is_terminal(task):
            await self._executor.cancel(context, queue)
        await self._store.save(task, call_context)
        return task if finished else None
