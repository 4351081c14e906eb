"""The one A2A executor: an A2A message runs through the invocation layer, as MCP's ``tools/call`` does.

Mapping (``docs/a2a.md``, "How MCP and A2A map"):

- the call runs under the call contract (:mod:`hivegate.calls.contract`, :func:`run_call`): ``contextId``
  is the conversation (a signed-in caller's must name one of its conversations with the agent; a new
  task's fresh ``contextId`` starts one), and the message's ``metadata.idempotency_key`` is the call's
  idempotency key (:func:`message_key`);
- the message's text parts, joined by ``\\n``, are the :class:`~hivegate.backends.base.Invocation`'s
  ``message`` (the MCP message tool's ``message``); ``contextId`` is its ``context_id``; ``raw`` and
  ``url`` parts are ``attachments`` (base64 ``data`` or ``uri``, with ``filename`` and
  ``mediaType``); a ``url`` part ``hivegate:file/<file_id>`` names an uploaded file (resolved to its
  bytes by the policy: :func:`resolve_message_attachments`); a ``data`` part is an ``application/json``
  attachment of its JSON (base64);
- :func:`~hivegate.calls.invoke.invoke` runs it with the agent's call target, its deadline and
  cancellation; the task goes WORKING, each reply delta is an artifact chunk (``append``) of the
  ``response`` artifact, and the final text replaces the chunks as that artifact's one text part
  (``append`` false, ``lastChunk`` true) before COMPLETED: a stored task holds the reply whole;
- an agent failure (``CallFailed`` with ``agent_failed``) is FAILED with the agent's text as the
  status message; a passed deadline (:class:`~hivegate.errors.ServiceTimeoutError`) or any other
  gateway error of the call is FAILED with that error's message;
- ``cancel`` writes CANCELED; the SDK then cancels the task running :meth:`execute`, which cancels
  the running invoke (the invocation layer lets the backend see the cancellation).

The binding checks, before a task is created, that the agent has an invocable backend and that the
message's parts convert (:func:`invocation_from_message` raising
:class:`~a2a.utils.errors.ContentTypeNotSupportedError`), so a refused message writes nothing.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime

import orjson
from a2a.helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Artifact, Message, Part, Role, Task, TaskState
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

from hivegate.auth.principal import Principal
from hivegate.backends.base import Attachment, Invocation
from hivegate.calls.contract import Keeper, Settled, check_idempotency_key
from hivegate.calls.events import CallFailed, CallOutcome, ReplyDelta, ReplyPart, ReplySink
from hivegate.calls.invoke import CallTarget
from hivegate.errors import ConflictError, ServiceTimeoutError
from hivegate.errors import InvalidParamsError as GatewayInvalidParamsError
from hivegate.files.attachments import A2A_FILE_URL_PREFIX, file_reference
from hivegate.policy.calls import OPEN_POLICY, CallPolicy

__all__ = [
    "AGENT_STATE_KEY",
    "NAMED_CONTEXT_STATE_KEY",
    "PRINCIPAL_STATE_KEY",
    "RESPONSE_ARTIFACT",
    "InvocationExecutor",
    "TargetLookup",
    "failure_message",
    "invocation_from_message",
    "message_key",
    "no_invocable_backend",
    "reply_artifact",
    "resolve_message_attachments",
    "run_call",
    "settle",
]

AGENT_STATE_KEY = "hivegate.agent_id"
"""``ServerCallContext.state`` key of the agent the request is for."""

NAMED_CONTEXT_STATE_KEY = "hivegate.named_context_id"
"""``ServerCallContext.state`` key of the ``contextId`` the client named in a message starting a task (or None)."""

PRINCIPAL_STATE_KEY = "hivegate.principal"
"""``ServerCallContext.state`` key of the admitted :class:`~hivegate.auth.principal.Principal`."""

RESPONSE_ARTIFACT = "response"
"""The name of the artifact that carries the agent's reply."""

TargetLookup = Callable[[str], Awaitable[CallTarget | None]]
"""The call target of an agent id (its started, invocable backend), or None when it has none."""


