"""The in-process ``python`` backend: a callable, or an MCP server written with the official SDK.

Spec: the TOML shape is ``backend = { type = "python", callable = "module:function" }`` or
``backend = { type = "python", server = "module:attribute" }`` (see :mod:`hivegate.agents.model`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, cast

import anyio
import anyio.abc
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND

from hivegate.agents.model import AgentSpec, PythonBackendSpec
from hivegate.backends.base import DeltaSink, Invocation, Reply
from hivegate.errors import AgentError, InvalidRequestError
from hivegate.mcp.sdk_bridge import is_sdk_tracing, mcpserver_parts

__all__ = ["BackendLoadError", "CallableBackend", "SdkServerBackend", "create_python_backend", "import_object"]

logger = logging.getLogger(__name__)


class BackendLoadError(InvalidRequestError):
    """The backend named in an agent's spec cannot be imported or has the wrong type."""

    code = "backend_load_error"


def import_object(ref: str, base_dir: str | None) -> Any:
    """Import ``module:attribute`` with ``base_dir`` first on ``sys.path``.

    Raises:
        BackendLoadError: the module or attribute does not exist, or importing it failed.
    """
    module_name, _, attr_path = ref.partition(":")
    if base_dir and base_dir not in sys.path:
        sys.path.insert(0, base_dir)
    importlib.invalidate_caches()  # a retry must see a module file created since the last attempt
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr_path.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # an import runs arbitrary code; report any failure the same way
        raise BackendLoadError(f"cannot load {ref!r}: {type(exc).__name__}: {exc}") from exc
    return obj


class CallableBackend:
    """Runs a ``module:function`` that takes an :class:`Invocation`.

    The function may be sync (run in a worker thread), async, or an async generator that
    yields reply deltas (strings). It returns (or yields) the reply text, and raises
    :class:`hivegate.errors.AgentError` for a failure its caller should see; any other
    exception is logged and reported as a generic agent failure (no internals leak).
    """

    can_invoke = True
    has_server = False
    subscription_bus: SubscriptionBus | None = None

    def __init__(self, function: Callable[..., Any]) -> None:
        if not callable(function):
            raise BackendLoadError(f"{function!r} is not callable")
        self._function = function
        self._is_async_gen = inspect.isasyncgenfunction(function)
        self._is_async = inspect.iscoroutinefunction(function)

    def has_method(self, method: str) -> bool:
        return False

    def tool_input_schema(self, name: str) -> Mapping[str, Any] | None:
        return None

    def serves_plainly(self, method: str) -> bool:
        return False

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def invoke(self, invocation: Invocation, on_delta: DeltaSink | None) -> str | Reply:
        try:
            if self._is_async_gen:
                parts: list[str] = []
                async for delta in cast(AsyncIterator[Any], self._function(invocation)):
                    text = str(delta)
                    parts.append(text)
                    if on_delta is not None:
                        await on_delta(text)
                return "".join(parts)
            if self._is_async:
                result = await cast(Awaitable[Any], self._function(invocation))
            else:
                # A thread cannot be interrupted: on a deadline or a cancel the call returns at once
                # and the thread finishes on its own (its result is dropped).
                result = await anyio.to_thread.run_sync(self._function, invocation, abandon_on_cancel=True)
        except AgentError:
            raise
        except Exception:
            logger.exception("agent %s: backend callable raised", invocation.agent_id)
            raise AgentError("The agent failed to produce a reply.") from None
        if isinstance(result, Reply):  # parts beyond text (data, files)
            return result
        return "" if result is None else str(result)

    async def request(self, ctx: ServerRequestContext[Any, Any], method: str, params: Mapping[str, Any]) -> Any:
        raise MCPError(METHOD_NOT_FOUND, "Method not found", data=method)


def _apply(middleware: ServerMiddleware[Any], call_next: CallNext, ctx: ServerRequestContext[Any, Any]) -> Any:
    return middleware(ctx, call_next)


