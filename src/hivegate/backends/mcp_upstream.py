"""The ``mcp`` backend: an agent that fronts an upstream MCP server (federation).

Spec: MCP 2025-11-25 and 2026-07-28 (the upstream's era is detected: ``server/discover``, else the
``initialize`` handshake; the official SDK's ``Client(mode="auto")``). TOML:
``backend = { type = "mcp", url = "…" }`` (Streamable HTTP) or ``{ type = "mcp", command = [...] }``
(stdio) (:class:`~hivegate.agents.model.McpBackendSpec`); ``docs/backends.md``.

The upstream's tools, resources, resource templates, prompts and completions become the agent's own:
the agent's handlers (:mod:`hivegate.mcp.handlers`) ask this backend through :meth:`McpUpstreamBackend.request`,
as they ask an in-process SDK server, and put hivegate's pagination (every upstream page is read, and
the merged list paged again with hivegate's opaque cursors), cache hints, spec fixes and credentials on
top. One upstream client per agent (per user with ``isolation = "per_user"``, stdio), opened by the
first request and reused by every call (one HTTP connection pool, or one process for stdio, run by the
supervised :class:`~hivegate.backends.stdio_upstream.StdioTransport`); a lost connection is opened again
by the next request, after a back-off when opening failed; a stdio process idle for ``idle_stop_seconds``
is stopped, and every one is stopped with the backend (:meth:`McpUpstreamBackend.aclose`).

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

What the agent shows of it: the spec's selection of tools and prompts (``include_*``, ``exclude_*``,
``prefix``: :class:`~hivegate.backends.upstream_names.UpstreamNames`), applied to each upstream page as
it arrives; a call of a name it does not show is an unknown tool or prompt (-32602). An upstream tool
whose name is not a valid MCP tool name is left out, with a warning in the log.

Credentials for an HTTP upstream are the agent's own (``headers``, ``bearer_env``, or OAuth client
credentials: :class:`~hivegate.backends.upstream_auth.UpstreamCredentials`), never the caller's.

Failures (the catalogue): an upstream that cannot be reached or started, or whose connection drops, is
``agent_service_unavailable``; one that does not answer within ``timeout_seconds`` is
``service_timeout``. The cause goes to the log with the agent id.
"""

from __future__ import annotations

import functools
import http.cookiejar
import logging
import os
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any, NoReturn, cast

import aiohttp
import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    SubscriptionBus,
    ToolsListChanged,
)
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
from pydantic import ValidationError

from hivegate import __version__
from hivegate.agents.model import McpBackendSpec
from hivegate.auth.principal import current_principal
from hivegate.backends.base import DeltaSink, Invocation, failure_line
from hivegate.backends.stdio_upstream import StdioTransport
from hivegate.backends.upstream_auth import Httpx2UpstreamAuth, UpstreamCredentials
from hivegate.backends.upstream_callers import (
    CALLER,
    Callers,
    ask_caller,
    ask_caller_for_roots,
    log_to_caller,
    progress_to,
)
from hivegate.backends.upstream_http import POST_METHODS, LimitedTransport, ResultTooLargeError, UpstreamPost
from hivegate.backends.upstream_names import UpstreamNames
from hivegate.backends.upstream_pool import UpstreamConnection, UpstreamPool
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

_CLIENT_INFO = types.Implementation(name="hivegate", version=__version__)
"""Who the gateway says it is to an upstream (``clientInfo``), on the SDK client and the lean hop alike."""

