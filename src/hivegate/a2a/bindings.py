"""The A2A bindings of every agent: JSON-RPC at ``/{agentId}/a2a``, HTTP+JSON under ``/{agentId}/a2a/``.

:class:`A2AEndpoint` is one ASGI app for every agent (:class:`~hivegate.routing.RouteTable` sends it
any path whose second segment is ``a2a``). Per request:

1. the agent id is checked (:data:`~hivegate.agents.model.AGENT_ID_PATTERN`: an id no agent can have
   is 404 ``agent_not_found``);
2. the credential passes :meth:`~hivegate.auth.gate.EndpointGate.admit_agent` with ``a2a=True``, the
   gate of the MCP endpoint, with the agent's MCP endpoint as the protected resource (an OAuth
   token's audience, the ``resource_metadata`` of the challenge). An unknown agent, or one with
   ``a2a_enabled = false``, is refused there as on MCP: without a credential the same 401 challenge
   as a private agent, with one 404 ``agent_not_found`` (so no agent's existence leaks);
   then the body is read within ``server.max_body_bytes`` (413 ``payload_too_large`` beyond) and
   must be JSON (:func:`~hivegate.mcp.transport.parse_json`: -32700 / 400 ``parse_error``);
3. a refusal (and a JSON-RPC request not POSTed: 405, or an HTTP+JSON path no operation has:
   404 ``not_found``) is rendered in the binding's shape: a JSON-RPC error (``POST /{id}/a2a``) or the
   HTTP+JSON error of :mod:`hivegate.a2a.rendering`, with its status and ``WWW-Authenticate``;
4. the request reaches the agent's a2a-sdk app: ``DefaultRequestHandler`` with
   ``create_jsonrpc_routes`` and ``create_rest_routes`` (``enable_v0_3_compat=True``), built on first
   use and kept while the agent exists with ``a2a_enabled`` (dropped when it is deleted or
   switched off). A change of the agent's spec does not replace it: the handler's registry of
   running tasks is what lets ``CancelTask`` and ``SubscribeToTask`` reach a running call, and the
   only parts of the card the handler reads (``capabilities``) are the same for every agent; the
   executor looks the agent's call target up at each message, so a new backend serves the next
   message. The call context carries the agent id, the principal and the task
   owner (:func:`~hivegate.a2a.tasks.task_owner`), never the credential: the ``Authorization``,
   ``X-Agent-API-Key`` and ``Cookie`` headers are left out of its ``headers``.

``SendMessage`` and ``SendStreamingMessage`` are refused before a task is made when the agent has no
invocable backend (an agent that is only an MCP server: ``UnsupportedOperationError``) or when a
part cannot be converted (``ContentTypeNotSupportedError``) or names a file the caller may not use
(``InvalidParamsError``), so a refused message writes nothing. Each is one call for the caller's rate
limit on the agent (:mod:`hivegate.policy.rate_limits`), charged before the SDK or the lean path runs:
over it, the binding answers 429 ``rate_limited`` with ``Retry-After`` (JSON-RPC: the error object, its
ErrorInfo's metadata carrying ``retryAfterSeconds``).

Spec: A2A 1.0 §3.2.6 (``A2A-Version``), §5.3 and §9 (JSON-RPC), §11 (HTTP+JSON), §3.3.2 (errors).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator, Iterable, Sequence

from a2a.auth.user import User
from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import ServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import TaskStore
from a2a.types import Message, SendMessageRequest, Task
from a2a.utils.errors import InternalError, InvalidParamsError
from starlette.requests import Request
from starlette.routing import BaseRoute, Mount, Router
from starlette.types import Receive, Scope, Send

from hivegate.a2a.card import agent_card
from hivegate.a2a.executor import (
    AGENT_STATE_KEY,
    NAMED_CONTEXT_STATE_KEY,
    PRINCIPAL_STATE_KEY,
    InvocationExecutor,
    invocation_from_message,
    message_key,
    no_invocable_backend,
    resolve_message_attachments,
)
from hivegate.a2a.lean import LeanSend, lean_send_params
from hivegate.a2a.rendering import a2a_error_response, a2a_jsonrpc_error_response
from hivegate.a2a.tasks import OWNER_STATE_KEY, task_owner
from hivegate.agents.model import AGENT_ID_PATTERN, AgentSpec
from hivegate.auth.gate import EndpointGate
from hivegate.auth.principal import Principal
from hivegate.calls.invoke import CallTarget
from hivegate.errors import AgentNotFoundError, GatewayError, MethodNotAllowedError, NotFoundError
from hivegate.errors import InvalidParamsError as GatewayInvalidParamsError
from hivegate.mcp.host import AgentHost
from hivegate.mcp.transport import parse_json, read_body, replay_receive, request_headers
from hivegate.routing import A2A_SEGMENT
from hivegate.storage.tasks import GatewayTaskStore, check_context_id


class _CallerInputLogFilter(logging.Filter):
    """The a2a-sdk's JSON-RPC dispatcher logs a caller's malformed request (a field of the wrong type, a
    body that is not JSON-RPC) as an ERROR with its traceback, some 35 lines each, and every error answer
    (an unknown task too) as a WARNING echoing what the caller sent; its version check logs every
    request's unsupported ``A2A-Version`` header, whatever its length, as a WARNING: anyone who can reach an agent's A2A
    endpoint could fill the server log. The caller gets its JSON-RPC error all the same; the log gets
    one DEBUG line instead. Internal errors (-32603, logged at ERROR) are kept."""

    QUIET = frozenset(
        {
            "Failed to parse request params",
            "Failed to validate base JSON-RPC request",
            "Version mismatch: actual='%s', expected='%s'",  # the caller's A2A-Version header, echoed
        }
    )
    ANSWERED = "Request Error (ID: %s): Code=%s, Message='%s'%s"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == self.ANSWERED and record.levelno < logging.ERROR:
            args = record.args if isinstance(record.args, tuple) else ()
            _logger.debug("A2A request answered with an error: code %s", args[1] if len(args) > 1 else "?")
            return False
        if record.msg not in self.QUIET:
            return True
        if _logger.isEnabledFor(logging.DEBUG):
            cause = record.exc_info[1] if record.exc_info else None
            _logger.debug("A2A request refused: %s: %s", record.msg, str(cause).splitlines()[0][:300] if cause else "")
        return False


_logger = logging.getLogger(__name__)
for _name in ("a2a.server.routes.jsonrpc_dispatcher", "a2a.utils.version_validator"):
    logging.getLogger(_name).addFilter(_CallerInputLogFilter())

__all__ = ["A2AEndpoint"]

_AGENT_ID = re.compile(AGENT_ID_PATTERN)
_SCOPE_KEY = "hivegate.a2a"
_PRIVATE_HEADERS = frozenset({"authorization", "x-agent-api-key", "cookie"})


_SEND_METHODS = frozenset({"SendMessage", "SendStreamingMessage", "message/send", "message/stream"})
"""JSON-RPC methods that send a message (A2A 1.0 §9; the v0.3 names of the compatibility layer)."""
_SEND_PATHS = ("/message:send", "/message:stream")
"""HTTP+JSON paths (their tails; a tenant or the v0.3 ``/v1`` may precede) that send a message (A2A 1.0 §11)."""


def _sends_message(scope: Scope, jsonrpc: bool, decoded: object) -> bool:
    """Whether the request is a ``SendMessage`` or ``SendStreamingMessage`` (a call of the agent)."""
    if jsonrpc:
        return isinstance(decoded, dict) and decoded.get("method") in _SEND_METHODS  # pyright: ignore[reportUnknownMemberType]
    return scope["method"] == "POST" and scope["path"].endswith(_SEND_PATHS)


async def _not_a_path(scope: Scope, receive: Receive, send: Send) -> None:
    """A path under ``/{agentId}/a2a/`` that no HTTP+JSON operation has: 404 in the binding's shape."""
    error = NotFoundError("No A2A HTTP+JSON operation at this path (docs/a2a.md)")
    await a2a_error_response(error)(scope, receive, send)


