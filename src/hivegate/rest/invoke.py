"""``POST /{agentId}/v1/invoke``: the original platform's thin REST invoke, over the invocation layer.

Per request (``docs/rest.md``):

1. only ``POST`` (else 405 with ``Allow``); the agent id is checked (an id no agent can have is 404
   ``agent_not_found``);
2. the credential passes :meth:`~hivegate.auth.gate.EndpointGate.admit_agent` with ``a2a=True``,
   the gate of the MCP and A2A planes (the agent's MCP endpoint is the protected resource). An
   unknown agent or one with ``a2a_enabled = false`` (the original serves this route on its A2A
   host, so the A2A switch governs it) is refused there as on MCP: without a credential the same
   401 as a private agent, with one 404 ``agent_not_found``;
3. ``Content-Type`` must be JSON (415) and ``Accept`` must admit JSON or SSE (406); the body is read
   up to ``server.max_body_bytes`` (413) and parsed (:func:`parse_body`, 400);
4. once the agent is found invocable (else 501, step 5), the call is admitted by the host's policy
   (:mod:`hivegate.policy.calls`): the caller's rate limit on
   the agent (429 ``rate_limited`` with ``Retry-After``), then each ``file_id`` attachment resolved to the
   uploaded file's bytes (400 ``invalid_params`` for one the caller may not use; nothing is invoked);
5. the agent's call target (its backend started on first use; none → 501 ``agent_not_invocable``)
   runs the message under the call contract (:mod:`hivegate.calls.contract`: ``context_id`` names one
   of the caller's conversations with the agent, else one is started and returned; ``idempotency_key``
   replays a finished call, waits for one running, 409 ``conflict`` for a changed payload), then
   through :func:`~hivegate.calls.invoke.invoke`: the agent's deadline (shortened
   by ``timeout_ms``), its errors, and cancellation when the client disconnects
   (:func:`~hivegate.calls.cancel.cancel_on_disconnect` for the blocking answer; sse-starlette's
   disconnect listener for a stream);
6. the answer is a JSON object, or SSE frames when the request asks for ``text/event-stream``
   (:func:`_asks_for_sse`; :mod:`hivegate.rest.rendering`).

Spec: /work/shared/reference/product-surface.md §4.7, §6.2 (the original's invoke), §9.1 (codes).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Receive, Scope, Send

from hivegate.agents.model import AGENT_ID_PATTERN, AgentSpec
from hivegate.auth.gate import EndpointGate
from hivegate.auth.principal import Principal
from hivegate.backends.base import Attachment, Invocation
from hivegate.calls.cancel import cancel_on_disconnect
from hivegate.calls.contract import CallContract, Settled, check_idempotency_key
from hivegate.calls.events import CallFailed, ReplyDelta, ReplySink
from hivegate.calls.invoke import CallTarget
from hivegate.errors import (
    AgentNotFoundError,
    AgentNotInvocableError,
    GatewayError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotAllowedError,
)
from hivegate.files.attachments import file_reference
from hivegate.mcp.host import AgentHost
from hivegate.mcp.negotiation import parse_accept
from hivegate.mcp.transport import check_accept, check_content_type, parse_json, read_body, request_headers
from hivegate.rest.rendering import delta_frame, done_frames, invoke_reply, rest_error_response, status_frame

__all__ = [
    "INVOKE_TAIL",
    "MAX_ATTACHMENTS",
    "MAX_TIMEOUT_MS",
    "MIN_TIMEOUT_MS",
    "InvokeEndpoint",
    "InvokeRequest",
    "parse_body",
]

logger = logging.getLogger(__name__)

INVOKE_TAIL = "v1/invoke"
"""The path after the agent id (``/{agentId}/v1/invoke``)."""

MIN_TIMEOUT_MS = 100
MAX_TIMEOUT_MS = 115_000
"""``timeout_ms`` is clamped to the original's range [100, 115000] (product-surface.md §6.2)."""

MAX_ATTACHMENTS = 16
MAX_ID_CHARS = 128
"""The original's limit on ids (path ids, ``file_id``); ``context_id`` and ``idempotency_key`` here."""

_AGENT_ID = re.compile(AGENT_ID_PATTERN)
_ATTACHMENT_FIELDS = ("name", "mimeType", "uri", "data")
_STREAM_BUFFER = 64


@dataclass(frozen=True, slots=True)
class InvokeRequest:
    """A parsed invoke body. ``metadata`` is accepted and not used. ``attachments`` items with a ``file_id``
    are unresolved (:func:`~hivegate.files.attachments.file_reference`)."""

    message: str
    context_id: str | None = None
    timeout_ms: int | None = None
    attachments: tuple[Attachment, ...] = ()
    arguments: Mapping[str, Any] | None = None
    idempotency_key: str | None = None


