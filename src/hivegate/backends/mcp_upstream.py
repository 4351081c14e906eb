"""The ``mcp`` backend: an agent that fronts an upstream MCP server (federation).

Spec: MCP 2025-11-25 and 2026-07-28 (the upstream's era is detected: ``server/discover``, else the
``initialize`` handshake; the official SDK's ``Client(mode="auto")``). TOML:
``backend = { type = "mcp", url = "…" }`` (Streamable HTTP) or ``{ type = "mcp", command = [...] }``
(stdio) (:class:`~hivegate.agents.model.McpBackendSpec`); ``docs/backends.md``.

The upstream's tools, resources, resource templates, prompts and completions become the agent's own:
the agent's handlers (:mod:`hivegate.mcp.handlers`) ask this backend through :meth:`McpUpstreamBackend.request`,
as they ask an in-process SDK server, and put hivegate's pagination (every upstream page is read, and
the merged list paged again with hivegate's opaque cursors), cache hints, spec fixes and credentials on
top. One upstream client per agent, opened by the first request and reused by every call (one HTTP
connection pool, one process for stdio); a lost connection is opened again by the next request, after
a back-off when opening failed.

What passes through:

- **results** as the upstream gave them (a tool's ``isError`` result included), and its JSON-RPC
  errors (code, message, data);
- **progress**: a caller that asked for it (``_meta.progressToken``) gets the upstream's progress on
  its own token;
- **input-required** (2026-07-28): an ``InputRequiredResult`` reaches the caller, and its retry (with
  ``inputResponses`` and ``requestState``) reaches the upstream;
- **cancellation**: a cancelled call cancels its upstream request (the SDK client sends
  ``notifications/cancelled``);
- **list changes**: the upstream's ``list_changed`` notifications (handshake era) and its
  ``subscriptions/listen`` events (2026-07-28) become the agent's.

Failures (the catalogue): an upstream that cannot be reached or started, or whose connection drops, is
``agent_service_unavailable``; one that does not answer within ``timeout_seconds`` is
``service_timeout``. The cause goes to the log with the agent id.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack
from contextvars import ContextVar
from typing import Any, cast

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    SubscriptionBus,
    ToolsListChanged,
)
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CONNECTION_CLOSED,
    LOG_LEVEL_META_KEY,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RequestParamsMeta,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from hivegate.agents.model import McpBackendSpec
from hivegate.backends.base import DeltaSink, Invocation, failure_line
from hivegate.errors import AgentError, AgentServiceUnavailableError, ServiceTimeoutError
from hivegate.mcp.sdk_bridge import keep_request_client_capabilities

__all__ = ["FORWARDED_METHODS", "LIST_CACHE_SECONDS", "McpUpstreamBackend"]

logger = logging.getLogger(__name__)

LIST_CACHE_SECONDS = 2.0
"""How long one page of an upstream list is reused (a ``tools/call`` first checks the tool is listed);
an upstream ``list_changed`` drops it at once."""

_MAX_CACHED_PAGES = 64
"""The most upstream list pages kept at once (an upstream whose cursors differ every time cannot grow it)."""
_MAX_SCHEMAS = 10_000
_CHANGE_COALESCE_SECONDS = 1.0
"""An upstream's list changes of one kind are announced at most once a second (a flood is one event)."""
_RETRY_FIRST_SECONDS = 1.0
_RETRY_MAX_SECONDS = 30.0
_SHORT_LIVED_SECONDS = 10.0
"""A connection lost sooner than this after it opened counts towards the restart back-off."""

_CAPABILITY_OF = {
    "tools/list": "tools",
    "tools/call": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "completion/complete": "completions",
}
FORWARDED_METHODS = frozenset(_CAPABILITY_OF)
"""The methods an upstream serves for the agent (when its capabilities say so)."""

