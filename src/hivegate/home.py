"""``GET /``: what this gateway serves, as a small HTML page or (``Accept: application/json``) JSON.

It names endpoint *patterns* only (``{base}/{agentId}/mcp``), never which agents exist, and no
settings: an anonymous caller learns nothing that the OAuth metadata documents do not already
publish. Agent ids are found by their owners (``hivegate agents list``) or through ``/mcp``
with a credential.
"""

from __future__ import annotations

import html
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from hivegate import __version__

__all__ = ["HomePage"]

DOCS = (
    ("docs/configuration.md", "settings, the agents file, the command line"),
    ("docs/auth.md", "users, API keys, OAuth, connecting clients"),
    ("docs/protocol-support.md", "what each MCP revision gets, errors"),
    ("docs/security.md", "threat model and limits"),
    ("docs/backends.md", "what stands behind an agent: python, a remote A2A agent, an upstream MCP server"),
    ("docs/a2a.md", "the A2A plane: agent cards, SendMessage, tasks"),
    ("docs/rest.md", "REST invoke, files, conversations"),
    ("docs/calls.md", "the call contract: conversations, idempotency keys, attachments, rate limits"),
)
"""The guides shipped in the hivegate source tree (the gateway does not serve them)."""

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _quality(accept: str, media: str) -> float:
    """The ``q`` that ``accept`` gives ``media``: that of its most specific matching range (RFC 9110 §12.5.1)."""
    kind = media.split("/")[0]
    specificity, quality = -1, 0.0
    for item in accept.split(","):
        media_range, *params = (part.strip() for part in item.split(";"))
        rank = {media: 2, f"{kind}/*": 1, "*/*": 0}.get(media_range.lower(), -1)
        if rank <= specificity:
            continue
        specificity, quality = rank, 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
    return quality


def _prefers_json(accept: str) -> bool:
    """Whether ``Accept`` ranks ``application/json`` above ``text/html`` (ties, and no ``Accept``: HTML)."""
    return _quality(accept, "application/json") > _quality(accept, "text/html")


class HomePage:
    """``GET /`` for the gateway at ``base_url`` (no trailing slash): route to :meth:`endpoint`."""

    def __init__(self, base_url: str) -> None:
        self.document = self._describe(base_url)
        self._html = self._render(self.document).encode()

    @staticmethod
    def _describe(base: str) -> dict[str, Any]:
        return {
            "name": "hivegate",
            "version": __version__,
            "endpoints": {
                "agent_mcp": f"{base}/{{agentId}}/mcp",
                "agent_mcp_alias": f"{base}/agents/{{agentId}}/mcp",
                "user_mcp": f"{base}/mcp",
                "agent_card": f"{base}/{{agentId}}/.well-known/agent-card.json",
                "agent_a2a": f"{base}/{{agentId}}/a2a",
                "gateway_card": f"{base}/.well-known/agent-card.json",
                "agent_invoke": f"{base}/{{agentId}}/v1/invoke",
                "api": f"{base}/api/v1/{{files,conversations}}",
                "authorization_server_metadata": f"{base}/.well-known/oauth-authorization-server",
                "protected_resource_metadata": [
                    f"{base}/.well-known/oauth-protected-resource/mcp",
                    f"{base}/.well-known/oauth-protected-resource/{{agentId}}/mcp",
                ],
                "healthz": f"{base}/healthz",
                "readyz": f"{base}/readyz",
            },
            "docs": [name for name, _ in DOCS],
        }

    @staticmethod
    def _render(doc: dict[str, Any]) -> str:
        e = doc["endpoints"]

        def link(url: str) -> str:
            shown = html.escape(url)
            return shown if "{" in url else f'<a href="{shown}">{shown}</a>'

        rows = [
            ("MCP endpoint of one agent (both protocol eras)", e["agent_mcp"]),
            ("the same, alias", e["agent_mcp_alias"]),
            ("MCP endpoint of all the agents your credential reaches", e["user_mcp"]),
            ("A2A agent card of one agent", e["agent_card"]),
            ("A2A endpoint of one agent (JSON-RPC and HTTP+JSON)", e["agent_a2a"]),
            ("the gateway's own agent card", e["gateway_card"]),
            ("REST invoke of one agent (JSON or SSE)", e["agent_invoke"]),
            ("REST API: files, conversations", e["api"]),
            ("OAuth authorization server metadata (RFC 8414)", e["authorization_server_metadata"]),
            *(("OAuth protected-resource metadata (RFC 9728)", url) for url in e["protected_resource_metadata"]),
            ("liveness", e["healthz"]),
            ("readiness (the database answers)", e["readyz"]),
        ]
        items = "\n".join(f"<li>{html.escape(what)}: <code>{link(url)}</code></li>" for what, url in rows)
        docs = "\n".join(f"<li><code>{html.escape(name)}</code>: {html.escape(what)}</li>" for name, what in DOCS)
        return f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>hivegate</title></head>
<body>
<h1>hivegate {html.escape(doc["version"])}</h1>
<p>An MCP gateway. Point an MCP client at an agent's endpoint; it asks for a credential
(OAuth sign-in, or an <code>oag_</code>/<code>bak_</code> key from the gateway's operator) unless the
agent is public.</p>
<h2>Endpoints</h2>
<ul>
{items}
</ul>
<h2>Documentation</h2>
<p>In the hivegate source tree:</p>
<ul>
{docs}
</ul>
<p>This page as JSON: <code>Accept: application/json</code>.</p>
</body>
</html>
"""

    async def endpoint(self, request: Request) -> Response:
        """The page (or its JSON) for this request."""
        if _prefers_json(request.headers.get("accept", "")):
            return JSONResponse(self.document, headers=_HEADERS)
        return HTMLResponse(self._html, headers=_HEADERS)