def _param(name: str, message: str) -> InvalidParamsError:
    return InvalidParamsError(message, data={"param": name})


def _optional_id(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ID_CHARS:
        raise _param(name, f"'{name}' must be a string of 1 to {MAX_ID_CHARS} characters")
    return value


def _attachments(raw: Any) -> tuple[Attachment, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_ATTACHMENTS:  # pyright: ignore[reportUnknownArgumentType]
        raise _param("attachments", f"'attachments' must be an array of at most {MAX_ATTACHMENTS} objects")
    found: list[Attachment] = []
    for item in raw:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(item, dict):
            raise _param("attachments", "each attachment must be an object")
        if "file_id" in item:  # an uploaded file (POST /api/v1/files), resolved when the call is admitted
            if item.get("uri") is not None or item.get("data") is not None:  # pyright: ignore[reportUnknownMemberType]
                raise _param("attachments", "an attachment has either 'file_id' or 'uri' / 'data'")
            found.append(file_reference(item["file_id"], item.get("filename"), item.get("content_type")))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
            continue
        fields: dict[str, str | None] = {}
        for name in _ATTACHMENT_FIELDS:
            value = item.get(name)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if value is not None and not isinstance(value, str):
                raise _param("attachments", f"an attachment's '{name}' must be a string")
            fields[name] = value
        found.append(
            Attachment(name=fields["name"], mime_type=fields["mimeType"], uri=fields["uri"], data=fields["data"])
        )
    return tuple(found)


def parse_body(decoded: Any) -> InvokeRequest:
    """The invoke request of a decoded JSON body; unknown members are ignored.

    Raises:
        InvalidRequestError: the body is not a JSON object.
        InvalidParamsError: a member is missing or has the wrong type or range (``data.param`` names it).
    """
    if not isinstance(decoded, dict):
        raise InvalidRequestError("the body must be a JSON object")
    body: dict[str, Any] = decoded  # pyright: ignore[reportUnknownVariableType]
    if "message" not in body or body["message"] is None:
        raise _param("message", "'message' is required")
    message = body["message"]
    if not isinstance(message, str) or not message.strip():
        raise _param("message", "'message' must be a non-empty string")
    context_id = _optional_id(body, "context_id")
    key = check_idempotency_key(body.get("idempotency_key"))
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _param("metadata", "'metadata' must be an object")
    timeout_ms = body.get("timeout_ms")
    if timeout_ms is not None:
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 1:
            raise _param("timeout_ms", "'timeout_ms' must be a positive integer (milliseconds)")
        timeout_ms = min(max(timeout_ms, MIN_TIMEOUT_MS), MAX_TIMEOUT_MS)
    attachments = _attachments(body.get("attachments"))
    arguments = {name: body[name] for name in ("message", "context_id", "attachments") if body.get(name) is not None}
    return InvokeRequest(message, context_id, timeout_ms, attachments, arguments, key)


def _asks_for_sse(accept: str | None) -> bool:
    """Whether the reply is SSE: ``Accept`` admits only SSE, or names ``text/event-stream`` and not
    ``application/json`` (JSON, the blocking reply, is the default when both are named or ``*/*``)."""
    acceptable = parse_accept(accept)
    if not acceptable.sse:
        return False
    named = (accept or "").lower()
    return not acceptable.json or ("text/event-stream" in named and "application/json" not in named)


class InvokeEndpoint:
    """The ASGI app of every agent's ``/{agentId}/v1/invoke`` (module docstring).

    Args:
        host: the agents (specs, and the runtimes that hold their call targets).
        gate: the credential gate shared with the MCP and A2A planes.
        max_body_bytes: ``server.max_body_bytes``.
    """

    def __init__(self, host: AgentHost, gate: EndpointGate, max_body_bytes: int) -> None:
        self._host = host
        self._gate = gate
        self._max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        agent_id: str = scope["path"].split("/")[1]
        try:
            call = await self._admit(agent_id, scope, receive)
        except GatewayError as exc:
            await rest_error_response(exc)(scope, receive, send)
            return
        principal, target, request, stream = call
        # Issue 10 item 1: a signed-in caller's named context_id must be one of its conversations (the
        # contract checks it); otherwise this id starts one. An anonymous caller's only labels the reply.
        context_id = request.context_id or str(uuid.uuid4())
        new_context = request.context_id is None or principal.user_id is None
        invocation = Invocation(
            agent_id=agent_id,
            message=request.message,
            arguments=dict(request.arguments or {}),
            context_id=context_id,
            attachments=request.attachments,
            principal=principal,
        )
        if request.timeout_ms is not None:
            seconds = min(request.timeout_ms / 1000, target.spec.invoke_timeout_seconds)
            target = CallTarget(target.spec.model_copy(update={"invoke_timeout_seconds": seconds}), target.backend)
        contract = _Contract(self._host.policy.contract, request.idempotency_key, new_context)
        if stream:
            await self._stream(principal, target, invocation, contract)(scope, receive, send)
            return
        settled: Settled | None = None

        async def work() -> None:
            nonlocal settled
            settled = await contract.run(principal, target, invocation)

        if not await cancel_on_disconnect(receive, work):
            logger.info("agent %s: the REST invoke client left; the call was cancelled", agent_id)
            return
        assert settled is not None
        await invoke_reply(settled.outcome, settled.context_id or context_id)(scope, receive, send)

    async def _admit(
        self, agent_id: str, scope: Scope, receive: Receive
    ) -> tuple[Principal, CallTarget, InvokeRequest, bool]:
        if scope["method"] != "POST":
            error = MethodNotAllowedError(f"{scope['method'][:20]} is not allowed here; invoke is POSTed")
            error.headers["Allow"] = "POST"
            raise error
        spec = self._spec(agent_id)
        pairs, headers = request_headers(scope)
        principal = await self._gate.admit_agent(agent_id, spec, f"/{agent_id}/mcp", pairs, a2a=True)
        check_content_type(headers)
        check_accept(headers)
        stream = _asks_for_sse(headers.get("accept"))
        body = await read_body(scope, receive, self._max_body_bytes, headers)
        request = parse_body(parse_json(body))
        runtime = await self._host.runtime(agent_id)
        target = None if runtime is None else runtime.view.call_target
        if target is None:
            raise AgentNotInvocableError(f"agent {agent_id} takes no messages: it has no invocable backend")
        # Issue 10 items 3-4: the call's admission, before anything is invoked.
        policy = self._host.policy
        await policy.check_rate(principal, target.spec)
        if request.attachments:
            attachments = await policy.resolve_attachments(principal, agent_id, request.attachments)
            request = replace(request, attachments=attachments)
        return principal, target, request, stream

    def _spec(self, agent_id: str) -> AgentSpec | None:
        """The agent's spec, or None: an unknown or switched-off agent is the gate's to refuse, after the
        credential as on MCP (without one, the same 401 as a private agent: neither's existence leaks).

        Raises:
            AgentNotFoundError: an id no agent can have (it never reaches a header).
        """
        if _AGENT_ID.fullmatch(agent_id) is None:
            raise AgentNotFoundError(agent_id[:64])
        return self._host.spec(agent_id)

    def _stream(
        self, principal: Principal, target: CallTarget, invocation: Invocation, contract: _Contract
    ) -> EventSourceResponse:
        """The SSE answer: the call runs as sse-starlette's data sender, so a client that disconnects
        cancels it (the response's task group is cancelled, and the backend sees the cancellation)."""
        sender, frames = anyio.create_memory_object_stream[ServerSentEvent](_STREAM_BUFFER)

        async def produce(out: MemoryObjectSendStream[ServerSentEvent]) -> None:
            streamed: list[str] = []

            async def on_delta(delta: ReplyDelta) -> None:
                if delta.status:
                    await out.send(status_frame(delta.text))
                    return
                streamed.append(delta.text)
                await out.send(delta_frame(delta.text))

            async with out:
                settled = await contract.run(principal, target, invocation, on_delta)
                context_id = settled.context_id or invocation.context_id or ""
                for frame in done_frames(settled.outcome, context_id, "".join(streamed)):
                    await out.send(frame)

        async def sender_task() -> None:
            await produce(sender)

        async def relay() -> AsyncGenerator[ServerSentEvent]:
            async with frames:  # closed however the response ends
                async for frame in frames:
                    yield frame

        return EventSourceResponse(
            relay(),
            data_sender_callable=sender_task,
            headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"},
        )


@dataclass(frozen=True, slots=True)
class _Contract:
    """One invoke's run under the call contract (:mod:`hivegate.calls.contract`): its key, and whether
    its context id is new (not the caller's to check)."""

    contract: CallContract
    key: str | None
    new_context: bool

    async def run(
        self, principal: Principal, target: CallTarget, invocation: Invocation, on_delta: ReplySink | None = None
    ) -> Settled:
        """The settled call; a refusal of the contract (``invalid_params``, ``conflict``) or any other
        failure is a :class:`~hivegate.calls.events.CallFailed` of the gateway (rendered as its error)."""
        try:
            return await self.contract.run(
                principal, target, invocation, on_delta, key=self.key, new_context=self.new_context
            )
        except GatewayError as exc:
            return Settled(CallFailed(exc), invocation.context_id)
        except Exception:
            logger.exception("agent %s: the REST invoke failed", invocation.agent_id)
            return Settled(CallFailed(InternalError("Internal error")), invocation.context_id)
