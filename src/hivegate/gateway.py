"""``Gateway.open(settings)``: the gateway's parts, built once and in order, before anything serves.

:meth:`Gateway.open` opens the storage (one engine, one migration: :func:`hivegate.storage.open_storage`),
loads the agent registry and applies the config file's agents, then builds the agent host, the
credential gate, the OAuth authorization server, the MCP surfaces and the A2A bindings. Nothing is bound later:
:func:`hivegate.app.create_app` takes a built gateway, and its lifespan only runs
:meth:`Gateway.running` (the host's runtimes, the user endpoint's sessions, the registry poll,
the OAuth purge, the A2A task purge and the files' purge) and then :meth:`Gateway.close`.
"""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import anyio

from hivegate.a2a.bindings import A2AEndpoint
from hivegate.a2a.discovery import AgentDiscovery, DiscoveryEndpoint
from hivegate.a2a.tasks import open_task_store
from hivegate.agents.loader import load_agents_file
from hivegate.agents.registry import AgentRegistry
from hivegate.auth.gate import EndpointGate
from hivegate.auth.oauth.cimd import ClientMetadataResolver
from hivegate.auth.oauth.redirects import RedirectPolicy
from hivegate.auth.oauth.server import AuthorizationServer
from hivegate.auth.resolver import CredentialResolver
from hivegate.auth.tokens import TokenCodec
from hivegate.calls.contract import CallContract, ContractLimits
from hivegate.errors import StoreUnavailableError
from hivegate.files.blobs import open_blob_store
from hivegate.files.uploads import FileLimits, Files
from hivegate.mcp.coverage import agent_coverage
from hivegate.mcp.host import AgentHost
from hivegate.mcp.pagination import CursorCodec
from hivegate.mcp.routes import McpEndpoint
from hivegate.mcp.user_endpoint import UserEndpoint
from hivegate.policy.calls import CallPolicy
from hivegate.policy.rate_limits import RateLimits
from hivegate.rest.conversations import ConversationsEndpoint
from hivegate.rest.files import FilesEndpoint
from hivegate.rest.invoke import InvokeEndpoint
from hivegate.settings import Settings
from hivegate.storage import A2ATasks, OAuthStore, Storage, open_storage
from hivegate.storage.sql.serving_lock import serving_alone

__all__ = ["PURGE_INTERVAL_SECONDS", "Gateway", "Surfaces", "build_surfaces", "purge_expired_tasks"]

logger = logging.getLogger(__name__)

A2A_DRAIN_SECONDS = 5.0
"""At shutdown, how long stopping the A2A tasks still running may take (their calls are cancelled)."""

PURGE_INTERVAL_SECONDS = 600.0
"""How often expired OAuth requests, codes and refresh tokens, and expired A2A tasks, are deleted."""


@dataclass(frozen=True, slots=True)
class Surfaces:
    """The endpoints (ASGI apps): ``agent`` serves ``/{agentId}/mcp``, ``user`` serves ``/mcp``, ``a2a``
    serves ``/{agentId}/a2a`` and ``/{agentId}/a2a/…`` (the A2A bindings), ``rest`` serves
    ``/{agentId}/v1/invoke`` (the REST invoke), ``discovery`` serves ``/api/v1/agents`` (the same
    search as ``/mcp``'s ``discover_agents`` tool)."""

    agent: McpEndpoint
    user: UserEndpoint
    a2a: A2AEndpoint
    rest: InvokeEndpoint
    discovery: DiscoveryEndpoint
    files: FilesEndpoint | None = None
    """``/api/v1/files`` (uploads for attachments), when the gateway has a file store."""
    conversations: ConversationsEndpoint | None = None
    """``/api/v1/conversations`` (the callers' conversations), when the gateway keeps call records."""


def build_surfaces(host: AgentHost, settings: Settings, gate: EndpointGate, tasks: A2ATasks) -> Surfaces:
    """The MCP endpoints, the A2A bindings, the REST invoke and discovery over ``host``, behind ``gate``,
    the A2A tasks kept in ``tasks`` (the one place that builds them)."""
    codec = CursorCodec(settings.security.cursor_key.get_secret_value().encode())
    discovery = AgentDiscovery(host.registry, settings.base_url(), codec)
    records = host.policy.contract.records
    return Surfaces(
        agent=McpEndpoint(host, settings, gate),
        user=UserEndpoint(host, settings, gate, discovery),
        a2a=A2AEndpoint(host, gate, open_task_store(tasks), settings.base_url(), settings.server.max_body_bytes),
        rest=InvokeEndpoint(host, gate, settings.server.max_body_bytes),
        discovery=DiscoveryEndpoint(discovery, gate),
        files=None if host.policy.files is None else FilesEndpoint(host.policy.files, gate, settings.base_url()),
        conversations=None if records is None else ConversationsEndpoint(records, gate),
    )


