"""RFC 9728 protected-resource metadata for hivegate's MCP endpoints (one builder for every document).

Every document names the endpoint as ``resource`` exactly, hivegate's issuer as the one authorization
server, the ``header`` bearer method, and the scopes a client asks for to reach the endpoint
(``scopes_supported``, never ``offline_access``: MCP 2026-07-28 authorization, "Refresh Tokens"):

- an agent's endpoint (``/{agentId}/mcp`` or ``/agents/{agentId}/mcp``): ``["agent:{agentId}"]``;
- the user-level endpoint ``/mcp``: ``["mcp"]`` (:data:`~hivegate.auth.principal.USER_SCOPE`).

Clients without a scope of their own take it from here (the TypeScript SDK and mcp-remote do, falling
back to ``openid email profile`` when the document has none). The document is built from the id alone,
so whether the agent exists does not leak.
"""

from __future__ import annotations

from typing import Any

from hivegate.auth.principal import USER_SCOPE, agent_scope

__all__ = ["protected_resource_metadata", "resource_scopes"]


def resource_scopes(agent_id: str | None) -> list[str]:
    """The scopes that reach an agent's endpoint (``agent_id``) or, for None, the user-level endpoint."""
    return [USER_SCOPE] if agent_id is None else [agent_scope(agent_id)]


def protected_resource_metadata(issuer: str, resource: str, agent_id: str | None) -> dict[str, Any]:
    """The RFC 9728 §2 document for ``resource``, one of this gateway's MCP endpoint URLs.

    Args:
        issuer: the authorization server's issuer (the gateway's public base URL, no trailing slash).
        resource: the endpoint URL exactly, e.g. ``{issuer}/echo/mcp`` or ``{issuer}/mcp``.
        agent_id: the agent the endpoint serves, or None for the user-level endpoint.

    Returns:
        ``{"resource", "authorization_servers": [issuer], "bearer_methods_supported": ["header"],
        "resource_name", "scopes_supported"}`` (JSON-ready).

    Spec: RFC 9728 §2 and §3.3 (``resource`` identical to the URL the metadata was fetched for);
    MCP 2025-11-25 / 2026-07-28 authorization, "Protected Resource Metadata Discovery".
    """
    name = "hivegate: your MCP agents" if agent_id is None else f"hivegate agent {agent_id}"
    return {
        "resource": resource,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": name,
        "scopes_supported": resource_scopes(agent_id),
    }
