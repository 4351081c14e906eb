"""``create_app(settings)``: the ASGI application — routes, lifespan, and nothing global.

Routes:

- ``/{agentId}/mcp`` and its alias ``/agents/{agentId}/mcp``: the agent's MCP server (both eras),
  behind the credential gate (:mod:`hivegate.auth.gate`);
- ``/mcp``: the user-level MCP endpoint, every agent the caller may use (:mod:`hivegate.mcp.user_endpoint`);
- ``/oauth/*`` and ``/.well-known/*``: the OAuth authorization server and the protected-resource
  metadata (:mod:`hivegate.auth.oauth.server`);
- ``/``: what the gateway serves, HTML or JSON (:mod:`hivegate.home`);
- ``/healthz``: the process is alive (200 ``{"status":"ok"}``);
- ``/readyz``: the database answers and accepts a write (200) or not (503, within
  :data:`READINESS_TIMEOUT_SECONDS`).

A database failure at start-up (unreachable, refusing the migration) fails the lifespan with the
one-line :class:`~hivegate.errors.StoreUnavailableError` message instead of a traceback, and is
kept as :attr:`HivegateApp.startup_failure` (``hivegate serve`` turns it into exit status 4).
"""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hivegate.agents.loader import load_agents_file
from hivegate.agents.registry import AgentRegistry
from hivegate.auth.gate import EndpointGate
from hivegate.auth.oauth.cimd import ClientMetadataResolver
from hivegate.auth.oauth.endpoints import OAuthPlaneErrors
from hivegate.auth.oauth.redirects import RedirectPolicy
from hivegate.auth.oauth.server import AuthorizationServer
from hivegate.auth.resolver import CredentialResolver
from hivegate.auth.tokens import TokenCodec
from hivegate.errors import StoreUnavailableError
from hivegate.home import HomePage
from hivegate.mcp.coverage import agent_coverage
from hivegate.mcp.host import AgentHost
from hivegate.mcp.routes import McpEndpoint
from hivegate.mcp.user_endpoint import UserEndpoint
from hivegate.settings import Settings
from hivegate.storage import AgentStore, create_agent_store
from hivegate.storage.credentials import MEMORY_URL, CredentialStore, create_credential_store
from hivegate.storage.oauth import OAuthStore, create_oauth_store

__all__ = ["Gateway", "HivegateApp", "create_app"]

logger = logging.getLogger(__name__)

PURGE_INTERVAL_SECONDS = 600.0
"""How often expired OAuth requests, codes and refresh tokens are deleted."""

READINESS_TIMEOUT_SECONDS = 2.0
"""``/readyz`` answers 503 when the database has not passed its write probe within this time."""


@dataclass
class Gateway:
    """The running parts of one app, reachable as ``app.state.gateway`` once the lifespan has started."""

    settings: Settings
    store: AgentStore
    registry: AgentRegistry
    host: AgentHost
    credentials: CredentialStore
    oauth: OAuthStore
    gate: EndpointGate