def _router(routes: Sequence[BaseRoute]) -> Router:
    return Router(routes=list(routes), redirect_slashes=False, default=_not_a_path)


class _PrincipalUser(User):
    """The admitted principal as the SDK's ``User`` (``user_name`` is the task owner string)."""

    def __init__(self, principal: Principal, owner: str) -> None:
        self._principal = principal
        self._owner = owner

    @property
    def is_authenticated(self) -> bool:
        return self._principal.user_id is not None

    @property
    def user_name(self) -> str:
        return self._owner


def _call_context(
    admitted: tuple[str, Principal, str], headers: Iterable[tuple[str, str]], extensions: set[str]
) -> ServerCallContext:
    """The call context of an admitted request: agent, principal, owner; the headers without credentials."""
    agent_id, principal, owner = admitted
    return ServerCallContext(
        user=_PrincipalUser(principal, owner),
        state={
            "headers": {name: value for name, value in headers if name not in _PRIVATE_HEADERS},
            AGENT_STATE_KEY: agent_id,
            PRINCIPAL_STATE_KEY: principal,
            OWNER_STATE_KEY: owner,
        },
        requested_extensions=extensions,
    )


class _ContextBuilder(ServerCallContextBuilder):
    """The SDK path's call context (:func:`_call_context`) of a request the binding admitted."""

    def build(self, request: Request) -> ServerCallContext:
        extensions = get_requested_extensions(request.headers.getlist(HTTP_EXTENSION_HEADER))
        return _call_context(request.scope[_SCOPE_KEY], request.headers.items(), extensions)