def invocation_from_message(
    agent_id: str, message: Message, context_id: str | None, principal: Principal
) -> Invocation:
    """The invocation of ``agent_id`` for an A2A ``message`` (module docstring for the mapping).

    Raises:
        InvalidParamsError: a message whose role is not ``ROLE_USER``, with no parts, or with an empty
            text part (A2A 1.0 ``Message``: ``role`` and ``parts`` are REQUIRED; a client sends ``ROLE_USER``).
        ContentTypeNotSupportedError: a part that is none of text, raw, url and data.
        InvalidParamsError: also a ``hivegate:file/`` URL that cannot name a file.
    """
    if message.role != Role.ROLE_USER:
        raise InvalidParamsError(message="a message sent to an agent must have the role ROLE_USER")
    if not message.parts:
        raise InvalidParamsError(message="a message needs at least one part")
    texts: list[str] = []
    attachments: list[Attachment] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        name = part.filename or None
        media_type = part.media_type or None
        if kind == "text":
            if not part.text:
                raise InvalidParamsError(message="a text part must not be empty")
            texts.append(part.text)
        elif kind == "raw":
            data = base64.b64encode(part.raw).decode("ascii")
            attachments.append(Attachment(name=name, mime_type=media_type, data=data))
        elif kind == "url" and part.url.startswith(A2A_FILE_URL_PREFIX):
            try:
                attachments.append(file_reference(part.url.removeprefix(A2A_FILE_URL_PREFIX), name, media_type))
            except GatewayInvalidParamsError as exc:
                raise InvalidParamsError(message=exc.message, data=exc.data) from None
        elif kind == "url":
            attachments.append(Attachment(name=name, mime_type=media_type, uri=part.url))
        elif kind == "data":
            document = orjson.dumps(MessageToDict(part.data))
            data = base64.b64encode(document).decode("ascii")
            attachments.append(Attachment(name=name, mime_type=media_type or "application/json", data=data))
        else:
            raise ContentTypeNotSupportedError(message="a message part must be text, raw, url or data")
    return Invocation(
        agent_id=agent_id,
        message="\n".join(texts),
        arguments={},
        context_id=context_id or None,
        attachments=tuple(attachments),
        principal=principal,
    )


async def resolve_message_attachments(policy: CallPolicy, request: Invocation, *, load: bool = True) -> Invocation:
    """``request`` with its ``file_id`` attachments checked (``load`` False) or resolved to the files' bytes
    (:meth:`~hivegate.policy.calls.CallPolicy.resolve_attachments`), before any task is made.

    Raises:
        InvalidParamsError: a file the caller may not use on the agent, or too many attachments (-32602).
    """
    if not request.attachments:
        return request
    try:
        if not load:
            await policy.check_attachments(request.principal, request.agent_id, request.attachments)
            return request
        attachments = await policy.resolve_attachments(request.principal, request.agent_id, request.attachments)
    except GatewayInvalidParamsError as exc:
        raise InvalidParamsError(message=exc.message, data=exc.data) from None
    return replace(request, attachments=attachments)


IDEMPOTENCY_METADATA_KEY = "idempotency_key"
"""The key of a message's ``metadata`` that carries its idempotency key (issue 10 item 2)."""


def message_key(message: Message) -> str | None:
    """The idempotency key in ``message.metadata`` (:data:`IDEMPOTENCY_METADATA_KEY`), or None.

    Raises:
        InvalidParamsError: not a string of 1–255 characters.
    """
    if IDEMPOTENCY_METADATA_KEY not in message.metadata.fields:
        return None
    value = message.metadata.fields[IDEMPOTENCY_METADATA_KEY]
    raw = value.string_value if value.WhichOneof("kind") == "string_value" else value
    try:
        return check_idempotency_key(raw)
    except GatewayInvalidParamsError as exc:
        raise InvalidParamsError(message=exc.message, data=exc.data) from None


async def run_call(
    policy: CallPolicy,
    principal: Principal,
    target: CallTarget,
    request: Invocation,
    on_delta: ReplySink | None = None,
    *,
    key: str | None,
    new_context: bool,
    task_id: str,
    keep: Keeper | None = None,
) -> Settled:
    """Run ``request`` under the policy's call contract (:meth:`~hivegate.calls.contract.CallContract.run`),
    with the contract's refusals as A2A errors.

    A wait for a call holding the same key that passes the invoke timeout is a FAILED outcome, as a
    timed-out call is.

    Raises:
        InvalidParamsError: a ``contextId`` that names no conversation of the caller with the agent, or
            the key used with another payload (``data.code`` ``conflict``).
    """
    try:
        return await policy.contract.run(
            principal, target, request, on_delta, key=key, new_context=new_context, task_id=task_id, keep=keep
        )
    except (GatewayInvalidParamsError, ConflictError) as exc:
        raise InvalidParamsError(message=exc.message, data=exc.data) from None
    except ServiceTimeoutError as exc:
        return Settled(CallFailed(exc), request.context_id)


def no_invocable_backend(agent_id: str) -> UnsupportedOperationError:
    """The refusal of a message to an agent that has no invocable backend (an MCP server only)."""
    return UnsupportedOperationError(
        message=f"agent {agent_id} takes no messages over A2A: it has no invocable backend"
    )


