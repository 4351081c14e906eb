"""Assembly of the fixture server."""

from __future__ import annotations

from collections.abc import Sequence

from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.mcpserver import MCPServer, RequestStateSecurity

from conformance_fixture import catalog, content, input_required, legacy, notifying
from conformance_fixture.common import FixtureState

SERVER_NAME = "hivegate-conformance"
SERVER_VERSION = "0.1.0"

LIST_TTL_MS = 60_000
CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    "server/discover": CacheHint(ttl_ms=LIST_TTL_MS, scope="public"),
    "tools/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="public"),
    "prompts/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="public"),
    "resources/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="public"),
    "resources/templates/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="public"),
    # test://watched-resource changes, so reads are never served from a cache.
    "resources/read": CacheHint(ttl_ms=0, scope="private"),
}
"""SEP-2549 hints for the six cacheable 2026-07-28 results (the lists are static, so they are public)."""

INSTRUCTIONS = (
    "Conformance fixture for hivegate: exposes the tool, resource and prompt names that the official "
    "MCP conformance suite (@modelcontextprotocol/conformance) calls, for both protocol eras."
)


def build_server(*, request_state_keys: Sequence[bytes] | None = None) -> MCPServer:
    """Build a fresh fixture server with its own state.

    ``request_state_keys`` (each at least 32 bytes) seal ``requestState``; share them when several
    processes serve the same fixture. By default a per-process key is generated.
    """
    security = RequestStateSecurity(keys=list(request_state_keys)) if request_state_keys else None
    server: MCPServer = MCPServer(
        name=SERVER_NAME,
        version=SERVER_VERSION,
        instructions=INSTRUCTIONS,
        tools=[content.json_schema_2020_12_tool()],
        cache_hints=CACHE_HINTS,
        request_state_security=security,
    )
    state = FixtureState()
    content.register(server)
    notifying.register(server)
    input_required.register(server)
    catalog.register(server, state)
    legacy.register(server, state)
    return server