_LISTS = {
    "tools/list": types.ListToolsResult,
    "resources/list": types.ListResourcesResult,
    "resources/templates/list": types.ListResourceTemplatesResult,
    "prompts/list": types.ListPromptsResult,
}

_ENVELOPE_PREFIX = "io.modelcontextprotocol/"
"""``_meta`` keys the SDK client stamps itself on the upstream connection (the caller's are not forwarded)."""


class McpUpstreamBackend:
    """An agent fronting an upstream MCP server (module docstring).

    Args:
        agent_id: the gateway's agent (for the logs).
        spec: the ``mcp`` backend spec.
    """

    can_invoke = False
    has_server = True

    def __init__(self, agent_id: str, spec: McpBackendSpec) -> None:
        self._agent_id = agent_id
        self._spec = spec
        self.subscription_bus: SubscriptionBus | None = InMemorySubscriptionBus()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._client: Client | None = None
        self._lost: anyio.Event | None = None
        self._connecting = anyio.Lock()
        self._retry_at = 0.0
        self._retry_pause = _RETRY_FIRST_SECONDS
        self._opened_at = 0.0
        self._short_lived = 0
        self._lists: dict[tuple[str, str | None], tuple[float, Any]] = {}
        self._schemas: dict[str, Mapping[str, Any]] = {}
        self._announced: dict[type, float] = {}
        self._closed = False

    def has_method(self, method: str) -> bool:
        """Whether the upstream serves ``method``: by its capabilities once connected (every forwarded
        method before: the first request connects)."""
        capability = _CAPABILITY_OF.get(method)
        if capability is None:
            return False
        client = self._client
        if client is None:
            return True
        capabilities = client.session.server_capabilities
        return capabilities is not None and getattr(capabilities, capability, None) is not None

    def tool_input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The upstream tool's ``inputSchema`` from its last listing, or None."""
        return self._schemas.get(name)

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Remember ``task_group`` for the upstream connection (opened by the first request)."""
        self._task_group = task_group

    async def aclose(self) -> None:
        """Close the upstream connection (a stdio upstream's process is stopped). Idempotent."""
        self._closed = True
        lost = self._lost
        self._client = None
        if lost is not None:
            lost.set()

    async def invoke(self, invocation: Invocation, on_delta: DeltaSink | None) -> str:
        raise AgentError("This agent has no message tool.")

    async def request(self, ctx: ServerRequestContext[Any, Any], method: str, params: Mapping[str, Any]) -> Any:
        """Run ``method`` with the caller's ``params`` on the upstream (module docstring).

        Raises:
            MCPError: the upstream's own JSON-RPC error, or method not found (a method it does not serve).
            AgentServiceUnavailableError: the upstream cannot be reached or its connection dropped.
            ServiceTimeoutError: no answer within ``timeout_seconds`` (a list, a read, a prompt).
        """
        if method not in _CAPABILITY_OF:
            raise MCPError(METHOD_NOT_FOUND, "Method not found", data=method)
        client = await self._connected()
        if not self.has_method(method):
            if method in _LISTS:  # the upstream has none: an empty list
                return _LISTS[method].model_validate({_LIST_KEYS[method]: []})
            raise MCPError(METHOD_NOT_FOUND, "Method not found", data=method)
        forwarded = _forwarded_params(params, client.session.protocol_version in MODERN_PROTOCOL_VERSIONS)
        try:
            if method in _LISTS:
                return await self._listed(client, method, forwarded)
            return await self._call(ctx, client, method, forwarded)
        except MCPError as exc:
            if exc.error.code == PARSE_ERROR:  # the SDK client could not parse the upstream's answer
                logger.warning(
                    "agent %s: the upstream MCP server answered garbage: %s", self._agent_id, failure_line(exc)
                )
                raise AgentServiceUnavailableError() from None
            if exc.error.code != CONNECTION_CLOSED:  # the upstream's own error: as it is
                raise
            logger.warning("agent %s: the upstream MCP server's connection closed", self._agent_id)
            self._forget(client)
            raise AgentServiceUnavailableError() from None
        except TimeoutError:
            raise ServiceTimeoutError(self._spec.timeout_seconds) from None
        except (httpx2.HTTPError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError) as exc:
            logger.warning("agent %s: the upstream MCP server failed: %s", self._agent_id, failure_line(exc))
            self._forget(client)
            raise AgentServiceUnavailableError() from None

    async def _listed(self, client: Client, method: str, params: dict[str, Any]) -> Any:
        """One page of an upstream list, reused for :data:`LIST_CACHE_SECONDS`."""
        cursor = params.get("cursor")
        key = (method, cursor if isinstance(cursor, str) else None)
        cached = self._lists.get(key)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            return cached[1]
        session = client.session
        paged = types.PaginatedRequestParams.model_validate(params) if params else None
        with anyio.fail_after(self._spec.timeout_seconds):
            if method == "tools/list":
                page: Any = await session.list_tools(params=paged)
                if len(self._schemas) > _MAX_SCHEMAS:
                    self._schemas.clear()
                self._schemas.update({tool.name: tool.input_schema for tool in page.tools})
            elif method == "resources/list":
                page = await session.list_resources(params=paged)
            elif method == "resources/templates/list":
                page = await session.list_resource_templates(params=paged)
            else:
                page = await session.list_prompts(params=paged)
        if len(self._lists) >= _MAX_CACHED_PAGES:  # cursors that differ every time: keep it bounded
            self._lists.clear()
        self._lists[key] = (now + LIST_CACHE_SECONDS, page)
        return page

    async def _call(
        self, ctx: ServerRequestContext[Any, Any], client: Client, method: str, params: dict[str, Any]
    ) -> Any:
        """``tools/call``, ``resources/read``, ``prompts/get`` or ``completion/complete`` on the upstream.

        To a 2026-07-28 upstream, the request declares the caller's client capabilities (SEP-2322: it
        asks for input only as the caller can give it). An ``InputRequiredResult`` reaches a 2026-07-28
        caller as it is; for a handshake-era caller, which cannot take one, the gateway drives the rounds
        itself (the SDK client's driver), asking the caller each embedded question as a request on its
        own session (sampling, elicitation, roots) and retrying the upstream with the answers."""
        session = client.session
        meta = cast(RequestParamsMeta, dict(params.get("_meta") or {}))
        if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            declared = ctx.session.client_capabilities
            meta[CLIENT_CAPABILITIES_META_KEY] = (
                {} if declared is None else declared.model_dump(by_alias=True, mode="json", exclude_none=True)
            )
        drive = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        if drive and session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # A handshake-era caller filters log messages by its session's level (logging/setLevel): the
            # upstream sends them all, and the caller's session keeps what its level lets through.
            meta[LOG_LEVEL_META_KEY] = "debug"
        token = _CALLER.set(ctx)
        try:
            if method == "tools/call":  # bounded by the agent's invoke timeout (the caller's), not timeout_seconds
                if drive:
                    return await client.call_tool(
                        params["name"], params.get("arguments"), progress_callback=_progress_to(ctx), meta=meta or None
                    )
                return await session.call_tool(
                    params["name"],
                    params.get("arguments"),
                    progress_callback=_progress_to(ctx),
                    input_responses=params.get("inputResponses"),
                    request_state=params.get("requestState"),
                    meta=meta or None,
                    allow_input_required=True,
                    allow_claimed=True,
                )
            with anyio.fail_after(self._spec.timeout_seconds):
                if method == "resources/read":
                    if drive:
                        return await client.read_resource(params["uri"], meta=meta or None, cache_mode="bypass")
                    return await session.send_request(
                        types.ReadResourceRequest(
                            params=types.ReadResourceRequestParams.model_validate({**params, "_meta": meta or None})
                        ),
                        types.ReadResourceResult,
                    )
                if method == "prompts/get":
                    if drive:
                        return await client.get_prompt(params["name"], params.get("arguments"), meta=meta or None)
                    return await session.get_prompt(
                        params["name"],
                        params.get("arguments"),
                        input_responses=params.get("inputResponses"),
                        request_state=params.get("requestState"),
                        meta=meta or None,
                        allow_input_required=True,
                    )
                request = types.CompleteRequest(params=types.CompleteRequestParams.model_validate(params))
                return await session.send_request(request, types.CompleteResult)
        finally:
            _CALLER.reset(token)

    async def _connected(self) -> Client:
        client = self._client
        if client is not None:
            return client
        async with self._connecting:
            if self._client is not None:
                return self._client
            if self._closed or self._task_group is None:
                raise AgentServiceUnavailableError()
            if time.monotonic() < self._retry_at:
                raise AgentServiceUnavailableError()
            try:
                with anyio.fail_after(self._spec.timeout_seconds):
                    client = await self._task_group.start(self._hold)
            except Exception as exc:  # the upstream could not be reached, started or spoken to
                self._retry_at = time.monotonic() + self._retry_pause
                self._retry_pause = min(self._retry_pause * 2, _RETRY_MAX_SECONDS)
                logger.warning(
                    "agent %s: the upstream MCP server cannot be opened: %s", self._agent_id, failure_line(exc)
                )
                if isinstance(exc, TimeoutError):
                    raise ServiceTimeoutError(self._spec.timeout_seconds) from None
                raise AgentServiceUnavailableError() from None
            self._retry_pause = _RETRY_FIRST_SECONDS
            self._client, self._opened_at = client, time.monotonic()
            return client

    async def _hold(self, *, task_status: anyio.abc.TaskStatus[Client] = anyio.TASK_STATUS_IGNORED) -> None:
        """Open the upstream client, hand it over, and keep it open until it is lost or the backend closes
        (one task enters and leaves it: its cancel scopes are that task's)."""
        lost = anyio.Event()
        client: Client | None = None
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(self._client_for(stack))
                keep_request_client_capabilities(client.session)
                self._lost = lost
                self._lists.clear()
                task_status.started(client)
                async with anyio.create_task_group() as tasks:
                    if client.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        tasks.start_soon(self._listen, client)
                    await lost.wait()
                    tasks.cancel_scope.cancel()
        except Exception as exc:
            if client is None:  # before the hand-over: the opening request gets it (_connected)
                raise
            # After it: this task runs in the runtime's shared task group, which an exception would end
            # for every agent. The connection is over (a cut-off answer, a dropped stream): say so, and
            # the next request opens a new one.
            logger.warning("agent %s: the upstream MCP connection ended: %s", self._agent_id, failure_line(exc))
        finally:
            if client is not None and self._client is client:
                self._client = None

    async def _listen(self, client: Client) -> None:
        """A 2026-07-28 upstream's list changes, from its ``subscriptions/listen`` stream, become the agent's
        (re-listened after the stream drops; a refusal is logged once, and the lists are then only cached
        for :data:`LIST_CACHE_SECONDS`)."""
        pause = _RETRY_FIRST_SECONDS
        while True:
            try:
                async with client.listen(
                    tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
                ) as subscription:
                    pause = _RETRY_FIRST_SECONDS
                    async for event in subscription:
                        if isinstance(event, ToolsListChanged | PromptsListChanged | ResourcesListChanged):
                            await self._announce(event)
            except MCPError as exc:
                logger.info("agent %s: the upstream refused subscriptions/listen: %s", self._agent_id, exc)
                return
            except Exception as exc:  # the stream dropped: listen again after a pause
                logger.info("agent %s: the upstream's listen stream ended: %s", self._agent_id, failure_line(exc))
            await anyio.sleep(pause)
            pause = min(pause * 2, _RETRY_MAX_SECONDS)

    def _client_for(self, stack: AsyncExitStack) -> Client:
        spec = self._spec
        common: dict[str, Any] = {
            "mode": "auto",
            "cache": None,
            "message_handler": self._on_message,
            "read_timeout_seconds": None,
            "sampling_callback": _ask_caller,
            "elicitation_callback": _ask_caller,
            "list_roots_callback": _ask_caller_for_roots,
            "logging_callback": _log_to_caller,
        }
        if spec.command is not None:
            command, *args = spec.command
            env = {**_minimal_env(), **spec.env}
            # A byte that is not UTF-8 would end the SDK's stdio reader without closing the session (every
            # later call would time out on a live child): it is replaced, and the line fails as JSON.
            parameters = StdioServerParameters(command=command, args=args, env=env, encoding_error_handler="replace")
            return Client(parameters, **common)
        headers = dict(spec.headers)
        if spec.bearer_env is not None:
            token = os.environ.get(spec.bearer_env)
            if not token:
                raise AgentServiceUnavailableError(f"the environment variable {spec.bearer_env} is not set")
            headers["Authorization"] = f"Bearer {token}"
        http = httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(spec.timeout_seconds),
            follow_redirects=False,
            transport=_LimitedTransport(spec.max_result_bytes),
        )
        stack.push_async_callback(http.aclose)
        assert spec.url is not None
        return Client(streamable_http_client(spec.url, http_client=http), **common)

    async def _on_message(self, message: Any) -> None:
        """The upstream's notifications: a list change drops the cached lists and is the agent's own."""
        if isinstance(message, Exception):
            logger.info("agent %s: the upstream MCP connection reported: %s", self._agent_id, failure_line(message))
            return
        root = getattr(message, "root", message)
        event = None
        if isinstance(root, types.ToolListChangedNotification):
            event = ToolsListChanged()
        elif isinstance(root, types.PromptListChangedNotification):
            event = PromptsListChanged()
        elif isinstance(root, types.ResourceListChangedNotification):
            event = ResourcesListChanged()
        if event is not None:
            await self._announce(event)

    async def _announce(self, event: ToolsListChanged | PromptsListChanged | ResourcesListChanged) -> None:
        """An upstream list change: the cached pages go, and the agent's listeners hear of it, at most once
        a :data:`_CHANGE_COALESCE_SECONDS` per kind (a flood of notifications is one announcement)."""
        self._lists.clear()
        now = time.monotonic()
        kind = type(event)
        if now - self._announced.get(kind, -_CHANGE_COALESCE_SECONDS) < _CHANGE_COALESCE_SECONDS:
            return
        self._announced[kind] = now
        if self.subscription_bus is not None:
            await self.subscription_bus.publish(event)

    def _forget(self, client: Client) -> None:
        """The connection of ``client`` failed (a stdio upstream crashed): the next request opens a new one,
        at once the first time; when the new one fails too within :data:`_SHORT_LIVED_SECONDS`, after a
        back-off that doubles (1 s to 30 s), so a process that dies at once is not restarted by every call."""
        if self._client is client:
            self._client = None
            now = time.monotonic()
            self._short_lived = self._short_lived + 1 if now - self._opened_at < _SHORT_LIVED_SECONDS else 0
            if self._short_lived > 1:  # the process it was restarted into died young too
                self._retry_at = now + min(_RETRY_FIRST_SECONDS * 2 ** (self._short_lived - 2), _RETRY_MAX_SECONDS)
            if self._lost is not None:
                self._lost.set()


