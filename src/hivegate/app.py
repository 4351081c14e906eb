"""``create_app(gateway)``: the ASGI application over a built :class:`~hivegate.gateway.Gateway`.

One route table (:class:`~hivegate.routing.RouteTable`):

- ``/{agentId}/mcp`` and its alias ``/agents/{agentId}/mcp``: the agent's MCP server (both eras),
  behind the credential gate (:mod:`hivegate.auth.gate`);
- ``/mcp``: the user-level MCP endpoint, every agent the caller may use (:mod:`hivegate.mcp.user_endpoint`);
- ``/oauth/*`` and ``/.well-known/*``: the OAuth authorization server and the protected-resource
  metadata (:mod:`hivegate.auth.oauth.server`), except the two exact paths of the gateway's agent
  card, ``/.well-known/agent-card.json`` and ``/.well-known/agent.json``;
- ``/{agentId}/a2a`` (JSON-RPC) and ``/{agentId}/a2a/…`` (HTTP+JSON): the agent's A2A bindings, behind
  the same gate (:mod:`hivegate.a2a.bindings`);
- ``/{agentId}/v1/invoke``: the original's REST invoke, behind the same gate (:mod:`hivegate.rest.invoke`);
- ``/{agentId}/.well-known/agent-card.json`` (and its ``/agents/…`` alias, and the legacy
  ``agent.json`` name): the agent's public A2A card (:mod:`hivegate.a2a.card_routes`);
- ``/api/v1/agents``: discovery, the cards of the agents the caller may see (:mod:`hivegate.a2a.discovery`);
- ``/api/v1/files`` and below: uploads for attachments (:mod:`hivegate.rest.files`);
  ``/api/v1/conversations`` and below: the callers' conversations (:mod:`hivegate.rest.conversations`);
  any other ``/api/…`` path: 404 in the REST envelope (:mod:`hivegate.rest.api`);
- ``/``: what the gateway serves, HTML or JSON (:mod:`hivegate.home`);
- ``/healthz``: the process is alive (200 ``{"status":"ok"}``);
- a path ending ``/mcp/`` (an MCP endpoint with a trailing slash): 404 with a JSON-RPC error body
  naming the endpoint, as the MCP plane answers (no redirect: it would be built from ``Host``);
- ``/readyz``: the database answers and accepts a write (200) or not (503, within
  :data:`READINESS_TIMEOUT_SECONDS`).

The lifespan runs :meth:`Gateway.running` and then closes the gateway. Everything that can fail
on the database (opening, migrating, applying the config file's agents) happened before, in
:meth:`Gateway.open` (``hivegate serve`` turns its failure into exit status 4).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from hivegate import __version__
from hivegate.a2a.card_routes import AgentCardEndpoints
from hivegate.a2a.discovery import DISCOVERY_PATH
from hivegate.auth.oauth.endpoints import OAuthPlaneErrors
from hivegate.errors import MethodNotAllowedError, NotFoundError, StoreUnavailableError
from hivegate.gateway import Gateway, Surfaces
from hivegate.home import HomePage
from hivegate.mcp.rendering import jsonrpc_error_response
from hivegate.rest.api import ApiEndpoint
from hivegate.rest.conversations import CONVERSATIONS_PATH
from hivegate.rest.files import FILES_PATH
from hivegate.rest.invoke import INVOKE_TAIL
from hivegate.rest.rendering import rest_error_response
from hivegate.routing import RouteTable

__all__ = ["READINESS_TIMEOUT_SECONDS", "Gateway", "create_app"]

logger = logging.getLogger(__name__)

READINESS_TIMEOUT_SECONDS = 2.0
"""``/readyz`` answers 503 when the database has not passed its write probe within this time."""


def create_app(gateway: Gateway) -> RouteTable:
    """The gateway's ASGI app (module docstring); serving it runs ``gateway``, and its shutdown closes it."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None]:
        try:
            async with gateway.running():
                yield
        finally:
            await gateway.close()

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        try:
            with anyio.fail_after(READINESS_TIMEOUT_SECONDS):
                await gateway.storage.ping()
        except (StoreUnavailableError, TimeoutError) as exc:  # details go to the log only
            logger.warning("readiness check failed: %s", exc if str(exc) else "no answer in time")
            body = {"status": "unavailable", "store": "unavailable", "code": StoreUnavailableError.code}
            return JSONResponse(body, status_code=503, headers={"Cache-Control": "no-store"})
        return JSONResponse({"status": "ok", "store": "ok", "agents": len(gateway.registry.all())})

    cards = AgentCardEndpoints(gateway.registry, gateway.settings.base_url(), __version__, gateway.gate)
    rest = Starlette(
        routes=[
            Route("/", HomePage(gateway.settings.base_url()).endpoint, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            *cards.routes(),
        ],
        lifespan=lifespan,
        exception_handlers={404: _not_found, 405: _method_not_allowed},
    )
    # No "/mcp/" → "/mcp" (or "/oauth/token/" → "/oauth/token") redirects: they would be built
    # from an unchecked Host header.
    rest.router.redirect_slashes = False
    oauth_router = Router(routes=gateway.authorization_server.routes(), redirect_slashes=False)
    auth = OAuthPlaneErrors(oauth_router)
    surfaces = gateway.surfaces
    root_cards = cards.root()
    return RouteTable(
        agent=surfaces.agent,
        exact={
            "/mcp": surfaces.user,
            DISCOVERY_PATH: surfaces.discovery,
            **dict.fromkeys(cards.root_paths(), root_cards),
        },
        prefixes={"oauth": auth, ".well-known": auth, "api": _api(surfaces)},
        rest=McpLookalikes(rest),
        agent_documents={**dict.fromkeys(cards.agent_documents(), rest), INVOKE_TAIL: surfaces.rest},
        a2a=surfaces.a2a,
    )


def _api(surfaces: Surfaces) -> ApiEndpoint:
    """``/api/…`` below discovery: uploads and conversations, when the gateway keeps them."""
    collections: dict[str, ASGIApp] = {}
    if surfaces.files is not None:
        collections[FILES_PATH] = surfaces.files
    if surfaces.conversations is not None:
        collections[CONVERSATIONS_PATH] = surfaces.conversations
    return ApiEndpoint(collections)


async def _not_found(request: Request, exc: Exception) -> Response:
    """A path no plane serves: 404 ``not_found`` in the REST envelope (``docs/rest.md``), not Starlette's
    plain text (found by issue 9's attack trial: ``//{id}/a2a``, ``/{id}/v1/invoke/``)."""
    return rest_error_response(NotFoundError("No endpoint at this path"))


async def _method_not_allowed(request: Request, exc: Exception) -> Response:
    """A method a route does not take: 405 ``method_not_allowed`` in the REST envelope, with ``Allow``."""
    error = MethodNotAllowedError(f"{request.method[:20]} is not allowed here")
    if isinstance(exc, HTTPException) and exc.headers and "Allow" in exc.headers:
        error.headers["Allow"] = exc.headers["Allow"]
    return rest_error_response(error)


class McpLookalikes:
    """Answer a path ending ``/mcp/`` as the MCP plane would: 404, a JSON-RPC error body naming the endpoint.

    Clients and proxies that add a trailing slash then read why, in the plane's shape (JSON-RPC 2.0
    §5.1, ``id`` null), instead of a plain-text 404; everything else goes to ``app``.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path.endswith("/mcp/"):
            error = NotFoundError(
                f"No MCP endpoint at this path; the endpoint is {path[:-1][:200]} (no trailing slash)"
            )
            await jsonrpc_error_response(error)(scope, receive, send)
            return
        await self._app(scope, receive, send)
