"""MCP handlers of the user-level endpoint ``/mcp``: every agent the caller may use, on one server.

The caller is :func:`~hivegate.auth.principal.current_principal`; the agents it sees are the
registered agents with ``mcp_enabled`` that :meth:`Principal.may_reach` admits, ordered by id.

- tools: ``discover_agents`` (:data:`DISCOVER_TOOL`, first): the cards of the agents the caller may
  see, filtered and paginated exactly as ``GET /api/v1/agents`` (:mod:`hivegate.a2a.discovery`), as
  ``structuredContent`` ``{"agents": [card, …], "nextCursor"?}`` plus a text summary; a bad filter or
  cursor is -32602. An agent whose id is ``discover_agents`` has no message tool here (its own
  endpoint still serves it). Then each such agent's message tool, exactly as the agent's own endpoint lists it (named by
  the agent id); a call goes to the invocation layer exactly as on the agent's endpoint
  (:func:`hivegate.mcp.tool_calls.call_own_tool`), so progress, reply deltas, ``isError`` results,
  the deadline (-32003) and cancellation are the agent endpoint's.
- resources: each agent's resources, named ``{agent}.{name}``, at
  ``hivegate://agents/{agent}/resource?uri=<the original URI, percent-encoded>`` (reversible, and
  one agent per URI: agent ids contain no ``/``); a read is served by the agent with the original
  URI, and the URIs in the contents are wrapped the same way.
- resource templates: none. A wrapped template could not be expanded reversibly (a client's
  RFC 6570 expansion percent-encodes values, which would then decode once too often), so
  templated resources stay on the agents' own endpoints.
- prompts: each agent's prompts, named ``{agent}.{name}``; ``prompts/get`` and prompt-argument
  completion are served by the agent with the original name.

Each list is paginated with signed cursors bound to the caller's user id. Errors are those of
the agent endpoints: an unknown (or out of reach) tool or prompt is -32602; an unknown resource
is -32602 with ``data.uri`` on 2026-07-28 and -32002 before it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    CompleteRequestParams,
    CompleteResult,
    Completion,
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
    TextContent,
    Tool,
)
from pydantic import BaseModel

from hivegate.a2a.discovery import DEFAULT_LIMIT, MAX_FILTER_CHARS, MAX_LIMIT, AgentDiscovery, DiscoveryPage
from hivegate.agents.model import AGENT_ID_PATTERN, AgentSpec
from hivegate.agents.registry import AgentChange
from hivegate.auth.principal import Principal, current_principal
from hivegate.errors import (
    INVALID_PARAMS,
    AgentServiceUnavailableError,
    ResourceNotFoundError,
    UnknownPromptError,
    UnknownToolError,
)
from hivegate.mcp.host import AgentHost
from hivegate.mcp.pagination import CursorCodec
from hivegate.mcp.runtime import AgentRuntime
from hivegate.mcp.sdk_errors import guarded
from hivegate.mcp.tool_calls import call_own_tool

__all__ = [
    "DISCOVER_TOOL",
    "DISCOVER_TOOL_SCHEMA",
    "OwnedAgents",
    "UserHandlers",
    "prefixed_name",
    "unwrap_resource_uri",
    "wrap_resource_uri",
]

logger = logging.getLogger(__name__)

RESOURCE_URI_PREFIX = "hivegate://agents/"
_RESOURCE_URI_MIDDLE = "/resource?uri="
_AGENT_ID = re.compile(AGENT_ID_PATTERN)
_MAX_AGENT_PAGES = 1000
"""Pages read from one agent's list for the merged list (a loop guard; agents' lists are finite)."""

DISCOVER_TOOL = "discover_agents"
"""The discovery tool's name on ``/mcp``."""

DISCOVER_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tag": {"type": "string", "maxLength": MAX_FILTER_CHARS, "description": "Only agents with a skill tagged so."},
        "skill": {"type": "string", "maxLength": MAX_FILTER_CHARS, "description": "Only agents with this skill id."},
        "q": {
            "type": "string",
            "maxLength": MAX_FILTER_CHARS,
            "description": "Case-insensitive text in the agent's name or description.",
        },
        "cursor": {"type": "string", "description": "nextCursor of the previous page."},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIMIT,
            "description": f"Agents per page (default {DEFAULT_LIMIT}).",
        },
    },
    "additionalProperties": False,
}

_DISCOVER_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "agents": {"type": "array", "items": {"type": "object"}, "description": "A2A agent cards."},
        "nextCursor": {"type": "string"},
    },
    "required": ["agents"],
}

