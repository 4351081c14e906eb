"""``RouteTable``: the gateway's one route table, matched without regular expressions on the hot path.

An HTTP request is matched, in this order, by:

1. its path split on ``/``: ``/{agentId}/mcp`` and ``/agents/{agentId}/mcp`` reach the agent
   endpoint with ``path_params = {"agent_id": ...}`` (an agent named ``agents`` is served at
   ``/agents/mcp`` and ``/agents/agents/mcp``);
2. ``/{agentId}/a2a`` and ``/{agentId}/a2a/...``: the agent's A2A bindings (the app reads the id
   from the path itself), before the prefixes, so an agent named like a prefix (``oauth``) has them;
3. the whole path in a dict of exact paths (``/mcp``, the root agent card);
4. for ``/{agentId}/{a}/{b}``, its tail ``{a}/{b}`` in a dict of agent documents
   (``.well-known/agent-card.json``; ``v1/invoke``, the REST invoke): so an agent named like a
   prefix (``oauth``) still has them;
5. its first segment in a dict of prefixes (``oauth``, ``.well-known``);
6. else the Starlette app ``rest`` (its routes, 404 and 405 answers, and the lifespan).

The split replaces Starlette's per-route regex matching for the MCP endpoint, the hot path.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["RouteTable"]

ALIAS_SEGMENT = "agents"
"""The first segment of the alias ``/agents/{agentId}/mcp``."""

A2A_SEGMENT = "a2a"
"""The segment after the agent id on the A2A bindings' paths (``/{agentId}/a2a``)."""


class RouteTable:
    """An ASGI app dispatching to ``agent``, the ``exact`` paths, the ``prefixes`` or ``rest`` (module docstring).

    Args:
        agent: the agent MCP endpoint; it reads ``scope["path_params"]["agent_id"]``.
        exact: whole paths (``"/mcp"``) → app.
        prefixes: first path segments (``"oauth"`` for ``/oauth/...``) → app.
        rest: everything else, and every non-HTTP scope (``lifespan``).
        agent_documents: two-segment tails after an agent id (``".well-known/agent-card.json"``) → app,
            matched before ``prefixes`` (the app reads the id from the path itself).
        a2a: the agents' A2A bindings, for ``/{agentId}/a2a`` and below (the app reads the id from the path).
    """

    def __init__(
        self,
        *,
        agent: ASGIApp,
        exact: Mapping[str, ASGIApp],
        prefixes: Mapping[str, ASGIApp],
        rest: ASGIApp,
        agent_documents: Mapping[str, ASGIApp] | None = None,
        a2a: ASGIApp | None = None,
    ) -> None:
        self._agent = agent
        self._exact = dict(exact)
        self._prefixes = dict(prefixes)
        self._rest = rest
        self._agent_documents = dict(agent_documents or {})
        self._a2a = a2a

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            parts = path.split("/")
            agent_id = agent_in_path(parts)
            if agent_id is not None:
                scope["path_params"] = {"agent_id": agent_id}
                await self._agent(scope, receive, send)
                return
            if self._a2a is not None and len(parts) > 2 and parts[2] == A2A_SEGMENT and parts[1]:
                await self._a2a(scope, receive, send)
                return
            app = self._exact.get(path)
            if app is None and len(parts) == 4 and parts[1]:
                app = self._agent_documents.get(f"{parts[2]}/{parts[3]}")
            if app is None and len(parts) > 1:
                app = self._prefixes.get(parts[1])
            if app is not None:
                await app(scope, receive, send)
                return
        await self._rest(scope, receive, send)


def agent_in_path(parts: list[str]) -> str | None:
    """The agent id of a path split on ``/``, for ``/{agentId}/mcp`` and ``/agents/{agentId}/mcp``; else None.

    ``["", "echo", "mcp"]`` → ``"echo"``; ``["", "agents", "echo", "mcp"]`` → ``"echo"``;
    ``["", "agents", "mcp"]`` → ``"agents"``; an empty segment never names an agent.
    """
    if len(parts) == 3:
        return parts[1] if parts[2] == "mcp" and parts[1] else None
    if len(parts) == 4 and parts[1] == ALIAS_SEGMENT and parts[3] == "mcp" and parts[2]:
        return parts[2]
    return None
