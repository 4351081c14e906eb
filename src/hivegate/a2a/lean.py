"""hivegate's lean path for a blocking A2A ``SendMessage``: one JSON-RPC object in, the finished task out.

A blocking ``SendMessage`` that starts a new task needs none of the SDK handler's machinery (its
active-task registry, event queues, a producer and a consumer task, a store write and re-read at
every event): nobody can name the task before the answer, which carries it. So such a request is
served here, with the pieces the SDK path uses:

- the params are parsed (``ParseDict``, unknown fields ignored) and checked for required fields as
  the SDK's dispatcher and handler do; the ids are new UUIDs, written into the message as the SDK's
  ``RequestContext`` does;
- the executor's checks (:mod:`hivegate.a2a.executor`: an invocable backend, a message that maps to
  an invocation, a context id the store can hold, an idempotency key) come first, then the call runs
  under the call contract (:func:`~hivegate.a2a.executor.run_call`: its conversation and key; a
  replayed key answers the task its first call made), and :func:`~hivegate.a2a.executor.settle`
  gives the task the end the executor's events fold to on the SDK path (COMPLETED with the
  ``response`` artifact, FAILED with the agent's text, CANCELED), with no events: no reply deltas
  are kept, as the blocking answer has none;
- the finished task is saved **once**, through the gateway's task store (the owner rule and its
  outages as on the SDK path), its JSON form made once for the row and the answer, which is the
  SDK's ``SendMessageResponse`` (``tests/e2e/test_a2a_bindings.py`` compares both paths' answers);
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
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.types.a2a_pb2 import Message as A2AMessage
from a2a.types.a2a_pb2 import SendMessageRequest, Task
from a2a.utils.errors import A2AError, InternalError
from a2a.utils.task import apply_history_length
from google.api.field_behavior_pb2 import FieldBehavior, field_behavior
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message
from starlette.types import Receive, Send

from hivegate.a2a.executor import (
    AGENT_STATE_KEY,
    PRINCIPAL_STATE_KEY,
    TargetLookup,
    invocation_from_message,
    message_key,
    no_invocable_backend,
    resolve_message_attachments,
    run_call,
    settle,
)
from hivegate.a2a.tasks import STORE_UNAVAILABLE_MESSAGE
from hivegate.auth.principal import Principal
from hivegate.calls.cancel import cancel_on_disconnect
from hivegate.calls.contract import Settled
from hivegate.calls.events import CallOutcome
from hivegate.errors import StoreUnavailableError
from hivegate.mcp.fastpath import respond_json
from hivegate.policy.calls import OPEN_POLICY, CallPolicy
from hivegate.storage.tasks import GatewayTaskStore, check_context_id

__all__ = ["LeanSend", "has_required_fields", "lean_send_params"]

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
    except Exception:  # the SDK path parses it again and words the error its own way
        return None
    if not has_required_fields(params):  # the SDK path words the InvalidParamsError
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


@dataclass(frozen=True, slots=True)
class _Plan:
    """What the SDK's ``validate_proto_required_fields`` checks in one message type (its REQUIRED fields
    by kind) and where it recurses (its message-typed fields), read once from the descriptor."""

    repeated: tuple[str, ...]
    present: tuple[str, ...]
    defaults: tuple[tuple[str, Any], ...]
    singles: tuple[str, ...]
    lists: tuple[str, ...]
    maps: tuple[str, ...]


_PLANS: dict[Any, _Plan] = {}


def _plan(descriptor: Any) -> _Plan:
    plan = _PLANS.get(descriptor)
    if plan is not None:
        return plan
    repeated: list[str] = []
    present: list[str] = []
    defaults: list[tuple[str, Any]] = []
    singles: list[str] = []
    lists: list[str] = []
    maps: list[str] = []
    for field in descriptor.fields:
        is_repeated = bool(field.is_repeated)
        behaviors: Any = field.GetOptions().Extensions[field_behavior]  # type: ignore[index]  # a registered extension
        if FieldBehavior.REQUIRED in behaviors:
            if is_repeated:
                repeated.append(field.name)
            elif field.has_presence:
                present.append(field.name)
            else:
                defaults.append((field.name, field.default_value))
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if not is_repeated:
                singles.append(field.name)
            elif field.message_type is not None and field.message_type.GetOptions().map_entry:
                maps.append(field.name)
            else:
                lists.append(field.name)
    plan = _Plan(*map(tuple, (repeated, present, defaults, singles, lists, maps)))  # type: ignore[arg-type]
    _PLANS[descriptor] = plan
    return plan


def has_required_fields(message: Message) -> bool:
    """Whether the SDK's ``validate_proto_required_fields(message)`` finds nothing missing (the same
    walk, with each type's fields read from its descriptor once: the SDK reads them at every call).
    ``tests/a2a/test_lean_params.py`` compares the two on generated requests."""
    plan = _plan(message.DESCRIPTOR)
    if not all(getattr(message, name) for name in plan.repeated):
        return False
    if not all(message.HasField(name) for name in plan.present):
        return False
    if any(getattr(message, name) == default for name, default in plan.defaults):
        return False
    for name in plan.singles:
        if message.HasField(name) and not has_required_fields(getattr(message, name)):
            return False
    for name in plan.lists:
        if not all(has_required_fields(item) for item in getattr(message, name)):
            return False
    for name in plan.maps:
        values = getattr(message, name).values()
        if not all(has_required_fields(value) for value in values if isinstance(value, Message)):
            return False
    return True


class LeanSend:
    """Serves the requests :func:`lean_send_params` chose (module docstring); one per A2A endpoint.

    Args:
        targets: the call target of an agent id (the SDK path's executor uses the same lookup).
        store: the gateway's task store (owner-confined; outages as ``InternalError``).
        policy: resolves the message's ``file_id`` attachments (the binding charged the rate limit).
    """

    def __init__(self, targets: TargetLookup, store: GatewayTaskStore, policy: CallPolicy = OPEN_POLICY) -> None:
        self._targets = targets
        self._store = store
        self._policy = policy

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
            ended = await self._run(params, call_context, receive)
        except A2AError as exc:
            await respond_json(send, 200, build_error_response(request_id, exc))
            return
        except StoreUnavailableError as exc:  # the database failed before the call (its key, its conversation)
            logger.warning("A2A SendMessage to %s refused: %s", call_context.state[AGENT_STATE_KEY], exc.reason)
            error = InternalError(message=STORE_UNAVAILABLE_MESSAGE)
            await respond_json(send, 200, build_error_response(request_id, error))
            return
        except Exception:  # the wire boundary: internals never reach the client
            logger.exception("A2A lean SendMessage failed")
            await respond_json(send, 200, build_error_response(request_id, InternalError()))
            return
        if ended is None:  # the client left; the call was cancelled and its task saved
            return
        task, rendered = ended
        if params.configuration.HasField("history_length"):
            rendered = MessageToDict(apply_history_length(task, params.configuration))
        await respond_json(send, 200, {"jsonrpc": "2.0", "id": request_id, "result": {"task": rendered}})

    async def _run(
        self, params: SendMessageRequest, call_context: ServerCallContext, receive: Receive
    ) -> tuple[Task, dict[str, Any]] | None:
        """The finished task, saved, and its JSON form; None when the client left first (then the task
        is saved CANCELED). The checks come in the SDK path's order (its handler's ``_admit``)."""
        state = call_context.state
        agent_id: str = state[AGENT_STATE_KEY]
        principal: Principal = state[PRINCIPAL_STATE_KEY]
        target = await self._targets(agent_id)
        if target is None:
            raise no_invocable_backend(agent_id)
        message = params.message
        named = message.context_id or None
        context_id = named or str(uuid.uuid4())
        request = invocation_from_message(agent_id, message, context_id, principal)
        check_context_id(context_id)  # before the call, not after it
        key = message_key(message)  # issue 10 item 2
        request = await resolve_message_attachments(self._policy, request)  # issue 10 item 3
        # The ids as the SDK's RequestContext gives them: new, and written into the message kept in history.
        message.task_id = str(uuid.uuid4())
        message.context_id = context_id
        settled: Settled | None = None
        saved: tuple[Task, dict[str, Any]] | None = None
        # Issue 10 item 1: a signed-in caller's named contextId must be one of its conversations; a
        # fresh one starts a conversation; an anonymous caller's only groups its tasks.
        new_context = named is None or principal.user_id is None

        async def keep(outcome: CallOutcome, conversation_id: str | None) -> None:
            # Saved before the key's outcome is recorded: a call waiting on the key then finds this task.
            nonlocal saved
            saved = await self._save(message, conversation_id, outcome, call_context)

        async def work() -> None:
            nonlocal settled
            settled = await run_call(
                self._policy,
                principal,
                target,
                request,
                key=key,
                new_context=new_context,
                task_id=message.task_id,
                keep=keep,
            )

        finished = await cancel_on_disconnect(receive, work)
        if settled is not None and settled.replayed is not None and settled.replayed.task_id is not None:
            replayed = await self._store.get(settled.replayed.task_id, call_context)
            if replayed is not None:  # the task the key's first call made (purged: a new one is made)
                return (replayed, MessageToDict(replayed)) if finished else None
        if saved is None:  # cancelled (CANCELED), a failure of the gateway's call, or a replay of another plane's
            conversation_id = None if settled is None else settled.context_id
            saved = await self._save(
                message, conversation_id, None if settled is None else settled.outcome, call_context
            )
        task, rendered = saved
        return (task, rendered) if finished else None

    async def _save(
        self,
        message: A2AMessage,
        conversation_id: str | None,
        outcome: CallOutcome | None,
        call_context: ServerCallContext,
    ) -> tuple[Task, dict[str, Any]]:
        """The task of ``message`` ended with ``outcome`` (None: CANCELED), saved once, and its JSON form."""
        if conversation_id is not None:
            message.context_id = conversation_id  # a replay's conversation
        task = Task(id=message.task_id, context_id=message.context_id, history=[message])
        settle(task, outcome)
        rendered = MessageToDict(task)
        await self._store.save_rendered(task, rendered, call_context)
        return task, rendered
