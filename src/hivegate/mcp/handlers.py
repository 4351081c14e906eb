"""MCP request handlers for one agent: tools, resources, prompts, completion.

These are the handlers registered on the agent's low-level SDK ``Server`` (both eras) and
called by hivegate's lean 2026-07-28 path, so both paths answer alike. They merge the
agent's own features (message tool, skill tools, built-in and declared resources, declared
prompts) with those of an SDK server backend, then paginate with signed cursors.

Where the SDK deviates from the spec, these answer as the spec says:
unknown tool, unknown prompt, missing prompt argument and invalid cursor are -32602
(Spec: MCP 2026-07-28 server/tools#error-handling, server/prompts#error-handling,
server/utilities/pagination); resource not found is -32602 with ``data.uri`` on 2026-07-28
and -32002 before it (SEP-2164).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    InputRequiredResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    Prompt,
    PromptReference,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    SetLevelRequestParams,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel

from hivegate.auth.principal import current_principal
from hivegate.backends.base import Backend
from hivegate.errors import (
    INVALID_PARAMS,
    LEGACY_RESOURCE_NOT_FOUND,
    ResourceNotFoundError,
    ServiceTimeoutError,
    UnknownPromptError,
    UnknownToolError,
)
from hivegate.mcp.pagination import CursorCodec
from hivegate.mcp.prompts import check_prompt_arguments, render_prompt
from hivegate.mcp.sdk_errors import guarded, to_mcp_error
from hivegate.mcp.tool_calls import call_own_tool
from hivegate.mcp.view import AgentView
from hivegate.policy.calls import OPEN_POLICY, CallPolicy

__all__ = ["AgentHandlers", "to_mcp_error"]

logger = logging.getLogger(__name__)

MAX_COMPLETION_VALUES = 100
"""Spec: MCP 2026-07-28 server/utilities/completion: at most 100 values per response."""
_MAX_BACKEND_PAGES = 100

Ctx = ServerRequestContext[Any, Any]
M = TypeVar("M", bound=BaseModel)
H = TypeVar("H", bound=Callable[..., Awaitable[Any]])


_guarded = guarded(lambda self: f"agent {self.view().spec.id}")
"""Map hivegate errors to their MCP form and hide unexpected exceptions behind -32603."""


def _as(model: type[M], value: Any) -> M:
    return value if isinstance(value, model) else model.model_validate(value, by_name=False)


def _meta_params(ctx: Ctx) -> dict[str, Any]:
    meta = (ctx.params or {}).get("_meta")
    return {"_meta": meta} if meta is not None else {}


class AgentHandlers:
    """The MCP handlers of one agent; ``view`` returns the agent's current :class:`AgentView`; ``policy`` checks
    each ``tools/call`` (rate limit, attachments: :mod:`hivegate.policy.calls`)."""

    def __init__(
        self,
        view: Callable[[], AgentView],
        codec: CursorCodec,
        default_page_size: int,
        policy: CallPolicy = OPEN_POLICY,
    ) -> None:
        self.view = view
        self._policy = policy
        self._codec = codec
        self._default_page_size = default_page_size

    # -- backend helpers ---------------------------------------------------------------

    async def _backend_list(self, ctx: Ctx, view: AgentView, method: str, key: str, model: type[M]) -> list[Any]:
        """Every item the backend server lists for ``method`` (all its pages)."""
        backend = view.backend
        if backend is None or not _backend_serves(backend, method):
            return []
        items: list[Any] = []
        params = _meta_params(ctx)
        seen: set[str] = set()
        for _ in range(_MAX_BACKEND_PAGES):
            page = _as(model, await backend.request(ctx, method, params))
            items.extend(getattr(page, key))
            cursor = getattr(page, "next_cursor", None)
            if not cursor:
                break
            if cursor in seen:  # a cursor that loops: the list ends here
                logger.warning("agent %s: the backend's %s cursor repeats; its list ends there", view.spec.id, method)
                break
            seen.add(cursor)
            params = {**_meta_params(ctx), "cursor": cursor}
        else:
            logger.warning(
                "agent %s: the backend's %s has more than %d pages; the rest is not listed",
                view.spec.id,
                method,
                _MAX_BACKEND_PAGES,
            )
        return items

    def _page(self, view: AgentView, method: str, items: list[M], cursor: str | None) -> tuple[list[M], str | None]:
        page_size = view.spec.page_size or self._default_page_size
        page = self._codec.paginate(f"{view.spec.id} {method}", items, cursor, page_size)
        return page.items, page.next_cursor

    async def _listed(
        self,
        ctx: Ctx,
        view: AgentView,
        params: PaginatedRequestParams | None,
        listing: tuple[str, str, type[BaseModel]],
        own: list[Any],
        identity: Callable[[Any], str],
    ) -> tuple[list[Any], str | None]:
        """One page of a list method: the agent's ``own`` items, then the backend server's (``listing``:
        method, result field, result model) that ``identity`` does not already name, paged by cursor."""
        method, key, model = listing
        extra = await self._backend_list(ctx, view, method, key, model)
        hidden = sorted({identity(item) for item in own} & {identity(item) for item in extra})
        if hidden:  # the agent's own item wins (the agents file is refused when it can tell: AgentSpec)
            logger.warning(
                "agent %s: the backend's %s items %s are hidden behind the agent's own of the same name",
                view.spec.id,
                method,
                hidden[:20],
            )
        return self._page(view, method, _merge(own, extra, identity), params.cursor if params else None)

    # -- tools -------------------------------------------------------------------------

    @_guarded
    async def on_list_tools(self, ctx: Ctx, params: PaginatedRequestParams | None) -> ListToolsResult:
        view = self.view()
        listing = ("tools/list", "tools", ListToolsResult)
        items, next_cursor = await self._listed(ctx, view, params, listing, list(view.own_tools), lambda t: t.name)
        return ListToolsResult(tools=items, next_cursor=next_cursor)

    @_guarded
    async def on_call_tool(
        self, ctx: Ctx, params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        view = self.view()
        if params.name in view.tool_index:
            return await call_own_tool(ctx, view, params, self._policy)
        if view.serves_backend:
            backend_tools = await self._backend_list(ctx, view, "tools/list", "tools", ListToolsResult)
            if any(t.name == params.name for t in backend_tools):
                assert view.backend is not None  # serves_backend implies a backend
                await self._policy.check_rate(current_principal(), view.spec)
                timeout = view.spec.invoke_timeout_seconds  # a backend tool's call, like a message: one deadline
                with anyio.move_on_after(timeout) as deadline:
                    return await view.backend.request(ctx, "tools/call", dict(ctx.params or {}))
                if deadline.cancelled_caught:
                    raise ServiceTimeoutError(timeout)
        raise UnknownToolError(f"Unknown tool: {params.name}", data={"name": params.name})

    # -- resources ---------------------------------------------------------------------

    @_guarded
    async def on_list_resources(self, ctx: Ctx, params: PaginatedRequestParams | None) -> ListResourcesResult:
        view = self.view()
        assert view.catalog is not None  # AgentView.build always sets it
        own: list[Resource] = list(view.catalog.resources)
        listing = ("resources/list", "resources", ListResourcesResult)
        items, next_cursor = await self._listed(ctx, view, params, listing, own, lambda r: r.uri)
        return ListResourcesResult(resources=items, next_cursor=next_cursor)

    @_guarded
    async def on_list_resource_templates(
        self, ctx: Ctx, params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        view = self.view()
        assert view.catalog is not None
        own: list[ResourceTemplate] = list(view.catalog.templates)
        listing = ("resources/templates/list", "resource_templates", ListResourceTemplatesResult)
        items, next_cursor = await self._listed(ctx, view, params, listing, own, lambda t: t.uri_template)
        return ListResourceTemplatesResult(resource_templates=items, next_cursor=next_cursor)

    @_guarded
    async def on_read_resource(
        self, ctx: Ctx, params: ReadResourceRequestParams
    ) -> ReadResourceResult | InputRequiredResult:
        return await self.read_resource(ctx, params)

    async def read_resource(
        self, ctx: Ctx, params: ReadResourceRequestParams
    ) -> ReadResourceResult | InputRequiredResult:
        """``resources/read`` before the error conversion (the user-level endpoint calls it too).

        Raises:
            ResourceNotFoundError: neither the agent nor its backend server has ``params.uri``.
            MCPError: the backend server's own protocol error.
        """
        view = self.view()
        assert view.catalog is not None
        if view.catalog.owns(params.uri) or not view.serves_backend:
            return ReadResourceResult(contents=await view.catalog.read(params.uri))
        assert view.backend is not None
        try:
            result = await view.backend.request(ctx, "resources/read", dict(ctx.params or {}))
        except MCPError as exc:
            if exc.code in (INVALID_PARAMS, LEGACY_RESOURCE_NOT_FOUND):
                raise ResourceNotFoundError(params.uri) from None
            raise
        if isinstance(result, InputRequiredResult):
            return result
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            return InputRequiredResult.model_validate(result, by_name=False)
        read = _as(ReadResourceResult, result)
        if not read.contents:  # Spec: SEP-2164: never answer a read with empty contents
            raise ResourceNotFoundError(params.uri)
        return read

    @_guarded
    async def on_subscribe(self, ctx: Ctx, params: SubscribeRequestParams) -> EmptyResult:
        """Legacy ``resources/subscribe``: forwarded to a backend server that serves it, else accepted."""
        return await self._forward_or_empty(ctx, "resources/subscribe")

    @_guarded
    async def on_unsubscribe(self, ctx: Ctx, params: UnsubscribeRequestParams) -> EmptyResult:
        return await self._forward_or_empty(ctx, "resources/unsubscribe")

    @_guarded
    async def on_set_logging_level(self, ctx: Ctx, params: SetLevelRequestParams) -> EmptyResult:
        """Legacy ``logging/setLevel``: forwarded to a backend server that serves it, else accepted."""
        return await self._forward_or_empty(ctx, "logging/setLevel")

    async def _forward_or_empty(self, ctx: Ctx, method: str) -> EmptyResult:
        view = self.view()
        if view.backend is not None and _backend_serves(view.backend, method):
            return _as(EmptyResult, await view.backend.request(ctx, method, dict(ctx.params or {})))
        return EmptyResult()

    # -- prompts -----------------------------------------------------------------------

    @_guarded
    async def on_list_prompts(self, ctx: Ctx, params: PaginatedRequestParams | None) -> ListPromptsResult:
        view = self.view()
        listing = ("prompts/list", "prompts", ListPromptsResult)
        items, next_cursor = await self._listed(ctx, view, params, listing, list(view.prompt_list), lambda p: p.name)
        return ListPromptsResult(prompts=items, next_cursor=next_cursor)

    @_guarded
    async def on_get_prompt(self, ctx: Ctx, params: GetPromptRequestParams) -> GetPromptResult | InputRequiredResult:
        return await self.get_prompt(ctx, params)

    async def get_prompt(self, ctx: Ctx, params: GetPromptRequestParams) -> GetPromptResult | InputRequiredResult:
        """``prompts/get`` before the error conversion (the user-level endpoint calls it too).

        Raises:
            UnknownPromptError: no such prompt (``data``: ``{"name": params.name}``).
            InvalidParamsError: a required argument is missing.
            MCPError: the backend server's own protocol error.
        """
        view = self.view()
        own = view.prompts.get(params.name)
        if own is not None:
            descriptor = next(p for p in view.prompt_list if p.name == params.name)
            return render_prompt(own, check_prompt_arguments(descriptor, params.arguments))
        backend_prompts: list[Prompt] = await self._backend_list(
            ctx, view, "prompts/list", "prompts", ListPromptsResult
        )
        descriptor = next((p for p in backend_prompts if p.name == params.name), None)
        if descriptor is None or view.backend is None:
            raise UnknownPromptError(f"Unknown prompt: {params.name}", data={"name": params.name})
        arguments = check_prompt_arguments(descriptor, params.arguments)
        forwarded = dict(ctx.params or {})
        if "arguments" in forwarded:
            forwarded["arguments"] = arguments
        return await view.backend.request(ctx, "prompts/get", forwarded)

    # -- completion --------------------------------------------------------------------

    @_guarded
    async def on_completion(self, ctx: Ctx, params: CompleteRequestParams) -> CompleteResult:
        view = self.view()
        candidates = self._own_completions(view, params)
        if candidates is None:
            backend = view.backend
            if backend is None or not _backend_serves(backend, "completion/complete"):
                return _completion([])
            result = _as(CompleteResult, await backend.request(ctx, "completion/complete", dict(ctx.params or {})))
            candidates = list(result.completion.values)
        prefix = params.argument.value
        return _completion([c for c in candidates if c.startswith(prefix)])

    def _own_completions(self, view: AgentView, params: CompleteRequestParams) -> list[str] | None:
        ref = params.ref
        if isinstance(ref, PromptReference):
            prompt = view.prompts.get(ref.name)
            if prompt is None:
                return None
            argument = next((a for a in prompt.arguments if a.name == params.argument.name), None)
            return list(argument.completions) if argument is not None else []
        if view.catalog is not None:
            template = view.catalog.template_for(ref.uri)
            if template is None:
                return None
            return list(template.completions.get(params.argument.name, ()))
        return None


def _completion(values: list[str]) -> CompleteResult:
    """Spec: at most 100 values; ``total`` counts all matches and ``hasMore`` says some were cut."""
    return CompleteResult(
        completion=Completion(
            values=values[:MAX_COMPLETION_VALUES], total=len(values), has_more=len(values) > MAX_COMPLETION_VALUES
        )
    )


def _merge(own: list[M], backend: list[M], key: Callable[[M], str]) -> list[M]:
    """The agent's own items, then the backend's whose key is not taken yet: the agent's own win, and of
    a backend's duplicates (an upstream listing one name twice, or a cursor that loops) the first."""
    taken = {key(item) for item in own}
    merged = list(own)
    for item in backend:
        name = key(item)
        if name not in taken:
            taken.add(name)
            merged.append(item)
    return merged


def _backend_serves(backend: Backend, method: str) -> bool:
    return backend.has_server and backend.has_method(method)