def create_app(settings: Settings, *, store: AgentStore | None = None) -> HivegateApp:
    """Build the gateway's ASGI app.

    ``store`` overrides the store named by ``settings.database.url`` (tests pass a memory store).
    At start-up the agents declared in ``settings.config_file`` (if any) are applied to the store.
    """
    holder: dict[str, Gateway] = {}
    startup = _Startup()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None]:
        try:
            agent_store, registry, credentials, oauth = await _open_stores(settings, store)
        except StoreUnavailableError as exc:
            startup.failure = exc
            raise
        host = AgentHost(registry, settings)
        base = settings.base_url()
        codec = TokenCodec(
            base,
            settings.security.token_signing_key.get_secret_value().encode(),
            settings.security.access_token_ttl_seconds,
        )
        resolver = CredentialResolver(
            credentials=credentials, oauth=oauth, codec=codec, cache_seconds=settings.security.credential_cache_seconds
        )
        gate = EndpointGate(resolver, base)
        client_metadata = _client_metadata_resolver(settings)
        authorization_server = AuthorizationServer(
            settings=settings,
            base_url=base,
            credentials=credentials,
            store=oauth,
            registry=registry,
            codec=codec,
            client_metadata=client_metadata,
            coverage=functools.partial(agent_coverage, host),
        )
        auth_routes.bind(OAuthPlaneErrors(Router(routes=authorization_server.routes())))
        gateway = Gateway(settings, agent_store, registry, host, credentials, oauth, gate)
        holder["gateway"] = gateway
        app.state.gateway = gateway
        try:
            async with (
                host.running(),
                UserEndpoint(host, settings, gate).running() as user_endpoint,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(registry.poll, settings.database.poll_interval_seconds)
                tg.start_soon(_purge_expired, oauth, PURGE_INTERVAL_SECONDS)
                endpoint.bind(host, gate)
                user_routes.bind(Router(routes=[Route("/mcp", user_endpoint)]))
                yield
                tg.cancel_scope.cancel()
        finally:
            if client_metadata is not None:
                await client_metadata.aclose()
            await oauth.close()
            await credentials.close()
            if store is None:
                await agent_store.close()

    endpoint = _LateEndpoint(settings)
    auth_routes = _LateRouter()
    user_routes = _LateRouter()

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        gateway = holder.get("gateway")
        if gateway is None:
            return JSONResponse({"status": "starting"}, status_code=503)
        try:
            with anyio.fail_after(READINESS_TIMEOUT_SECONDS):
                await gateway.store.ping()
        except (StoreUnavailableError, TimeoutError) as exc:  # details go to the log only
            logger.warning("readiness check failed: %s", exc if str(exc) else "no answer in time")
            body = {"status": "unavailable", "store": "unavailable", "code": StoreUnavailableError.code}
            return JSONResponse(body, status_code=503, headers={"Cache-Control": "no-store"})
        return JSONResponse({"status": "ok", "store": "ok", "agents": len(gateway.registry.all())})

    routes = [
        Route("/", HomePage(settings.base_url()).endpoint, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/{agent_id}/mcp", endpoint),
        Route("/agents/{agent_id}/mcp", endpoint),
        Route("/mcp", user_routes),
    ]
    starlette = Starlette(routes=routes, lifespan=lifespan)
    # No "/mcp/" → "/mcp" redirects: they would be built from an unchecked Host header.
    starlette.router.redirect_slashes = False
    return HivegateApp(starlette, endpoint, auth_routes, startup)


async def _open_stores(
    settings: Settings, store: AgentStore | None
) -> tuple[AgentStore, AgentRegistry, CredentialStore, OAuthStore]:
    """Open (and migrate) the stores, load the registry and apply the config file's agents.

    Raises:
        StoreUnavailableError: the database is unreachable or refuses the migration or the writes.
    """
    url, limits = settings.database.url, settings.database.limits()
    agent_store = store if store is not None else await create_agent_store(url, limits)
    try:
        registry = AgentRegistry(agent_store)
        await registry.refresh()
        if settings.config_file is not None:
            specs = load_agents_file(settings.config_file)
            if specs:
                await registry.apply(specs)
        credentials = await create_credential_store(url if store is None else MEMORY_URL, limits)
    except BaseException:
        if store is None:
            await agent_store.close()
        raise
    try:
        oauth = await create_oauth_store(url if store is None else MEMORY_URL, limits)
    except BaseException:
        await credentials.close()
        if store is None:
            await agent_store.close()
        raise
    return agent_store, registry, credentials, oauth


class _Startup:
    """What the lifespan learned at start-up: the database failure that stopped it, if any."""

    def __init__(self) -> None:
        self.failure: StoreUnavailableError | None = None

    def lifespan_send(self, send: Send) -> Send:
        """``send`` with the one-line failure as the ``lifespan.startup.failed`` message (not a traceback)."""

        async def reported(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed" and self.failure is not None:
                message = {**message, "message": str(self.failure)}
            await send(message)

        return reported


async def _purge_expired(store: OAuthStore, interval_seconds: float) -> None:
    """Delete expired authorization requests, codes and refresh tokens every ``interval_seconds``.

    Failures are logged and retried at the next interval; they never stop the server.
    """
    while True:
        await anyio.sleep(interval_seconds)
        try:
            removed = await store.purge_expired(datetime.now(UTC))
        except StoreUnavailableError as exc:  # an outage must not end the server; the store logs it
            logger.debug("purging expired OAuth records failed: %s", exc)
            continue
        except Exception:  # nor anything else
            logger.warning("purging expired OAuth records failed", exc_info=True)
            continue
        if removed:
            logger.debug("purged %d expired OAuth records", removed)


def _client_metadata_resolver(settings: Settings) -> ClientMetadataResolver | None:
    """The CIMD resolver the settings ask for, or None when client ID metadata documents are off."""
    security = settings.security
    if not security.client_metadata_documents:
        return None
    verify: ssl.SSLContext | bool = True
    if security.client_metadata_ca_file is not None:
        verify = ssl.create_default_context(cafile=str(security.client_metadata_ca_file))
    return ClientMetadataResolver(
        allow_private_addresses=security.client_metadata_allow_private_addresses,
        verify=verify,
        redirect_policy=RedirectPolicy(security.allowed_redirect_uris),
    )


class _LateRouter:
    """The authorization server's routes, bound once the lifespan has built the server (404 before)."""

    def __init__(self) -> None:
        self._router: ASGIApp | None = None

    def bind(self, router: ASGIApp) -> None:
        self._router = router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._router is None:
            raise RuntimeError("the app's lifespan has not started")
        await self._router(scope, receive, send)


class HivegateApp:
    """Send ``/{agentId}/mcp`` straight to the MCP endpoint; everything else (and the lifespan) to Starlette.

    The MCP endpoint is the hot path: a split on ``/`` replaces Starlette's regex route matching.
    ``state`` and ``url_path_for`` reach the wrapped app, so callers can treat this as the app.
    """

    def __init__(self, app: Starlette, endpoint: _LateEndpoint, auth_routes: _LateRouter, startup: _Startup) -> None:
        self._app = app
        self._endpoint = endpoint
        self._auth_routes = auth_routes
        self._startup = startup

    @property
    def startup_failure(self) -> StoreUnavailableError | None:
        """The database failure that stopped the lifespan's start-up, or None."""
        return self._startup.failure

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app, name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            parts = scope["path"].split("/")
            # "/echo/mcp" -> ["", "echo", "mcp"]; "/agents/echo/mcp" is left to the router (same endpoint).
            if len(parts) == 3 and parts[2] == "mcp" and parts[1] and parts[1] != "agents":
                scope["path_params"] = {"agent_id": parts[1]}
                await self._endpoint(scope, receive, send)
                return
            if len(parts) > 1 and parts[1] in ("oauth", ".well-known"):
                await self._auth_routes(scope, receive, send)
                return
        elif scope["type"] == "lifespan":
            send = self._startup.lifespan_send(send)
        await self._app(scope, receive, send)


class _LateEndpoint:
    """The MCP endpoint, bound to the host once the lifespan has built it."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._endpoint: McpEndpoint | None = None

    def bind(self, host: AgentHost, gate: EndpointGate) -> None:
        self._endpoint = McpEndpoint(host, self._settings, gate)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._endpoint is None:
            raise RuntimeError("the app's lifespan has not started")
        await self._endpoint(scope, receive, send)