_NO_COOKIES = http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
"""A cookie jar that keeps nothing (the SDK client's httpx2 would keep an upstream's ``Set-Cookie`` and send
it with every later caller's request: found by the attack trial)."""

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
        self._callers: dict[int, Callers] = {}
        """Each open upstream client's calls in flight, by ``id`` of the client (:func:`caller_of`)."""
        self._posts: dict[int, UpstreamPost] = {}
        """The lean hop beside each open client of a 2026-07-28 HTTP upstream, by ``id`` of the client
        (:meth:`_call`)."""
        self._cut_offs = 0
        """Upstream answers cut off at ``max_result_bytes`` so far (HTTP; :meth:`request`)."""
        self._pool = UpstreamPool(agent_id, spec, self._hold)
        self._announced: dict[type, float] = {}
        self._names = UpstreamNames.of(spec)
        self._reported: set[str] = set()

    def has_method(self, method: str) -> bool:
        """Whether the upstream serves ``method``: by its capabilities once connected (every forwarded
        method before: the first request connects)."""
        capability = _CAPABILITY_OF.get(method)
        if capability is None:
            return False
        conn = self._pool.caller_connection()
        client = None if conn is None else conn.client
        if client is None:
            return True
        capabilities = client.session.server_capabilities
        return capabilities is not None and getattr(capabilities, capability, None) is not None

    def tool_input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The upstream tool's ``inputSchema`` from its last listing, or None."""
        return self._schemas.get(name)

    def serves_plainly(self, method: str) -> bool:
        """True for every forwarded method: a plain request's answer needs nothing of the caller's session
        (no progress is relayed without a token, no log message without a level, and an upstream's
        request for a 2026-07-28 caller is declined: :func:`caller_of`)."""
        return method in FORWARDED_METHODS

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Remember ``task_group`` for the upstream connection (opened by the first request)."""
        self._pool.start(task_group)

    async def aclose(self) -> None:
        """Close every upstream connection, and wait (bounded) until each stdio process is stopped: its stdin
        closed, then its process group ended. Idempotent."""
        await self._pool.aclose()

    @property
    def _lists(self) -> dict[tuple[str, str | None], tuple[float, Any]]:
        """The caller's connection's cached list pages: each keeps its own (per_user, each user's process may
        list differently)."""
        conn = self._pool.caller_connection()
        return {} if conn is None else conn.lists

    @property
    def _schemas(self) -> dict[str, Mapping[str, Any]]:
        """The caller's connection's tool input schemas (as :attr:`_lists`)."""
        conn = self._pool.caller_connection()
        return {} if conn is None else conn.schemas

    async def invoke(self, invocation: Invocation, on_delta: DeltaSink | None) -> str:
        raise AgentError("This agent has no message tool.")

    async def request(self, ctx: ServerRequestContext[Any, Any], method: str, params: Mapping[str, Any]) -> Any:
        """Run ``method`` with the caller's ``params`` on the upstream (module docstring).

        Raises:
            MCPError: the upstream's own JSON-RPC error, or method not found (a method it does not serve).
            AgentServiceUnavailableError: the upstream cannot be reached, its connection dropped, or its
                answer is not a valid result (never the caller's invalid params).
            ServiceTimeoutError: no answer within ``timeout_seconds`` (a list, a read, a prompt).
        """
        if method not in _CAPABILITY_OF:
            raise MCPError(METHOD_NOT_FOUND, "Method not found", data=method)
        shown = params.get("name") if method == "tools/call" else None
        params = self._names.upstream_params(method, params)
        client = await self._pool.connected()
        if not self.has_method(method):
            if method in _LISTS:  # the upstream has none: an empty list
                return _LISTS[method].model_validate({_LIST_KEYS[method]: []})
            raise MCPError(METHOD_NOT_FOUND, "Method not found", data=method)
        forwarded = _forwarded_params(params, client.session.protocol_version in MODERN_PROTOCOL_VERSIONS)
        cut_offs = self._cut_offs
        try:
            if method in _LISTS:
                return await self._listed(client, method, forwarded)
            return await self._call(ctx, client, method, forwarded, shown)
        except MCPError as exc:
            self._protocol_failure(exc, client, cut=self._cut_offs != cut_offs)
        except TimeoutError:
            raise ServiceTimeoutError(self._spec.timeout_seconds) from None
        except ValidationError as exc:  # the SDK client's check of the upstream's result, not the caller's params
            logger.warning(
                "agent %s: the upstream MCP server's %s result does not validate: %s",
                self._agent_id,
                method,
                failure_line(exc),
            )
            raise AgentServiceUnavailableError() from None
        except (
            httpx2.HTTPError,
            aiohttp.ClientError,
            OSError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            RuntimeError,
        ) as exc:
            if isinstance(exc, ResultTooLargeError):
                self._cut_off_answer()
            logger.warning("agent %s: the upstream MCP server failed: %s", self._agent_id, failure_line(exc))
            self._pool.forget(client)
            raise AgentServiceUnavailableError() from None

    def _protocol_failure(self, exc: MCPError, client: Client, *, cut: bool) -> NoReturn:
        """A request's MCPError (:meth:`request`): the upstream's own error passes as it is; an answer cut
        off (``cut``) or not parsed is that call's ``agent_service_unavailable``; a closed connection is
        forgotten (the next request opens another)."""
        if cut and exc.error.code in (PARSE_ERROR, CONNECTION_CLOSED):
            self._cut_off_answer()  # that answer failed, not the connection: the other calls go on
        if exc.error.code == PARSE_ERROR:  # the SDK client could not parse the upstream's answer
            logger.warning("agent %s: the upstream MCP server answered garbage: %s", self._agent_id, failure_line(exc))
            raise AgentServiceUnavailableError() from None
        if exc.error.code != CONNECTION_CLOSED:  # the upstream's own error: as it is
            raise exc
        logger.warning("agent %s: the upstream MCP server's connection closed", self._agent_id)
        self._pool.forget(client)
        raise AgentServiceUnavailableError() from None

    def _note_cut_off(self) -> None:
        self._cut_offs += 1

    def _cut_off_answer(self) -> NoReturn:
        """The upstream's answer to this request passed ``max_result_bytes`` and was cut off."""
        logger.warning(
            "agent %s: the upstream's answer passed max_result_bytes (%d bytes) and was cut off",
            self._agent_id,
            self._spec.max_result_bytes,
        )
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
            elif method == "resources/list":
                page = await session.list_resources(params=paged)
            elif method == "resources/templates/list":
                page = await session.list_resource_templates(params=paged)
            else:
                page = await session.list_prompts(params=paged)
        page = self._selected(method, page)
        if method == "tools/list":
            if len(self._schemas) > _MAX_SCHEMAS:
                self._schemas.clear()
            self._schemas.update({tool.name: tool.input_schema for tool in page.tools})
        if len(self._lists) >= _MAX_CACHED_PAGES:  # cursors that differ every time: keep it bounded
            self._lists.clear()
        self._lists[key] = (now + LIST_CACHE_SECONDS, page)
        return page

    def _selected(self, method: str, page: Any) -> Any:
        """``page`` as the agent shows it (:class:`~hivegate.backends.upstream_names.UpstreamNames`); an
        upstream tool whose name is not a valid tool name is left out, with a warning (once per name)."""
        page, invalid = self._names.select(method, page)
        for name in invalid:
            if name not in self._reported:
                if len(self._reported) >= _MAX_SCHEMAS:
                    self._reported.clear()
                self._reported.add(name)
                logger.warning(
                    "agent %s: the upstream's tool %r is left out: not a valid MCP tool name%s",
                    self._agent_id,
                    name[:200],
                    f" with the prefix {self._names.prefix!r}" if self._names.prefix else "",
                )
        return page

    async def _call(
        self,
        ctx: ServerRequestContext[Any, Any],
        client: Client,
        method: str,
        params: dict[str, Any],
        shown: object = None,
    ) -> Any:
        """``tools/call``, ``resources/read``, ``prompts/get`` or ``completion/complete`` on the upstream.

        To a 2026-07-28 upstream, the request declares the caller's client capabilities (SEP-2322: it
        asks for input only as the caller can give it). An ``InputRequiredResult`` reaches a 2026-07-28
        caller as it is; for a handshake-era caller, which cannot take one, the gateway drives the rounds
        itself (the SDK client's driver), asking the caller each embedded question as a request on its
        own session (sampling, elicitation, roots) and retrying the upstream with the answers.

        A 2026-07-28 caller's call that needs nothing streamed back (no progress token, no log level)
        to a 2026-07-28 HTTP upstream takes the lean hop: one POST on the same pooled HTTP client
        (:class:`~hivegate.backends.upstream_http.UpstreamPost`), not the SDK client's dispatcher.
        ``shown`` is the tool's name as the agent shows it (its listed schema's key)."""
        session = client.session
        meta = cast(RequestParamsMeta, dict(params.get("_meta") or {}))
        if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            meta[CLIENT_CAPABILITIES_META_KEY] = _declared_capabilities(ctx)
        drive = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        post = self._posts.get(id(client))
        if post is not None and not drive and self._plain(ctx, method, meta):
            return await self._post(post, method, {**params, "_meta": meta}, shown)
        if drive and session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # A handshake-era caller filters log messages by its session's level (logging/setLevel): the
            # upstream sends them all, and the caller's session keeps what its level lets through.
            meta[LOG_LEVEL_META_KEY] = "debug"
        token = CALLER.set(ctx)
        callers = self._callers.get(id(client))
        if callers is not None:
            callers.enter(ctx, current_principal().user_id)
        try:
            if method == "tools/call":  # bounded by the agent's invoke timeout (the caller's), not timeout_seconds
                if drive:
                    return await client.call_tool(
                        params["name"], params.get("arguments"), progress_callback=progress_to(ctx), meta=meta or None
                    )
                return await session.call_tool(
                    params["name"],
                    params.get("arguments"),
                    progress_callback=progress_to(ctx),
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
            CALLER.reset(token)
            if callers is not None:
                callers.calls.pop(id(ctx), None)

    @staticmethod
    def _plain(ctx: ServerRequestContext[Any, Any], method: str, meta: Mapping[str, Any]) -> bool:
        """Whether a 2026-07-28 caller's call needs nothing streamed back: no progress, no log messages."""
        caller_meta = ctx.meta or {}
        asks_progress = "progressToken" in caller_meta or "progress_token" in caller_meta  # lean path; SDK path
        return method in POST_METHODS and LOG_LEVEL_META_KEY not in meta and not asks_progress

    async def _post(self, post: UpstreamPost, method: str, params: dict[str, Any], shown: object) -> Any:
        """The lean hop (:meth:`_call`): a ``tools/call`` is bounded by the agent's invoke timeout (the
        caller's), the other methods by ``timeout_seconds``.

        A failed POST fails its own call only (``agent_service_unavailable``): the 2026-07-28 wire has no
        connection to lose, so the agent's upstream client is kept, and no restart back-off starts (two
        bad answers in a row used to make the next good call wait for it)."""
        try:
            if method == "tools/call":
                schema = self._schemas.get(shown) if isinstance(shown, str) else None
                return await post.request(method, params, schema)
            with anyio.fail_after(self._spec.timeout_seconds):
                return await post.request(method, params)
        except TimeoutError:
            raise  # aiohttp's timeouts are TimeoutErrors too: service_timeout (request)
        except ResultTooLargeError:
            self._cut_off_answer()
        except (aiohttp.ClientError, httpx2.HTTPError, OSError) as exc:
            logger.warning("agent %s: the upstream MCP server failed: %s", self._agent_id, failure_line(exc))
            raise AgentServiceUnavailableError() from None

    async def _hold(
        self, conn: UpstreamConnection, *, task_status: anyio.abc.TaskStatus[Client] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Open the upstream client of ``conn``, hand it over, and keep it open until it is lost or stopped, or
        the backend closes (one task enters and leaves it: its cancel scopes are that task's)."""
        lost = anyio.Event()
        stopped = anyio.Event()
        self._pool.running.add(stopped)
        client: Client | None = None
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(self._client_for(stack, conn))
                keep_request_client_capabilities(client.session)
                post = self._lean_hop(client.session.protocol_version)
                if post is not None:
                    self._posts[id(client)] = await stack.enter_async_context(post)
                    stack.callback(self._posts.pop, id(client), None)
                conn.lost = lost
                conn.lists.clear()
                conn.schemas.clear()
                task_status.started(client)
                async with anyio.create_task_group() as tasks:
                    if client.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        tasks.start_soon(self._listen, client)
                    if conn.transport is not None:
                        tasks.start_soon(self._pool.supervise, conn, client, conn.transport)
                    await lost.wait()
                    tasks.cancel_scope.cancel()
        except Exception as exc:
            if client is None:  # before the hand-over: the opening request gets it (UpstreamPool.connected)
                raise
            # After it: this task runs in the runtime's shared task group, which an exception would end
            # for every agent. The connection is over (a cut-off answer, a dropped stream): say so, and
            # the next request opens a new one.
            logger.warning("agent %s: the upstream MCP connection ended: %s", self._agent_id, failure_line(exc))
        finally:
            if client is not None and conn.client is client:
                conn.client = None
            self._pool.running.discard(stopped)
            stopped.set()

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

    def _lean_hop(self, version: str | None) -> UpstreamPost | None:
        """The lean hop beside a new client (:meth:`_call`): for a 2026-07-28 HTTP upstream whose credentials
        are the agent's headers or bearer (an OAuth upstream's token flow stays with the SDK client)."""
        spec = self._spec
        if spec.url is None or spec.oauth is not None or version not in MODERN_PROTOCOL_VERSIONS:
            return None
        return UpstreamPost(
            spec.url,
            version,
            self._upstream_headers(),
            _CLIENT_INFO.model_dump(by_alias=True, mode="json", exclude_none=True),
            timeout_seconds=spec.timeout_seconds,
            max_result_bytes=spec.max_result_bytes,
            on_cut=self._note_cut_off,
        )

    def _upstream_headers(self) -> dict[str, str]:
        """The agent's own headers for an HTTP upstream: ``headers``, and the bearer read from ``bearer_env``.

        Raises:
            AgentServiceUnavailableError: ``bearer_env`` names an unset variable.
        """
        spec = self._spec
        headers = dict(spec.headers)
        if spec.bearer_env is not None:
            token = os.environ.get(spec.bearer_env)
            if not token:
                raise AgentServiceUnavailableError(f"the environment variable {spec.bearer_env} is not set")
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _client_for(self, stack: AsyncExitStack, conn: UpstreamConnection | None = None) -> Client:
        spec = self._spec
        callers = Callers()  # the calls in flight on this client (_call), for the upstream's requests and logs
        stack.callback(lambda: self._callers.pop(id(client), None) if client is not None else None)
        client: Client | None = None
        common: dict[str, Any] = {
            "mode": "auto",
            "cache": None,
            "message_handler": self._on_message,
            "read_timeout_seconds": None,
            "sampling_callback": functools.partial(ask_caller, callers),
            "elicitation_callback": functools.partial(ask_caller, callers),
            "list_roots_callback": functools.partial(ask_caller_for_roots, callers),
            "logging_callback": functools.partial(log_to_caller, callers),
            "client_info": _CLIENT_INFO,
        }
        if spec.command is not None:
            # hivegate's own stdio transport (bounded lines, stderr to the log, no orphan): stdio_upstream.
            transport = StdioTransport(
                spec.command,
                env={**_minimal_env(), **spec.env},
                agent_id=self._agent_id,
                max_message_bytes=spec.max_result_bytes,
            )
            if conn is not None:
                conn.transport = transport
            client = Client(transport, **common)
            self._callers[id(client)] = callers
            return client
        headers = self._upstream_headers()
        auth = None
        if spec.oauth is not None:  # then neither bearer_env nor an Authorization header (the model)
            auth = Httpx2UpstreamAuth(UpstreamCredentials(self._agent_id, oauth=spec.oauth))
        http = httpx2.AsyncClient(
            headers=headers,
            auth=auth,
            # No read timeout: a tools/call is bounded by the agent's invoke timeout, the other requests by
            # timeout_seconds (_call, _listed), and a handshake-era session's GET stream may idle.
            # No pool timeout either: past the pool's connections a call waits for one (its own deadline).
            timeout=httpx2.Timeout(spec.timeout_seconds, read=None, pool=None),
            follow_redirects=False,
            cookies=_NO_COOKIES,  # one client serves every caller: an upstream's cookie must not follow them
            transport=LimitedTransport(spec.max_result_bytes, self._note_cut_off),
        )
        stack.push_async_callback(http.aclose)
        assert spec.url is not None
        client = Client(streamable_http_client(spec.url, http_client=http), **common)
        self._callers[id(client)] = callers
        return client

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
        """An upstream list change: the cached pages go (every connection's: per_user, the change of one
        user's process drops them all), and the agent's listeners hear of it, at most once a
        :data:`_CHANGE_COALESCE_SECONDS` per kind (a flood of notifications is one announcement)."""
        for conn in self._pool.connections():
            conn.lists.clear()
        now = time.monotonic()
        kind = type(event)
        if now - self._announced.get(kind, -_CHANGE_COALESCE_SECONDS) < _CHANGE_COALESCE_SECONDS:
            return
        self._announced[kind] = now
        if self.subscription_bus is not None:
            await self.subscription_bus.publish(event)


_LIST_KEYS = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}


def _declared_capabilities(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The caller's client capabilities, as declared to a 2026-07-28 upstream (SEP-2322): a 2026-07-28
    caller's from its request's envelope (validated), a handshake-era caller's from its session."""
    declared: Any = None
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        raw = (ctx.meta or {}).get(CLIENT_CAPABILITIES_META_KEY)
        if isinstance(raw, Mapping):
            try:
                declared = types.ClientCapabilities.model_validate(raw, by_name=False)
            except ValueError:  # pydantic's ValidationError: the ladder let it through; declare none
                declared = None
    else:
        declared = ctx.session.client_capabilities
    return {} if declared is None else declared.model_dump(by_alias=True, mode="json", exclude_none=True)


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


def _minimal_env() -> dict[str, str]:
    """What a stdio upstream inherits of the gateway's environment: enough to find and run a program,
    none of the gateway's own settings or secrets (``HIVEGATE_*``, tokens)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "USER")
    return {name: os.environ[name] for name in keep if name in os.environ}