class ResultTooLargeError(httpx2.ReadError):
    """An upstream's answer to one request passed the backend's ``max_result_bytes`` (the rest is not read)."""


class _LimitedStream(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, limit: int, request: httpx2.Request) -> None:
        self._stream, self._limit, self._request = stream, limit, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                raise ResultTooLargeError(f"the answer passed {self._limit} bytes", request=self._request)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class _LimitedTransport(httpx2.AsyncBaseTransport):
    """The HTTP transport of one upstream: the answer to each POST (one request's result, or its SSE
    stream) is cut off past ``limit`` bytes. The handshake era's standalone GET stream, which lives as
    long as the session, is not counted."""

    def __init__(self, limit: int) -> None:
        self._inner = httpx2.AsyncHTTPTransport(retries=0)
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method == "POST" and isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _LimitedStream(response.stream, self._limit, request)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


_LIST_KEYS = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}


_CALLER: ContextVar[ServerRequestContext[Any, Any] | None] = ContextVar("hivegate_upstream_caller", default=None)
"""The request whose upstream call is running in this task (the input-required driver runs in it)."""


async def _ask_caller(context: ClientRequestContext, params: Any) -> Any:
    """An upstream's sampling or elicitation request, asked of the caller whose call it belongs to.

    Only a question embedded in an ``InputRequiredResult`` is asked in the calling task; one the upstream
    sends on its own (a handshake-era server's request outside any call of this task) has no caller to
    go to, and is declined."""
    caller = _CALLER.get()
    if caller is None:
        return types.ErrorData(code=types.INVALID_REQUEST, message="the gateway has no caller to ask")
    try:
        if isinstance(params, types.CreateMessageRequestParams):
            result_type: Any = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
            request: Any = types.CreateMessageRequest(params=params)
        else:
            result_type, request = types.ElicitResult, types.ElicitRequest(params=params)
        return await caller.session.send_request(request, result_type)
    except MCPError as exc:
        return exc.error


