"""The MCP endpoint ``/{agentId}/mcp`` (alias ``/agents/{agentId}/mcp``): the agent kind of the pipeline.

One route and a dict lookup serve every agent (Starlette ``Mount`` routing is linear in the
number of mounts). The gate admits a credential for the agent named by the path; the agent's
runtime (:class:`~hivegate.mcp.runtime.AgentRuntime`, built on first use) serves the request
through the one pipeline (:mod:`hivegate.mcp.pipeline`): its lean paths, or its SDK surface.
"""

from __future__ import annotations

import re

from starlette.types import Receive, Scope, Send

from hivegate.agents.model import AGENT_ID_PATTERN
from hivegate.auth.gate import EndpointGate
from hivegate.auth.principal import Principal
from hivegate.errors import AgentNotFoundError
from hivegate.mcp.host import AgentHost
from hivegate.mcp.pipeline import McpPipeline
from hivegate.mcp.runtime import AgentRuntime
from hivegate.settings import Settings

__all__ = ["AgentEndpointKind", "McpEndpoint"]

_AGENT_ID = re.compile(AGENT_ID_PATTERN)


class AgentEndpointKind:
    """Admission and lookup of ``/{agentId}/mcp``: ``agent_id`` comes from the route's path params."""

    def __init__(self, host: AgentHost, gate: EndpointGate) -> None:
        self._host = host
        self._gate = gate

    async def admit(self, scope: Scope, pairs: list[tuple[str, str]]) -> Principal:
        """The caller, admitted by the gate for the agent (its ``auth`` mode, access and ``mcp_enabled``).

        Raises:
            AgentNotFoundError: no agent can have this id (404; the id never reaches a header).
            GatewayError: as :meth:`~hivegate.auth.gate.EndpointGate.admit_agent`.
        """
        agent_id: str = scope["path_params"]["agent_id"]
        if _AGENT_ID.fullmatch(agent_id) is None:
            # No agent can have this id, so a 404 leaks nothing; and the id never reaches a header.
            raise AgentNotFoundError(agent_id[:64])
        return await self._gate.admit_agent(agent_id, self._host.spec(agent_id), scope["path"], pairs)

    async def target(self, scope: Scope) -> AgentRuntime:
        """The agent's running server (the gate has checked existence, access and ``mcp_enabled``).

        Raises:
            AgentNotFoundError: the agent was deleted since the gate looked (404).
            AgentServiceUnavailableError: its backend cannot be started (503).
        """
        agent_id: str = scope["path_params"]["agent_id"]
        runtime = await self._host.runtime(agent_id)
        if runtime is None:
            raise AgentNotFoundError(agent_id)
        return runtime


class McpEndpoint:
    """ASGI app for ``/{agentId}/mcp``; reads ``agent_id`` from the route's path params."""

    def __init__(self, host: AgentHost, settings: Settings, gate: EndpointGate) -> None:
        self._pipeline = McpPipeline(AgentEndpointKind(host, gate), host.budgets, host.lean_calls, settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._pipeline(scope, receive, send)
