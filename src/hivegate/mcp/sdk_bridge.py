"""The one module that touches the MCP SDK's internals: every pin-sensitive use of ``mcp`` lives here.

hivegate pins ``mcp==2.3.0`` and ``mcp-types==2.3.0`` (pyproject.toml). Every line below that
reads a private name (``_x``), overrides a private hook, calls a private method or leans on
the SDK's internal behaviour says ``mcp==2.3.0`` where it does so; no other module under
``src/hivegate`` may (``tests/mcp/test_sdk_bridge_rule.py`` fails otherwise).

What is touched, and what to check on an SDK upgrade:

- :func:`run_handler`: ``ServerRunner._serialize`` (server/runner.py), the SDK's outbound
  shaping (cache hints, per-version result sieve, ``resultType``, serverInfo stamp), given a
  stand-in for the server that supplies the two attributes it reads (``cache_hints``,
  ``server_info_stamp``) with the stamp shared, from ``Server._server_info_stamp_source``.
  Check: ``_serialize`` still the one shaping step, and still reads only those two.
- :func:`call_handler`: public calls only, the steps ``ServerRunner._on_request`` runs before a
  handler (surface validation, lookup, params model). Check: no step was added there.
- :func:`silent_session`: a ``ServerSession`` on a structural ``DispatchContext``. Check: the
  ``DispatchContext`` protocol (shared/dispatcher.py) did not grow.
- :class:`ObservedSessionManager`: overrides ``StreamableHTTPSessionManager._admit_session`` and
  ``_discard_session``. Check: every session still enters and leaves through these two.
- :func:`session_transport`, :func:`live_session_ids`: ``StreamableHTTPSessionManager._server_instances``.
- :func:`idle_expired`, :func:`restart_idle_countdown`: ``StreamableHTTPServerTransport.idle_scope``
  (public, but its deadline is the transport's own business). Check: still the scope whose
  deadline ends an idle session, suspended with an infinite deadline while a request is in flight.
- :func:`session_connection`: ``ServerSession._connection``.
- :func:`refresh_server_info`: ``Server._server_info_stamp_source`` (a ``functools.cached_property``).
- :func:`deliver_now`: ``InMemorySubscriptionBus._listeners``.
- :func:`mcpserver_parts`: ``MCPServer._lowlevel_server``, ``MCPServer._subscriptions``.
- :func:`is_sdk_tracing`: the private module ``mcp.server._otel``.
- :func:`keep_request_client_capabilities`: ``ClientSession._stamp`` (client/session.py), the per-request
  stamp ``adopt()`` installs, which sets ``_meta["io.modelcontextprotocol/clientCapabilities"]`` to the
  session's own. Check: still the one place a modern request's envelope is written.

Then run tests/mcp/test_lean_parity.py (each lean method, each protocol version, lean path
against the SDK's own serving loop) and the conformance suite. See docs/sdk-bridge.md.
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Collection, Mapping
from typing import Any, cast

import anyio
from mcp.client.session import ClientSession
from mcp.server._otel import OpenTelemetryMiddleware  # mcp==2.3.0: private module, no public re-export
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.connection import Connection
from mcp.server.context import ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.runner import ServerRunner
from mcp.server.session import ServerSession
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import InMemorySubscriptionBus, ServerEvent, SubscriptionBus
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.transport_context import TransportContext
from mcp_types import CLIENT_CAPABILITIES_META_KEY, METHOD_NOT_FOUND, RequestId
from mcp_types import methods as surface
from mcp_types.version import LATEST_MODERN_VERSION

__all__ = [
    "ObservedSessionManager",
    "call_handler",
    "deliver_now",
    "idle_expired",
    "is_sdk_tracing",
    "keep_request_client_capabilities",
    "live_session_ids",
    "mcpserver_parts",
    "refresh_server_info",
    "restart_idle_countdown",
    "run_handler",
    "session_connection",
    "session_transport",
    "silent_session",
]

logger = logging.getLogger(__name__)


# -- running a registered handler outside the SDK's transport (the lean paths) -----------------------


class _SingleResponseContext:
    """The dispatch context of a request that cannot stream: no notifications, no server requests.

    Structurally a ``mcp.shared.dispatcher.DispatchContext`` (mcp==2.3.0), like the SDK's own
    single-exchange context.
    """

    can_send_request = False

    def __init__(self, request_id: RequestId | None, headers: Mapping[str, str]) -> None:
        self.transport = TransportContext(kind="streamable-http", can_send_request=False, headers=headers)
        self.request_id = request_id
        self.message_metadata = None
        self.cancel_requested = anyio.Event()

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        return None

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


@functools.cache
def silent_session(version: str) -> ServerSession:
    """A session at ``version`` that cannot send anything: no notifications, no server-to-client requests.

    Requests on the lean paths carry no progress token (and, modern, no log level), and their
    agents have no SDK server backend, so the handlers never send on ``ctx.session``; sharing
    one inert session per protocol version saves building a connection (four events) per
    request. Its capabilities are empty: nothing on these paths may consult the client's.
    """
    connection = Connection.from_envelope(version, None, {})
    return ServerSession(_SingleResponseContext(None, {}), connection, request_meta=None)  # type: ignore[arg-type]  # mcp==2.3.0: a structural DispatchContext


_SHAPING_CONNECTION = Connection.from_envelope(LATEST_MODERN_VERSION, None, {})
"""The connection a shaping-only ``ServerRunner`` is built with: ``_serialize`` never reads it (mcp==2.3.0)."""


class _ShapingSource:
    """What ``ServerRunner._serialize`` reads of its server (mcp==2.3.0: ``cache_hints`` and
    ``server_info_stamp``, nothing else), with the serverInfo stamp shared instead of deep-copied.

    The SDK copies the stamp per result so a caller mutating a response cannot corrupt later
    ones; the lean paths serialize the result at once and never change it, and the copy was a
    third of the shaping's cost. An SDK that reads more of the server fails here loudly
    (AttributeError), in tests/mcp/test_lean_parity.py first.
    """

    __slots__ = ("_server",)

    def __init__(self, server: Server[Any]) -> None:
        self._server = server

    @property
    def cache_hints(self) -> Mapping[str, Any]:
        return self._server.cache_hints

    @property
    def server_info_stamp(self) -> dict[str, Any]:
        return self._server._server_info_stamp_source  # pyright: ignore[reportPrivateUsage]  # mcp==2.3.0: the once-per-server dump


async def call_handler(
    server: Server[Any], method: str, params: dict[str, Any], request_id: RequestId, version: str
) -> Any:
    """Validate ``params`` for ``method`` at ``version`` and run ``server``'s registered handler.

    The steps of the SDK's ``ServerRunner`` before a handler (mcp==2.3.0, runner.py
    ``_on_request._inner``): per-version surface validation (unknown at this version → -32601),
    the handler lookup, the handler's params model, then the handler itself, on
    :func:`silent_session`. The server's middleware is not run (its agents' middleware only
    acts on SDK-transport requests).

    Returns:
        What the handler returned (a result model or a mapping), unshaped.

    Raises:
        MCPError: a protocol error from validation or the handler.
        pydantic.ValidationError: the params do not validate (-32602 on the wire).
    """
    try:
        surface.validate_client_request(method, version, params)
    except KeyError:
        raise MCPError(METHOD_NOT_FOUND, "Method not found", data=method) from None
    entry = server.get_request_handler(method)
    if entry is None:
        raise MCPError(METHOD_NOT_FOUND, "Method not found", data=method)
    typed = entry.params_type.model_validate(params, by_name=False)
    ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
        session=silent_session(version),
        lifespan_context={},
        protocol_version=version,
        method=method,
        params=params,
        request_id=request_id,
        meta=params.get("_meta"),
    )
    return await entry.handler(ctx, typed)


async def run_handler(
    server: Server[Any], method: str, params: dict[str, Any], request_id: RequestId, version: str
) -> dict[str, Any]:
    """The wire ``result`` of ``method`` run by ``server``'s handler at ``version``, as the SDK shapes it.

    :func:`call_handler`, then the SDK's own outbound shaping (``ServerRunner._serialize``,
    mcp==2.3.0): cache hints fill unset ``ttlMs``/``cacheScope`` (never on ``input_required``),
    the per-version result surface keeps only the fields ``version`` defines (no 2026 fields
    reach a handshake-era client), ``resultType`` defaults to ``complete`` and the serverInfo
    ``_meta`` stamp is added on modern revisions (Spec: SEP-2549, SEP-2322, spec PR #3002).

    Returns:
        A fresh JSON-compatible dict, except its serverInfo stamp: that is shared by every
        result of ``server`` (serialize it, do not change it).

    Raises:
        MCPError: a protocol error from validation or the handler; ``-32603`` "Handler returned
            an invalid result" when the result does not fit ``version``'s surface.
        pydantic.ValidationError: the params do not validate (-32602 on the wire).
    """
    result = await call_handler(server, method, params, request_id, version)
    runner = _shaping_runners.get(server)
    if runner is None:
        runner = ServerRunner(cast(Server[Any], _ShapingSource(server)), _SHAPING_CONNECTION, {})
        _shaping_runners[server] = runner
    return runner._serialize(method, version, result)  # pyright: ignore[reportPrivateUsage]  # mcp==2.3.0


_shaping_runners: weakref.WeakKeyDictionary[Server[Any], ServerRunner[Any]] = weakref.WeakKeyDictionary()
"""One shaping-only ``ServerRunner`` per server (``_serialize`` keeps no state between calls, mcp==2.3.0)."""


# -- handshake-era sessions of a StreamableHTTPSessionManager ---------------------------------------


class ObservedSessionManager(StreamableHTTPSessionManager):
    """The SDK's ``StreamableHTTPSessionManager`` (same arguments) with a hook on each session's start and end.

    Every session the manager opens enters through ``_admit_session`` and leaves through
    ``_discard_session``, whichever way it ends (``DELETE``, idle expiry, a refused or failed
    opening request, a crash, shutdown) — mcp==2.3.0. Override :meth:`session_admitted` and
    :meth:`session_discarded`.
    """

    def session_admitted(self, session_id: str) -> None:
        """A session was opened (its opening request is about to be served)."""

    def session_discarded(self, session_id: str) -> None:
        """A session ended; called before the SDK's own clean-up awaits anything (so even while cancelled)."""

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:  # mcp==2.3.0
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            self.session_admitted(transport.mcp_session_id)
        return transport

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self.session_discarded(session_id)
        await super()._discard_session(session_id, transport)


def live_session_ids(manager: StreamableHTTPSessionManager) -> Collection[str]:
    """The ids of the sessions ``manager`` holds now (a live view: do not keep it across awaits)."""
    # The manager exposes no lookup; its session table is the one source of truth for liveness.
    return manager._server_instances.keys()  # pyright: ignore[reportPrivateUsage]  # mcp==2.3.0


def session_transport(manager: StreamableHTTPSessionManager, session_id: str) -> StreamableHTTPServerTransport | None:
    """The transport of session ``session_id`` if ``manager`` still holds it, else None."""
    return manager._server_instances.get(session_id)  # pyright: ignore[reportPrivateUsage]  # mcp==2.3.0


def idle_expired(transport: StreamableHTTPServerTransport) -> bool:
    """Whether the session's idle countdown ran out (the SDK is ending it)."""
    idle = transport.idle_scope  # mcp==2.3.0: the cancel scope the manager runs the session in
    return idle is not None and idle.cancel_called


def restart_idle_countdown(transport: StreamableHTTPServerTransport, idle_timeout_seconds: float) -> None:
    """Count a request served outside the SDK as session activity: restart the idle countdown.

    A countdown that is suspended (a request in flight through the SDK: deadline infinite) or
    absent (no idle timeout) is left alone.
    """
    idle = transport.idle_scope  # mcp==2.3.0: the transport suspends it by setting the deadline to inf
    if idle is not None and idle.deadline != float("inf"):
        idle.deadline = anyio.current_time() + idle_timeout_seconds


def session_connection(session: ServerSession) -> Connection:
    """The connection behind a request's session handle: its ``state`` and ``exit_stack`` (unwound
    when the SDK ends the connection: DELETE, idle expiry, shutdown)."""
    # ServerRequestContext exposes the connection only through the session handle's private field.
    return session._connection  # pyright: ignore[reportPrivateUsage]  # mcp==2.3.0


# -- servers, buses and middleware ------------------------------------------------------------------


def refresh_server_info(server: Server[Any]) -> dict[str, Any]:
    """Make ``server``'s results carry its current identity fields; return its ``serverInfo`` wire dict.

    The SDK dumps ``serverInfo`` once per server (it assumes identity is fixed at construction);
    call this after changing ``name``, ``title``, ``version``, ``description``, …
    """
    server.__dict__.pop("_server_info_stamp_source", None)  # mcp==2.3.0: a functools.cached_property
    return server.server_info.model_dump(by_alias=True, mode="json", exclude_none=True)


def deliver_now(bus: InMemorySubscriptionBus, event: ServerEvent) -> None:
    """Deliver ``event`` to ``bus``'s listeners synchronously, now (``publish`` is async and yields).

    A raising listener is logged and skipped, as ``publish`` does.
    """
    for listener in list(bus._listeners.values()):  # pyright: ignore[reportPrivateUsage]  # mcp==2.3.0
        try:
            listener(event)
        except Exception:  # fan-out boundary
            logger.exception("listen-stream listener raised")


def mcpserver_parts(target: MCPServer[Any]) -> tuple[Server[Any], SubscriptionBus]:
    """The low-level ``Server`` an ``MCPServer`` serves with, and its subscription bus."""
    # The SDK exposes no public accessor for either (mcp==2.3.0).
    return target._lowlevel_server, target._subscriptions  # pyright: ignore[reportPrivateUsage]  # mcp==2.3.0


def is_sdk_tracing(middleware: ServerMiddleware[Any]) -> bool:
    """Whether ``middleware`` is the SDK's OpenTelemetry middleware (on by default in every ``Server``)."""
    return isinstance(middleware, OpenTelemetryMiddleware)


def keep_request_client_capabilities(session: ClientSession) -> None:
    """Let a request sent on ``session`` declare its own client capabilities (2026-07-28 ``_meta``).

    The mcp backend forwards a caller's request to an upstream server on one shared client session; the
    upstream must see the capabilities of the caller (SEP-2322: it asks for input only as the client can
    give it), not of the gateway's client. The SDK's stamp writes the session's own capabilities into
    every modern request's ``_meta`` (mcp==2.3.0: ``ClientSession._stamp``, set when the session adopts
    its protocol version, so call this after connecting); the stamp is wrapped so that a request whose
    ``_meta`` already carries them keeps its own. Requests without them get the session's, as before.
    """
    stamp = session._stamp  # pyright: ignore[reportPrivateUsage]  # mcp==2.3.0

    def keep_own(data: dict[str, Any], opts: CallOptions) -> None:
        params = data.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        own = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
        stamp(data, opts)
        if own is not None:
            data["params"]["_meta"][CLIENT_CAPABILITIES_META_KEY] = own

    session._stamp = keep_own  # pyright: ignore[reportPrivateUsage]  # mcp==2.3.0