class _AgentRequestHandler(DefaultRequestHandler):
    """The SDK's handler, refusing a message the agent cannot take before a task is made (module docstring)."""

    def __init__(self, endpoint: A2AEndpoint, executor: InvocationExecutor, store: TaskStore, spec: AgentSpec) -> None:
        super().__init__(agent_executor=executor, task_store=store, agent_card=agent_card(spec, endpoint.base))
        self._endpoint = endpoint

    async def _admit(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        agent_id: str = context.state[AGENT_STATE_KEY]
        if await self._endpoint.call_target(agent_id) is None:
            raise no_invocable_backend(agent_id)
        principal: Principal = context.state[PRINCIPAL_STATE_KEY]
        message = params.message
        invocation = invocation_from_message(agent_id, message, None, principal)
        await resolve_message_attachments(self._endpoint.policy, invocation, load=False)  # issue 10 item 3
        check_context_id(message.context_id)  # the SDK would call the agent, then fail to save its task
        message_key(message)  # issue 10 item 2: a key that cannot be one is refused before a task is made
        # The contextId the client named (the executor sees only the task's): it is the call's conversation
        # and part of its payload (its idempotency fingerprint), as on the lean path.
        context.state[NAMED_CONTEXT_STATE_KEY] = message.context_id if not message.task_id else None
        if message.context_id and not message.task_id and principal.user_id is not None:
            # Issue 10 item 1: a signed-in caller's named contextId must be one of its conversations.
            try:
                await self._endpoint.policy.contract.check_context(principal, agent_id, message.context_id)
            except GatewayInvalidParamsError as exc:
                raise InvalidParamsError(message=exc.message, data=exc.data) from None
            except GatewayError as exc:  # the database failed: its generic message only
                raise InternalError(message=exc.message) from None

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        await self._admit(params, context)
        return await super().on_message_send(params, context)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        await self._admit(params, context)
        async for event in super().on_message_send_stream(params, context):
            yield event


class A2AEndpoint:
    """The ASGI app of every agent's A2A bindings (module docstring).

    Args:
        host: the agents (specs, and the runtimes that hold their call targets).
        gate: the credential gate shared with the MCP endpoints.
        store: the task store shared by every agent (:func:`~hivegate.a2a.tasks.open_task_store`).
        base: ``Settings.base_url()``, for the cards the handlers hold.
    """

    def __init__(
        self, host: AgentHost, gate: EndpointGate, store: GatewayTaskStore, base: str, max_body_bytes: int
    ) -> None:
        self._host = host
        self._max_body_bytes = max_body_bytes
        self._gate = gate
        self._store = store
        self.base = base
        self.policy = host.policy
        self._executor = InvocationExecutor(self.call_target, host.policy)
        self._lean = LeanSend(self.call_target, store, host.policy)
        self._context_builder = _ContextBuilder()
        self._apps: dict[str, Router] = {}
        self._handlers: dict[str, _AgentRequestHandler] = {}
        self._dropped: list[_AgentRequestHandler] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        parts: list[str] = scope["path"].split("/")
        agent_id = parts[1]
        jsonrpc = len(parts) == 3
        decoded: object = None
        try:
            if jsonrpc and scope["method"] != "POST":
                error = MethodNotAllowedError(f"{scope['method'][:20]} is not allowed here; JSON-RPC is POSTed")
                error.headers["Allow"] = "POST"
                raise error
            spec = self._admissible(agent_id)
            pairs, headers = request_headers(scope)
            # An unknown or switched-off agent is the gate's to refuse, after the credential as on MCP:
            # without one it is the same 401 challenge as a private agent, so neither's existence leaks.
            principal = await self._gate.admit_agent(agent_id, spec, f"/{agent_id}/mcp", pairs, a2a=True)
            assert spec is not None  # the gate admits registered agents only
            # The body is read here, within server.max_body_bytes (413 beyond), as on every other plane,
            # and must be JSON (-32700 here: the SDK answered a body nested too deep with -32603 and
            # Python's recursion message).
            body = await read_body(scope, receive, self._max_body_bytes, headers)
            decoded = parse_json(body) if body else None
            if _sends_message(scope, jsonrpc, decoded):  # issue 10 item 4: one call of the agent
                await self.policy.check_rate(principal, spec)
        except GatewayError as exc:
            request_id = decoded.get("id") if isinstance(decoded, dict) else None  # pyright: ignore[reportUnknownMemberType]
            response = a2a_jsonrpc_error_response(exc, request_id) if jsonrpc else a2a_error_response(exc)
            await response(scope, receive, send)
            return
        admitted = (agent_id, principal, task_owner(principal, scope.get("client"), agent_id))
        lean = lean_send_params(headers, decoded) if jsonrpc else None
        if lean is not None:
            params, request_id = lean
            await self._lean.serve(params, request_id, _call_context(admitted, pairs, set()), receive, send)
            return
        scope[_SCOPE_KEY] = admitted
        await self._app(spec)(scope, replay_receive(body, receive), send)

    async def call_target(self, agent_id: str) -> CallTarget | None:
        """The agent's call target (its runtime is started on first use), or None without an invocable backend.

        Raises:
            InternalError: the agent's backend cannot be started (the A2A plane's 500; details in the log).
        """
        try:
            runtime = await self._host.runtime(agent_id)
        except GatewayError as exc:
            raise InternalError(message=exc.message) from None
        return None if runtime is None else runtime.view.call_target

    def _admissible(self, agent_id: str) -> AgentSpec | None:
        """The agent's spec (None when there is none); drops the SDK app of one deleted or switched off.

        Raises:
            AgentNotFoundError: an id no agent can have (it never reaches a header).
        """
        if _AGENT_ID.fullmatch(agent_id) is None:
            raise AgentNotFoundError(agent_id[:64])
        spec = self._host.spec(agent_id)
        if (spec is None or not spec.a2a_enabled) and self._apps.pop(agent_id, None) is not None:
            self._dropped.append(self._handlers.pop(agent_id))  # its running tasks finish; closed at shutdown
        return spec

    def _app(self, spec: AgentSpec) -> Router:
        cached = self._apps.get(spec.id)
        if cached is not None:
            return cached
        handler = _AgentRequestHandler(self, self._executor, self._store, spec)
        prefix = f"/{spec.id}/{A2A_SEGMENT}"
        jsonrpc = create_jsonrpc_routes(
            handler, rpc_url=prefix, context_builder=self._context_builder, enable_v0_3_compat=True
        )
        rest = [
            # The SDK's catch-all "/{tenant}" mount: its unmatched paths get the binding's 404 too.
            Mount(route.path, app=_router(route.routes)) if isinstance(route, Mount) else route
            for route in create_rest_routes(handler, context_builder=self._context_builder, enable_v0_3_compat=True)
        ]
        # One agent's routes only: that catch-all cannot capture another agent (§2.10 pitfall 1).
        app = _router([*jsonrpc, Mount(prefix, app=_router(rest))])
        self._apps[spec.id] = app
        self._handlers[spec.id] = handler
        return app

    async def aclose(self) -> None:
        """Stop every handler's running tasks (their calls are cancelled), so none is left at shutdown."""
        handlers = [*self._handlers.values(), *self._dropped]
        self._apps.clear()
        self._handlers.clear()
        self._dropped.clear()
        for handler in handlers:
            await handler.aclose()
