"""The gateway's resource URLs and their protected-resource metadata URLs (one place builds them).

``base`` is :meth:`hivegate.settings.Settings.base_url` (no trailing slash). A resource URL is
the endpoint URL exactly (MCP authorization: the canonical server URI, RFC 8707 §2); its
metadata lives at the path-inserted well-known URI (RFC 9728 §3.1).
"""

from __future__ import annotations

__all__ = ["agent_resource", "resource_metadata_url", "user_resource"]

_PRM_PREFIX = "/.well-known/oauth-protected-resource"


def agent_resource(base: str, agent_id: str) -> str:
    """``{base}/{agent_id}/mcp``: an agent's MCP endpoint, the resource (and audience) of its tokens."""
    return f"{base}/{agent_id}/mcp"


def user_resource(base: str) -> str:
    """``{base}/mcp``: the user-level MCP endpoint."""
    return f"{base}/mcp"


def resource_metadata_url(base: str, resource_path: str) -> str:
    """The RFC 9728 metadata URL of the resource at ``resource_path`` (``/echo/mcp`` →
    ``{base}/.well-known/oauth-protected-resource/echo/mcp``)."""
    return f"{base}{_PRM_PREFIX}{resource_path}"