@dataclass(eq=False)
class Gateway:
    """The parts of one gateway, built by :meth:`open`; it owns its storage and closes it (:meth:`close`)."""

    settings: Settings
    storage: Storage
    registry: AgentRegistry
    host: AgentHost
    gate: EndpointGate
    authorization_server: AuthorizationServer
    surfaces: Surfaces
    client_metadata: ClientMetadataResolver | None

    @classmethod
    async def open(cls, settings: Settings, *, storage: Storage | None = None) -> Gateway:
        """Build the gateway for ``settings``.

        Args:
            settings: the validated settings (``base_url()`` names the issuer and the resources).
            storage: the stores to use, already open (tests pass ``await open_storage("memory://")``);
                by default those of ``settings.database.url``. The gateway owns them from here on:
                they are closed by :meth:`close`, or at once when ``open`` fails.

        Raises:
            StoreUnavailableError: the database is unreachable, refuses the migration, or refuses
                the config file's agents.
            AgentsFileError: ``settings.config_file`` cannot be read as an agents file.
        """
        if storage is None:
            storage = await open_storage(settings.database.url, settings.database.limits())
        try:
            registry = AgentRegistry(storage.agents)
            await registry.refresh()
            if settings.config_file is not None:
                specs = load_agents_file(settings.config_file)
                if specs:
                    await registry.apply(specs)
        except BaseException:
            await storage.close()
            raise
        return cls._assemble(settings, storage, registry)

    @classmethod
    def _assemble(cls, settings: Settings, storage: Storage, registry: AgentRegistry) -> Gateway:
        """The host, the credential gate, the authorization server and the surfaces over ``registry``."""
        host = AgentHost(registry, settings, policy=create_call_policy(settings, storage))
        base = settings.base_url()
        security = settings.security
        codec = TokenCodec(
            base, security.token_signing_key.get_secret_value().encode(), security.access_token_ttl_seconds
        )
        resolver = CredentialResolver(
            credentials=storage.credentials,
            oauth=storage.oauth,
            codec=codec,
            cache_seconds=security.credential_cache_seconds,
        )
        gate = EndpointGate(resolver, base)
        client_metadata = _client_metadata_resolver(settings)
        authorization_server = AuthorizationServer(
            settings=settings,
            base_url=base,
            credentials=storage.credentials,
            store=storage.oauth,
            registry=registry,
            codec=codec,
            client_metadata=client_metadata,
            coverage=functools.partial(agent_coverage, host),
        )
        surfaces = build_surfaces(host, settings, gate, storage.tasks)
        return cls(settings, storage, registry, host, gate, authorization_server, surfaces, client_metadata)

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[Gateway]:
        """Run what runs while the gateway serves: the SQLite file's serving lock
        (:mod:`hivegate.storage.sql.serving_lock`), the agents' runtimes, the user endpoint's sessions,
        the registry poll (``database.poll_interval_seconds``), the OAuth purge, the A2A task purge
        (``a2a.task_retention_seconds``) and the call records' purge (expired keys, idle
        conversations); all stop on exit, after the A2A tasks still running have been stopped."""
        async with (
            _serving(self.storage.database),
            self.host.running(),
            self.surfaces.user.running(),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(self.registry.poll, self.settings.database.poll_interval_seconds)
            tg.start_soon(_purge_expired, self.storage.oauth, PURGE_INTERVAL_SECONDS)
            if self.host.policy.files is not None:
                tg.start_soon(self.host.policy.files.maintain, PURGE_INTERVAL_SECONDS)
            tg.start_soon(self.host.policy.contract.maintain, PURGE_INTERVAL_SECONDS)
            tg.start_soon(
                purge_expired_tasks,
                self.storage.tasks,
                timedelta(seconds=self.settings.a2a.task_retention_seconds),
                PURGE_INTERVAL_SECONDS,
            )
            yield self
            with anyio.move_on_after(A2A_DRAIN_SECONDS):
                await self.surfaces.a2a.aclose()  # running A2A tasks end while their backends still run
            tg.cancel_scope.cancel()

    async def close(self) -> None:
        """Close the client-metadata fetcher and the storage. Idempotent."""
        if self.client_metadata is not None:
            await self.client_metadata.aclose()
        await self.storage.close()


@asynccontextmanager
async def _serving(database: str) -> AsyncGenerator[None]:
    """Hold the SQLite file's serving lock while the gateway serves (a warning when another process
    serves it: :func:`~hivegate.storage.sql.serving_lock.serving_alone`)."""
    with serving_alone(database):
        yield


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


async def purge_expired_tasks(tasks: A2ATasks, retention: timedelta, interval_seconds: float) -> None:
    """Delete the A2A tasks finished and last saved more than ``retention`` ago, every ``interval_seconds``.

    Failures are logged and retried at the next interval; they never stop the server.
    """
    while True:
        await anyio.sleep(interval_seconds)
        try:
            removed = await tasks.purge_expired(datetime.now(UTC) - retention)
        except StoreUnavailableError as exc:  # an outage must not end the server; the store logs it
            logger.debug("purging expired A2A tasks failed: %s", exc)
            continue
        except Exception:  # nor anything else
            logger.warning("purging expired A2A tasks failed", exc_info=True)
            continue
        if removed:
            logger.debug("purged %d expired A2A tasks", removed)


def create_call_policy(settings: Settings, storage: Storage) -> CallPolicy:
    """The rate limits (``rate_limits.*``) and uploaded files (``files.*``, bytes in :func:`open_blob_store`'s
    store) every plane checks a call against, and the call contract (``conversations.*``, ``idempotency.*``)
    it runs the call under."""
    blobs = open_blob_store(settings.files.folder, storage.database)
    files = Files(storage.files, blobs, FileLimits.of(settings.files))
    retention = settings.conversations.retention_seconds
    limits = ContractLimits(float(settings.idempotency.ttl_seconds), float(retention) if retention else None)
    return CallPolicy(RateLimits(settings.rate_limits), files, CallContract(storage.calls, limits))


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