class SdkServerBackend:
    """Fronts an in-process MCP server object (``MCPServer`` or a low-level ``Server``).

    Requests run the server's own middleware chain (for example the request-state sealing of
    multi-round-trip results) and handler inside hivegate's request context, so progress,
    logging and server-to-client requests reach the caller's streams directly. The SDK's
    OpenTelemetry middleware is left out: hivegate's own server already traces the request.
    """

    can_invoke = False
    has_server = True

    def __init__(self, target: Any) -> None:
        self._mcp_server: MCPServer[Any] | None = None
        if isinstance(target, MCPServer):
            self._mcp_server = cast(MCPServer[Any], target)
            self._server: Server[Any]
            self.subscription_bus: SubscriptionBus | None
            self._server, self.subscription_bus = mcpserver_parts(self._mcp_server)
        elif isinstance(target, Server):
            self._server = cast(Server[Any], target)
            self.subscription_bus = None
        else:
            raise BackendLoadError(f"{target!r} is neither an mcp MCPServer nor a low-level Server")
        self._middleware = [m for m in self._server.middleware if not is_sdk_tracing(m)]
        self._lifespan_state: Any = None
        self._stop = anyio.Event()
        self._stopped = anyio.Event()
        self._started = False

    @property
    def server(self) -> Server[Any]:
        return self._server

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Enter the server's lifespan in a task of ``task_group``, held open until :meth:`aclose`.

        The lifespan is entered and left by that one task, whichever task asks for the start or
        the close (a cancel scope must be exited by the task that entered it).
        """
        self._lifespan_state = await task_group.start(self._hold_lifespan)
        self._started = True

    async def _hold_lifespan(self, *, task_status: anyio.abc.TaskStatus[Any] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            async with self._server.lifespan(self._server) as state:
                task_status.started(state)
                await self._stop.wait()
        finally:
            self._stopped.set()

    async def aclose(self) -> None:
        self._stop.set()
        if self._started:
            with anyio.move_on_after(5, shield=True):
                await self._stopped.wait()

    async def invoke(self, invocation: Invocation, on_delta: DeltaSink | None) -> str:
        raise AgentError("This agent has no message tool.")

    async def feature_names(self) -> tuple[list[str], list[str], list[str]] | None:
        """The names of the server's tools, resources (and templates) and prompts, for people (the consent
        page); None for a low-level ``Server``, whose lists need a request context to produce."""
        server = self._mcp_server
        if server is None:
            return None
        tools = [tool.name for tool in await server.list_tools()]
        resources = [r.name for r in await server.list_resources()]
        resources += [t.name for t in await server.list_resource_templates()]
        prompts = [prompt.name for prompt in await server.list_prompts()]
        return tools, resources, prompts

    def has_method(self, method: str) -> bool:
        """Whether the backend server registers a handler for ``method``."""
        return self._server.get_request_handler(method) is not None

    def tool_input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The server's own schema lookup (``MCPServer`` provides one), or None."""
        lookup = self._server.get_tool_input_schema
        return lookup(name) if lookup is not None else None

    def serves_plainly(self, method: str) -> bool:
        """False: the server's handlers run in the caller's request context and may send on its session."""
        return False

    async def request(self, ctx: ServerRequestContext[Any, Any], method: str, params: Mapping[str, Any]) -> Any:
        entry = self._server.get_request_handler(method)
        if entry is None:
            raise MCPError(METHOD_NOT_FOUND, "Method not found", data=method)

        async def inner(inner_ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
            typed = entry.params_type.model_validate(dict(inner_ctx.params or {}), by_name=False)
            return await entry.handler(inner_ctx, typed)

        call: CallNext = inner
        for middleware in reversed(self._middleware):
            call = functools.partial(_apply, middleware, call)
        backend_ctx = replace(ctx, method=method, params=dict(params), lifespan_context=self._lifespan_state)
        return await call(backend_ctx)


def create_python_backend(spec: AgentSpec) -> CallableBackend | SdkServerBackend:
    """Build the backend an agent's ``python`` backend spec names (not yet started).

    Raises:
        BackendLoadError: the target cannot be imported or has the wrong type.
    """
    backend = spec.backend
    if not isinstance(backend, PythonBackendSpec):
        raise BackendLoadError(f"agent {spec.id!r} has no python backend")
    if backend.callable is not None:
        return CallableBackend(import_object(backend.callable, spec.base_dir))
    assert backend.server is not None  # guaranteed by PythonBackendSpec's validator
    return SdkServerBackend(import_object(backend.server, spec.base_dir))