async def _log_to_caller(params: types.LoggingMessageNotificationParams) -> None:
    """An upstream's log message for a call, relayed to that call's caller (when it arrives in the call's
    task; a message without a caller to go to is dropped)."""
    caller = _CALLER.get()
    if caller is not None:
        # Deprecated as of 2026-07-28 (SEP-2577), the handshake era's way still: the session applies the
        # caller's level (logging/setLevel, or its request's opt-in).
        await caller.session.send_log_message(  # pyright: ignore[reportDeprecated]
            params.level, params.data, params.logger, caller.request_id
        )


async def _ask_caller_for_roots(context: ClientRequestContext) -> Any:
    """An upstream's ``roots/list``, asked of the caller (as :func:`_ask_caller`)."""
    caller = _CALLER.get()
    if caller is None:
        return types.ErrorData(code=types.INVALID_REQUEST, message="the gateway has no caller to ask")
    try:
        return await caller.session.send_request(types.ListRootsRequest(), types.ListRootsResult)
    except MCPError as exc:
        return exc.error


def _forwarded_params(params: Mapping[str, Any], modern: bool) -> dict[str, Any]:
    """The caller's params without what belongs to its own connection: the protocol envelope in ``_meta``
    (the SDK client stamps the upstream connection's own), except, to a 2026-07-28 upstream, the caller's
    client capabilities (SEP-2322: the upstream asks for input only as the caller can give it); and its
    ``progressToken`` (progress is relayed on the caller's token by a callback)."""
    forwarded = dict(params)
    meta = forwarded.get("_meta")
    if isinstance(meta, Mapping):
        kept = {
            k: v
            for k, v in meta.items()
            if (
                not k.startswith(_ENVELOPE_PREFIX)
                or (modern and k in (CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY))
            )
            and k != "progressToken"
        }
        if kept:
            forwarded["_meta"] = kept
        else:
            forwarded.pop("_meta")
    return forwarded


def _progress_to(ctx: ServerRequestContext[Any, Any]) -> ProgressFnT:
    """Relay upstream progress to the caller's request (a no-op when the caller asked for none)."""

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.report_progress(progress, total, message)

    return relay


def _minimal_env() -> dict[str, str]:
    """What a stdio upstream inherits of the gateway's environment: enough to find and run a program,
    none of the gateway's own settings or secrets (``HIVEGATE_*``, tokens)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "USER")
    return {name: os.environ[name] for name in keep if name in os.environ}