DISCOVER_TOOL_DEFINITION = Tool(
    name=DISCOVER_TOOL,
    title="Discover agents",
    description=(
        "Find agents on this gateway: your own and the public ones. Returns their A2A agent cards, "
        "filtered by skill tag, skill id or text, a page at a time (pass nextCursor back as cursor). "
        "Listing an agent does not mean you may call it."
    ),
    input_schema=DISCOVER_TOOL_SCHEMA,
    output_schema=_DISCOVER_OUTPUT_SCHEMA,
)


def _summary(page: DiscoveryPage) -> str:
    if not page.cards:
        return "No agents match."
    lines = [f"{len(page.cards)} agent(s):"]
    for card in page.cards:
        interfaces: list[dict[str, Any]] = card.get("supportedInterfaces", [])
        url = interfaces[0].get("url", "") if interfaces else ""
        lines.append(f"- {card.get('name', '')}: {card.get('description', '')} ({url})")
    if page.next_cursor is not None:
        lines.append(f"More: call again with cursor {page.next_cursor!r}.")
    return "\n".join(lines)


Ctx = ServerRequestContext[Any, Any]
M = TypeVar("M", bound=BaseModel)


def wrap_resource_uri(agent_id: str, uri: str) -> str:
    """``hivegate://agents/{agent_id}/resource?uri=<uri percent-encoded>`` (every reserved character encoded)."""
    return f"{RESOURCE_URI_PREFIX}{agent_id}{_RESOURCE_URI_MIDDLE}{quote(uri, safe='')}"


def unwrap_resource_uri(uri: str) -> tuple[str, str] | None:
    """``(agent_id, original uri)`` of a URI made by :func:`wrap_resource_uri`, or None for any other URI."""
    if not uri.startswith(RESOURCE_URI_PREFIX):
        return None
    agent_id, middle, encoded = uri[len(RESOURCE_URI_PREFIX) :].partition(_RESOURCE_URI_MIDDLE)
    if not middle or not encoded or not _AGENT_ID.fullmatch(agent_id):
        return None
    try:
        return agent_id, unquote(encoded, errors="strict")
    except UnicodeDecodeError:
        return None


def prefixed_name(agent_id: str, name: str) -> str:
    """``{agent_id}.{name}``: unambiguous, as agent ids contain no ``.``."""
    return f"{agent_id}.{name}"


def _split_name(name: str) -> tuple[str, str] | None:
    agent_id, dot, rest = name.partition(".")
    return (agent_id, rest) if dot and rest and _AGENT_ID.fullmatch(agent_id) else None


class OwnedAgents:
    """Registered agent specs by owner (usernames compare ignoring case), kept in step with the registry.

    So a request lists only its user's agents, whatever the number of registered agents.
    """

    def __init__(self) -> None:
        self._by_owner: dict[str, dict[str, AgentSpec]] = {}

    def load(self, specs: Sequence[AgentSpec]) -> None:
        self._by_owner.clear()
        for spec in specs:
            self._by_owner.setdefault(spec.owner.casefold(), {})[spec.id] = spec

    def apply(self, change: AgentChange) -> None:
        """Follow one registry change (a registry listener: synchronous, never raises)."""
        if change.before is not None:
            owned = self._by_owner.get(change.before.owner.casefold())
            if owned is not None:
                owned.pop(change.agent_id, None)
                if not owned:
                    del self._by_owner[change.before.owner.casefold()]
        if change.after is not None:
            self._by_owner.setdefault(change.after.owner.casefold(), {})[change.agent_id] = change.after

    def reachable(self, principal: Principal) -> list[AgentSpec]:
        """The MCP-enabled agents ``principal`` may use, ordered by id."""
        if principal.username is None:
            return []
        owned = self._by_owner.get(principal.username.casefold(), {})
        return [
            spec
            for spec in (owned[k] for k in sorted(owned))
            if spec.mcp_enabled and principal.may_reach(spec.id, spec.owner)
        ]


_guarded = guarded(lambda self: "user endpoint")
"""Map hivegate errors to their MCP form and hide unexpected exceptions behind -32603."""


def _with_params(ctx: Ctx, **changes: Any) -> Ctx:
    """``ctx`` with some request params replaced (what an agent's handler forwards to a backend server)."""
    return replace(ctx, params={**(ctx.params or {}), **changes})