def reply_artifact(task_id: str, text: str, parts: tuple[ReplyPart, ...] = ()) -> Artifact:
    """The ``response`` artifact of task ``task_id``: the reply's ``parts`` as A2A parts (A2A 1.0 §4.1.6:
    text, data, a file's ``raw`` bytes or ``url``), or one text part of ``text`` when it has none."""
    out = [_a2a_part(part) for part in parts] if parts else [Part(text=text)]
    return Artifact(artifact_id=f"{task_id}-{RESPONSE_ARTIFACT}", name=RESPONSE_ARTIFACT, parts=out)


def _a2a_part(part: ReplyPart) -> Part:
    if part.kind == "text":
        return Part(text=part.text)
    if part.kind == "data":
        return Part(data=ParseDict(part.data, Value()))
    name, media_type = part.name or "", part.media_type or ""
    if part.content is not None:
        return Part(raw=part.content, filename=name, media_type=media_type)
    return Part(url=part.uri or "", filename=name, media_type=media_type)


def failure_message(task: Task, text: str) -> Message:
    """The agent's status message of a FAILED ``task``: the failure's ``text``."""
    return new_text_message(text, context_id=task.context_id, task_id=task.id, role=Role.ROLE_AGENT)


def settle(task: Task, outcome: CallOutcome | None) -> None:
    """Give ``task`` the end the executor's events fold to, at once: COMPLETED with the
    :func:`reply_artifact`, FAILED with the :func:`failure_message`, or CANCELED (``outcome`` None:
    the call was cancelled). For the lean path (:mod:`hivegate.a2a.lean`), which keeps no events."""
    status = task.status
    if outcome is None:
        status.state = TaskState.TASK_STATE_CANCELED
    elif isinstance(outcome, CallFailed):
        status.state = TaskState.TASK_STATE_FAILED
        status.message.CopyFrom(failure_message(task, outcome.error.message))
    else:
        task.artifacts.append(reply_artifact(task.id, outcome.text, outcome.parts))
        status.state = TaskState.TASK_STATE_COMPLETED
    status.timestamp.FromDatetime(datetime.now(UTC))


class InvocationExecutor(AgentExecutor):
    """Runs an A2A message as one call of the agent (module docstring); one instance serves every agent.

    Args:
        targets: finds the call target of the agent the request's context names.
        policy: resolves the message's ``file_id`` attachments (the binding checked them and the rate limit).
    """

    def __init__(self, targets: TargetLookup, policy: CallPolicy = OPEN_POLICY) -> None:
        self._targets = targets
        self._policy = policy

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None  # the handler runs the executor for a message only
        state = context.call_context.state
        agent_id: str = state[AGENT_STATE_KEY]
        principal: Principal = state[PRINCIPAL_STATE_KEY]
        target = await self._targets(agent_id)
        if target is None:  # the binding checked before the task was made; the backend changed since
            raise no_invocable_backend(agent_id)
        # Before the task is made: a message that cannot be an invocation is refused with nothing kept.
        request = invocation_from_message(agent_id, message, context.context_id, principal)
        request = await resolve_message_attachments(self._policy, request)  # issue 10 item 3
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        artifact_id = f"{task.id}-{RESPONSE_ARTIFACT}"
        streamed = False

        async def on_delta(delta: ReplyDelta) -> None:
            nonlocal streamed
            if delta.status:  # what the agent is doing: a WORKING status message, not the reply
                note = new_text_message(delta.text, context_id=task.context_id, task_id=task.id, role=Role.ROLE_AGENT)
                await updater.update_status(TaskState.TASK_STATE_WORKING, message=note)
                return
            await updater.add_artifact(
                [Part(text=delta.text)], artifact_id=artifact_id, name=RESPONSE_ARTIFACT, append=streamed
            )
            streamed = True

        key = message_key(message)
        # A contextId the client named (checked at admission) is the call's conversation, checked again
        # and part of its payload; one the SDK made for a new task starts a conversation.
        named = state.get(NAMED_CONTEXT_STATE_KEY) or None
        new_context = named is None or principal.user_id is None
        settled = await run_call(
            self._policy, principal, target, request, on_delta, key=key, new_context=new_context, task_id=task.id
        )
        outcome = settled.outcome
        if isinstance(outcome, CallFailed):
            await updater.failed(failure_message(task, outcome.error.message))
            return
        # The whole reply, replacing the streamed chunks (append false): the stored task has it as one part.
        artifact = reply_artifact(task.id, outcome.text, outcome.parts)
        await updater.add_artifact(
            list(artifact.parts), artifact_id=artifact.artifact_id, name=artifact.name, last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id
        assert task_id is not None  # the handler cancels a known task only
        await TaskUpdater(event_queue, task_id, context.context_id or "").cancel()
