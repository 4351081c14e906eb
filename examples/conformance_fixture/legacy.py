"""Handshake-era-only methods: ``logging/setLevel`` and ``resources/subscribe|unsubscribe``.

They are registered on the low-level server because ``MCPServer`` has no public hook for them. The
SDK serves them on the legacy wire only: 2026-07-28 removed these methods, so a modern request for
them is answered 404 / -32601 (subscriptions there go through ``subscriptions/listen``).
"""

from __future__ import annotations

import logging

from mcp.server import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.types import EmptyResult, SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams

from conformance_fixture.common import FixtureState

logger = logging.getLogger(__name__)


def register(server: MCPServer, state: FixtureState) -> None:
    """Register the legacy-only request handlers on ``server``."""

    async def set_level(ctx: ServerRequestContext, params: SetLevelRequestParams) -> EmptyResult:
        state.log_level = params.level
        logger.debug("log level set to %s", params.level)
        return EmptyResult()

    async def subscribe(ctx: ServerRequestContext, params: SubscribeRequestParams) -> EmptyResult:
        state.subscribed_uris.add(str(params.uri))
        return EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext, params: UnsubscribeRequestParams) -> EmptyResult:
        state.subscribed_uris.discard(str(params.uri))
        return EmptyResult()

    lowlevel = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
