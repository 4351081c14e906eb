"""The backend interface: how a call reaches the agent behind an endpoint.

A backend may offer two things:

- ``invoke``: run the agent on one message (the agent's message tool and its skill tools);
- ``server``: an MCP server (the official SDK's) whose tools, resources, templates, prompts
  and completions become the agent's own; hivegate delegates those methods to it through
  :meth:`Backend.request`, with its own routing, pagination, cache hints and spec fixes on top.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio.abc
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import SubscriptionBus

from hivegate.auth.principal import ANONYMOUS, Principal
from hivegate.calls.events import Reply, ReplyPart
from hivegate.storage.calls import Turn

__all__ = ["Attachment", "Backend", "DeltaSink", "Invocation", "Reply", "ReplyPart", "failure_line"]


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file handed to the agent: ``uri`` or base64 ``data`` (sent inline), or an uploaded file's bytes.

    An attachment naming an uploaded file (``file_id``, issue 10: ``POST /api/v1/files``) reaches the
    backend with its bytes in ``content`` (byte-identical to the upload), ``size`` and ``sha256`` (hex),
    ``name`` and ``mime_type`` (the caller's ``filename`` / ``content_type``, else the upload's); ``uri``
    and ``data`` are then None. Before the plane resolves it (:mod:`hivegate.files.attachments`) it
    carries only ``file_id`` and the caller's name and type.
    """

    name: str | None = None
    mime_type: str | None = None
    uri: str | None = None
    data: str | None = None
    file_id: str | None = None
    content: bytes | None = field(default=None, repr=False)
    size: int | None = None
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class Invocation:
    """One call of an agent.

    Attributes:
        agent_id: the agent called.
        message: the user's message (for a skill tool without a ``message`` argument, the
            arguments as compact JSON).
        arguments: the tool arguments as sent (a JSON object).
        skill_id: the skill called through its own tool, or None for the message tool.
        context_id: the conversation this call is part of (issue 10 item 1: the one the caller
            named, its MCP session's, or a new one); None for an anonymous call that named none.
        attachments: files sent with the message.
        principal: who is calling (user, OAuth client, granted agents, scopes); never the
            credential itself (MCP authorization: no token passthrough).
        history: reads the conversation's stored turns (:meth:`earlier_turns`); set by the
            invocation layer (:mod:`hivegate.calls.contract`), None without a kept conversation.
    """

    agent_id: str
    message: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    skill_id: str | None = None
    context_id: str | None = None
    attachments: tuple[Attachment, ...] = ()
    principal: Principal = ANONYMOUS
    history: Callable[[int], Awaitable[Sequence[Turn]]] | None = field(default=None, repr=False, compare=False)

    async def earlier_turns(self, limit: int = 20) -> Sequence[Turn]:
        """The conversation's newest ``limit`` (1–1000) turns before this call, oldest first: the caller's
        messages (``role`` ``user``) and the agent's replies (``agent``; ``failed`` for a failure's text).
        Empty without a kept conversation.

        Raises:
            hivegate.errors.StoreUnavailableError: the database failed.
        """
        if self.history is None:
            return ()
        return await self.history(limit)


DeltaSink = Callable[[str], Awaitable[None]]
"""Receives each reply delta of a streaming backend, in order."""


class Backend(Protocol):
    """What hivegate needs from a backend. Both capabilities are optional (see ``can_invoke`` and ``has_server``)."""

    @property
    def can_invoke(self) -> bool:
        """Whether :meth:`invoke` is served (the agent then has a message tool)."""
        ...

    @property
    def has_server(self) -> bool:
        """Whether :meth:`request` is served (an MCP server stands behind the agent)."""
        ...

    @property
    def subscription_bus(self) -> SubscriptionBus | None:
        """The backend server's own change-event bus, if it has one (listen streams forward it)."""
        ...

    def has_method(self, method: str) -> bool:
        """Whether the backend server handles ``method`` (False without a server)."""
        ...

    def tool_input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The backend server's ``inputSchema`` for tool ``name``, when it can tell without a listing."""
        ...

    def serves_plainly(self, method: str) -> bool:
        """Whether the backend server answers a plain 2026-07-28 request for ``method`` (no progress token,
        no log level) without using the caller's session: the request may then take the gateway's lean
        path (:mod:`hivegate.mcp.fastpath`), whose session sends nothing."""
        ...

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Acquire resources (enter the backend server's lifespan, in a task of ``task_group``). Called once."""
        ...

    async def aclose(self) -> None:
        """Release resources. Idempotent."""
        ...

    async def invoke(self, invocation: Invocation, on_delta: DeltaSink | None) -> str | Reply:
        """Run the agent and return its whole reply: its text, or a :class:`Reply` of parts when it has
        more than text (data, files).

        ``on_delta`` receives each delta as it is produced (streaming backends); the return
        value is still the whole reply.

        Raises:
            hivegate.errors.AgentError: the agent failed in a way its caller should see.
        """
        ...

    async def request(self, ctx: ServerRequestContext[Any, Any], method: str, params: Mapping[str, Any]) -> Any:
        """Run ``method`` on the backend's MCP server within ``ctx`` (same session, same streams).

        Returns the handler's result (a pydantic model or a dict).

        Raises:
            mcp.shared.exceptions.MCPError: the backend answered with a protocol error.
        """
        ...


def failure_line(exc: BaseException) -> str:
    """``exc`` as one line for the server log: its type and the first line of its text (300 characters).

    An exception group of one exception (what a task group raises) is that exception, so the line names
    the cause (an HTTP 404, a refused connection), not "unhandled errors in a TaskGroup"."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