class UserHandlers:
    """The handlers of the user-level server.

    Args:
        host: the agents' runtimes (built on first use, as for the agent endpoints).
        agents: agent specs by owner.
        codec: signs cursors; ``page_size`` items per page.
        on_runtime: told of every runtime a request uses (the endpoint relays its change events).
        discovery: serves the ``discover_agents`` tool (without it there is no such tool).
    """

    def __init__(
        self,
        host: AgentHost,
        agents: OwnedAgents,
        codec: CursorCodec,
        page_size: int,
        on_runtime: Callable[[AgentRuntime], None] | None = None,
        discovery: AgentDiscovery | None = None,
    ) -> None:
        self._discovery = discovery
        self._host = host
        self._agents = agents
        self._codec = codec
        self._page_size = page_size
        self._on_runtime = on_runtime

    # -- agents ------------------------------------------------------------------------

    def _reachable_spec(self, agent_id: str) -> AgentSpec | None:
        spec = self._host.spec(agent_id)
        if spec is None or not spec.mcp_enabled or not current_principal().may_reach(agent_id, spec.owner):
            return None
        return spec

    async def _runtime(self, agent_id: str) -> AgentRuntime | None:
        """The running agent, or None when it is gone.

        Raises:
            AgentServiceUnavailableError: its backend cannot be started.
        """
        runtime = await self._host.runtime(agent_id)
        if runtime is not None and self._on_runtime is not None:
            self._on_runtime(runtime)
        return runtime

    async def _reachable_runtimes(self) -> list[AgentRuntime]:
        """The runtimes of the caller's reachable agents; agents whose backend cannot start are left out."""
        runtimes: list[AgentRuntime] = []
        for spec in self._agents.reachable(current_principal()):
            try:
                runtime = await self._runtime(spec.id)
            except AgentServiceUnavailableError:
                continue  # the host logged why, once; the agent's own endpoint answers 503
            if runtime is not None:
                runtimes.append(runtime)
        return runtimes

    async def _agent_items(
        self,
        ctx: Ctx,
        runtime: AgentRuntime,
        list_page: Callable[[Ctx, PaginatedRequestParams | None], Awaitable[Any]],
        key: str,
    ) -> list[Any]:
        """Every item of one agent's list (all its pages), as its own endpoint lists them; [] if it fails."""
        items: list[Any] = []
        cursor: str | None = None
        try:
            for _ in range(_MAX_AGENT_PAGES):
                page = await list_page(ctx, PaginatedRequestParams(cursor=cursor))
                items.extend(getattr(page, key))
                cursor = page.next_cursor
                if not cursor:
                    break
        except MCPError as exc:
            # One failing agent (an SDK-server backend raising) must not hide the others.
            logger.warning("user endpoint: agent %s: %s failed (%s)", runtime.view.spec.id, ctx.method, exc.message)
            return []
        return items

    # -- pagination --------------------------------------------------------------------

    def _scope(self, method: str) -> str:
        # Agent-endpoint scopes are "{agent_id} {method}"; agent ids contain no "/".
        return f"/mcp {current_principal().user_id} {method}"

    def _check_cursor(self, method: str, params: PaginatedRequestParams | None) -> str | None:
        """The request's cursor, checked before any agent is consulted (InvalidCursorError: -32602)."""
        cursor = params.cursor if params else None
        self._codec.decode(self._scope(method), cursor)
        return cursor

    def _page(self, method: str, items: list[M], cursor: str | None) -> tuple[list[M], str | None]:
        page = self._codec.paginate(self._scope(method), items, cursor, self._page_size)
        return page.items, page.next_cursor

    # -- tools -------------------------------------------------------------------------

    @_guarded
    async def on_list_tools(self, ctx: Ctx, params: PaginatedRequestParams | None) -> ListToolsResult:
        cursor = self._check_cursor("tools/list", params)
        tools: list[Tool] = [DISCOVER_TOOL_DEFINITION] if self._discovery is not None else []
        for runtime in await self._reachable_runtimes():
            view = runtime.view
            if view.spec.id == DISCOVER_TOOL and self._discovery is not None:
                continue
            if view.spec.id in view.tool_index:  # the agent has a message tool (named by its id)
                tools.append(next(t for t in view.own_tools if t.name == view.spec.id))
        items, next_cursor = self._page("tools/list", tools, cursor)
        return ListToolsResult(tools=items, next_cursor=next_cursor)

    @_guarded
    async def on_call_tool(
        self, ctx: Ctx, params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        if params.name == DISCOVER_TOOL and self._discovery is not None:
            return self._discover(params.arguments or {})
        unknown = UnknownToolError(f"Unknown tool: {params.name}", data={"name": params.name})
        if self._reachable_spec(params.name) is None:
            raise unknown
        runtime = await self._runtime(params.name)
        if runtime is None or params.name not in runtime.view.tool_index:
            raise unknown
        return await call_own_tool(ctx, runtime.view, params, self._host.policy)

    def _discover(self, arguments: dict[str, Any]) -> CallToolResult:
        """``discover_agents``: one page of cards (InvalidParamsError, InvalidCursorError: -32602)."""
        assert self._discovery is not None
        page = self._discovery.search(current_principal(), arguments)
        return CallToolResult(
            content=[TextContent(type="text", text=_summary(page))], structured_content=page.document()
        )

    # -- resources ---------------------------------------------------------------------

    @_guarded
    async def on_list_resources(self, ctx: Ctx, params: PaginatedRequestParams | None) -> ListResourcesResult:
        cursor = self._check_cursor("resources/list", params)
        resources: list[Resource] = []
        for runtime in await self._reachable_runtimes():
            agent_id = runtime.view.spec.id
            for resource in await self._agent_items(ctx, runtime, runtime.handlers.on_list_resources, "resources"):
                assert isinstance(resource, Resource)
                resources.append(
                    resource.model_copy(
                        update={
                            "uri": wrap_resource_uri(agent_id, resource.uri),
                            "name": prefixed_name(agent_id, resource.name),
                        }
                    )
                )
        items, next_cursor = self._page("resources/list", resources, cursor)
        return ListResourcesResult(resources=items, next_cursor=next_cursor)

    @_guarded
    async def on_list_resource_templates(
        self, ctx: Ctx, params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        self._check_cursor("resources/templates/list", params)
        return ListResourceTemplatesResult(resource_templates=[])

    @_guarded
    async def on_read_resource(
        self, ctx: Ctx, params: ReadResourceRequestParams
    ) -> ReadResourceResult | InputRequiredResult:
        target = unwrap_resource_uri(params.uri)
        if target is None or self._reachable_spec(target[0]) is None:
            raise ResourceNotFoundError(params.uri)
        agent_id, uri = target
        runtime = await self._runtime(agent_id)
        if runtime is None:
            raise ResourceNotFoundError(params.uri)
        try:
            result = await runtime.handlers.read_resource(
                _with_params(ctx, uri=uri), params.model_copy(update={"uri": uri})
            )
        except ResourceNotFoundError as exc:
            if exc.uri == uri:
                raise ResourceNotFoundError(params.uri) from None
            raise
        if isinstance(result, InputRequiredResult):
            return result
        contents = [c.model_copy(update={"uri": wrap_resource_uri(agent_id, c.uri)}) for c in result.contents]
        return result.model_copy(update={"contents": contents})

    # -- prompts -----------------------------------------------------------------------

    @_guarded
    async def on_list_prompts(self, ctx: Ctx, params: PaginatedRequestParams | None) -> ListPromptsResult:
        cursor = self._check_cursor("prompts/list", params)
        prompts: list[Prompt] = []
        for runtime in await self._reachable_runtimes():
            agent_id = runtime.view.spec.id
            for prompt in await self._agent_items(ctx, runtime, runtime.handlers.on_list_prompts, "prompts"):
                assert isinstance(prompt, Prompt)
                prompts.append(prompt.model_copy(update={"name": prefixed_name(agent_id, prompt.name)}))
        items, next_cursor = self._page("prompts/list", prompts, cursor)
        return ListPromptsResult(prompts=items, next_cursor=next_cursor)

    async def _prompt_runtime(self, name: str) -> tuple[AgentRuntime, str] | None:
        """The runtime serving the prefixed prompt ``name`` and the agent's own name for it."""
        target = _split_name(name)
        if target is None or self._reachable_spec(target[0]) is None:
            return None
        runtime = await self._runtime(target[0])
        return (runtime, target[1]) if runtime is not None else None

    @_guarded
    async def on_get_prompt(self, ctx: Ctx, params: GetPromptRequestParams) -> GetPromptResult | InputRequiredResult:
        unknown = UnknownPromptError(f"Unknown prompt: {params.name}", data={"name": params.name})
        found = await self._prompt_runtime(params.name)
        if found is None:
            raise unknown
        runtime, name = found
        try:
            return await runtime.handlers.get_prompt(
                _with_params(ctx, name=name), params.model_copy(update={"name": name})
            )
        except UnknownPromptError:
            raise unknown from None
        except MCPError as exc:  # the agent's backend server's own answer for a prompt it does not have
            if exc.code == INVALID_PARAMS and exc.data == {"name": name}:
                raise unknown from None
            raise

    # -- completion --------------------------------------------------------------------

    @_guarded
    async def on_completion(self, ctx: Ctx, params: CompleteRequestParams) -> CompleteResult:
        """Prompt arguments complete as on the agent's endpoint; there are no templates here to complete."""
        ref = params.ref
        found = await self._prompt_runtime(ref.name) if isinstance(ref, PromptReference) else None
        if found is None:
            return CompleteResult(completion=Completion(values=[], total=0, has_more=False))
        runtime, name = found
        agent_ref = PromptReference(type="ref/prompt", name=name)
        forwarded = _with_params(ctx, ref=agent_ref.model_dump(by_alias=True, mode="json", exclude_none=True))
        return await runtime.handlers.on_completion(forwarded, params.model_copy(update={"ref": agent_ref}))
