"""HTTP/1.1 limits of the embedded server: uvicorn's httptools protocol with a bounded request head.

uvicorn 0.54 bounds neither how long a client may take to send a request (the keep-alive timer is
cancelled by the first byte and a new connection has no timer at all) nor the head's size
or field count: llhttp has no such limit and httptools concatenates a header field in Python bytes
until it ends. ``hivegate serve`` passes :func:`http_protocol`'s class to
``uvicorn.Config(http=...)``; each connection then

- sets a deadline when it opens and at the first byte after each request (one sweep per server
  checks them every :data:`SWEEP_INTERVAL_SECONDS` at most, so a request costs no timer); a head
  not complete by then gets 408 (a connection that sent nothing is closed silently) — the
  slow-loris defence; a body still arriving gets ``body_read_timeout_seconds`` more, then 408 too
  (the app's ``receive()`` returns ``http.disconnect``), or a plain close if the app has answered;
- counts the head's bytes as they arrive and feeds the parser at most ``max_header_bytes`` of one
  head (431 beyond), so a connection makes the server hold at most that much of a head;
- counts header fields (431 beyond ``max_headers``);
- is closed at once, unanswered, when ``max_connections`` connections are open, or
  ``max_connections_per_client`` from its IP address.

An error response carries the plane's body (OAuth JSON under ``/oauth/`` and ``/.well-known/``,
a JSON-RPC error with ``id`` null elsewhere) and ``Connection: close``; the server then stops
writing, discards what the client still sends for at most :data:`LINGER_SECONDS` (so the client
reads the response rather than a reset) and closes. All counts are per process.

Spec: RFC 9112 §2.2 (message parsing) and §9.3 (persistence), RFC 9110 §15.5.9 (408),
RFC 6585 §5 (431).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any, ClassVar, cast

import httptools
import orjson
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from hivegate.errors import GatewayError, HeadersTooLargeError, InvalidRequestError, RequestTimeoutError
from hivegate.mcp.rendering import jsonrpc_error_body
from hivegate.settings import ServerSettings

__all__ = ["LINGER_SECONDS", "ClientConnections", "LimitedHttpToolsProtocol", "http_protocol"]

logger = logging.getLogger(__name__)

LINGER_SECONDS = 2.0
"""How long a connection that got an error response keeps reading (and discarding) before it closes."""

SWEEP_INTERVAL_SECONDS = 1.0
"""How often deadlines are checked at most (a quarter of the shorter timeout when that is less): a
request times out between its deadline and one interval later."""

WARNING_INTERVAL_SECONDS = 10.0
"""At most one warning per kind of refusal in this time (an attack must not flood the log)."""

RESERVED_DESCRIPTORS = 64
"""Descriptors left for everything but client connections (listening socket, database, logs, agents)."""

_OAUTH_PREFIXES = (b"/oauth/", b"/.well-known/")


class _TooManyHeaders(Exception):
    """Raised in the parser's ``on_header`` callback: stops parsing the head at once."""


class ClientConnections:
    """Open connections per client IP address; one instance is shared by all of a server's connections."""

    def __init__(self) -> None:
        self._open: dict[str, int] = {}

    def count(self, address: str) -> int:
        """Connections from ``address`` open now."""
        return self._open.get(address, 0)

    def add(self, address: str) -> None:
        self._open[address] = self._open.get(address, 0) + 1

    def remove(self, address: str) -> None:
        left = self._open.get(address, 0) - 1
        if left > 0:
            self._open[address] = left
        else:
            self._open.pop(address, None)


class _DeadlineSweep:
    """One timer per server: every ``interval`` seconds it expires its connections' deadlines, so a
    request costs a float, not a timer of its own. Runs while the server has connections."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._handle: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop, connections: set[Any]) -> None:
        if self._handle is None:
            self._handle = loop.call_later(self.interval, self._sweep, loop, connections)

    def _sweep(self, loop: asyncio.AbstractEventLoop, connections: set[Any]) -> None:
        self._handle = None
        now = loop.time()
        for protocol in [p for p in connections if isinstance(p, LimitedHttpToolsProtocol)]:
            protocol.expire(now)
        if connections:
            self.start(loop, connections)


class _WarningThrottle:
    """Logs at most one warning per kind per :data:`WARNING_INTERVAL_SECONDS`, counting the ones it held back."""

    def __init__(self) -> None:
        self._next_at: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warn(self, kind: str, message: str, *args: object) -> None:
        now = time.monotonic()
        if now < self._next_at.get(kind, 0.0):
            self._held[kind] = self._held.get(kind, 0) + 1
            return
        self._next_at[kind] = now + WARNING_INTERVAL_SECONDS
        held = self._held.pop(kind, 0)
        if held:
            logger.warning(message + " (and %d more like it since the last report)", *args, held)
        else:
            logger.warning(message, *args)


def error_response(error: GatewayError, path: bytes, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A complete ``Connection: close`` response for ``error``: OAuth JSON (RFC 6749 §5.2 shape) when
    ``path`` is under ``/oauth/`` or ``/.well-known/``, else a JSON-RPC error with ``id`` null."""
    if path.startswith(_OAUTH_PREFIXES):
        body = orjson.dumps({"error": "invalid_request", "error_description": error.message})
    else:
        body = jsonrpc_error_body(error)
    head = [STATUS_LINE[error.http_status]]
    for name, value in default_headers:
        head += [name, b": ", value, b"\r\n"]
    head += [
        b"content-type: application/json\r\n",
        b"content-length: %d\r\n" % len(body),
        b"connection: close\r\n\r\n",
    ]
    return b"".join(head) + body


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the request-read deadlines, the head size and field limits
    and the connection caps of ``limits`` (see the module docstring). Build bound classes with
    :func:`http_protocol`; uvicorn makes one instance per connection."""

    limits: ClassVar[ServerSettings]
    clients: ClassVar[ClientConnections]
    warnings: ClassVar[_WarningThrottle]
    sweep: ClassVar[_DeadlineSweep]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.url = b""  # uvicorn sets it only when a message begins; an early error response reads it
        self._deadline: float | None = None  # loop time by which the request must have arrived
        self._timer: asyncio.TimerHandle | None = None  # the linger after an error response
        limits = self.limits
        self._max_headers = limits.max_headers  # plain attributes: read on every request
        self._max_header_bytes = limits.max_header_bytes
        self._head_timeout = limits.header_read_timeout_seconds
        self._body_timeout = limits.body_read_timeout_seconds
        self._body_extended = False  # the deadline has been moved on by the body's time
        self._in_head = True  # between the end of a request message (or the connection's start) and its headers
        self._head_room = self._max_header_bytes  # bytes the current head may still take
        self._heads_completed = 0
        self._rejected = False
        self._address: str | None = None  # set while this connection counts against its address

    # Connection life

    def connection_made(  # pyright: ignore[reportIncompatibleMethodOverride]  # as uvicorn's: a TCP transport
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        limits = self.limits
        address = self.client[0] if self.client else None
        if len(self.connections) > limits.max_connections:
            self._refuse("max_connections", "server.max_connections (%d) reached", limits.max_connections)
            return
        per_client = limits.max_connections_per_client
        if address is not None and per_client and self.clients.count(address) >= per_client:
            self._refuse("max_connections_per_client", "server.max_connections_per_client (%d) reached", per_client)
            return
        if address is not None:
            self.clients.add(address)
            self._address = address
        self._arm_head_deadline()
        self.sweep.start(self.loop, self.connections)

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline = None
        self._cancel_timer()
        self._release_address()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self) -> None:
        # The WebSocket protocol takes the transport over; this one gets no connection_lost.
        self._deadline = None
        self._cancel_timer()
        self._release_address()
        super().handle_websocket_upgrade()

    # Reading

    def data_received(self, data: bytes) -> None:
        if self._rejected:
            return  # lingering after an error response: discard
        if self._in_head:
            if self._deadline is None:
                self._arm_head_deadline()
            room = self._head_room
            if len(data) > room:
                self._feed_beyond(data, room)
                return
            self._head_room = room - len(data)
        self._feed(data)

    def _feed_beyond(self, data: bytes, room: int) -> None:
        """Feed only the ``room`` bytes the head may still take: it must end in there (else 431).

        The bytes after a message's end in the same read are not counted for the next (pipelined)
        head, so that one may exceed the limit by at most one read (uvloop reads up to 256 KiB)."""
        completed = self._heads_completed
        self._head_room = 0
        if room:
            self._feed(data[:room])
        if self._rejected or self.transport.is_closing():
            return
        if self._heads_completed == completed:
            limit = self._max_header_bytes
            self._reject(HeadersTooLargeError(f"The request line and headers exceed {limit} bytes."))
            return
        self._feed(data[room:])

    def _feed(self, data: bytes) -> None:
        """uvicorn's ``data_received``, with hivegate's error responses."""
        self._unset_keepalive_if_required()
        parser = self.parser
        if parser is None:  # the connection is gone (uvicorn drops the parser in connection_lost)
            return
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, _TooManyHeaders):
                self._reject(HeadersTooLargeError(f"The request has more than {self._max_headers} header fields."))
            else:
                self.warnings.warn("invalid_http", "invalid HTTP request from %s", self._peer())
                self._reject(InvalidRequestError("Invalid HTTP request received."))
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                logger.debug("upgrade request from %s served as plain HTTP", self._peer())

    # Parser callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        # uvicorn's on_header, inlined (this runs once per header field of every request)
        headers = self.headers
        if len(headers) >= self._max_headers:
            raise _TooManyHeaders
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._heads_completed += 1
        super().on_headers_complete()  # the deadline stays: a body may follow

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._deadline = None
        self._body_extended = False
        self._in_head = True
        self._head_room = self._max_header_bytes

    # Limits

    def _arm_head_deadline(self) -> None:
        self._deadline = self.loop.time() + self._head_timeout

    def expire(self, now: float) -> None:
        """Act on this connection's deadline if it has passed by ``now`` (loop time); the sweep calls it."""
        if self._deadline is not None and now >= self._deadline:
            self._deadline = None
            self._on_deadline()

    def _on_deadline(self) -> None:
        if self.transport.is_closing():
            return
        if not self._in_head:  # the head is complete; its body is still arriving
            self._on_body_deadline()
            return
        if self._head_room == self._max_header_bytes:
            self._rejected = True
            self.transport.close()  # nothing was sent: an idle connection, no request to answer
            return
        self.warnings.warn("header_read_timeout", "request head from %s not complete in time", self._peer())
        timeout = self._head_timeout
        self._reject(RequestTimeoutError(f"The request line and headers did not arrive within {timeout:g} s."))

    def _on_body_deadline(self) -> None:
        if not self._body_extended:
            self._body_extended = True
            self._deadline = self.loop.time() + self._body_timeout
            return
        self.warnings.warn("body_read_timeout", "request body from %s not complete in time", self._peer())
        cycle = cast("RequestResponseCycle | None", self.cycle)
        if cycle is None or cycle.response_started:
            self._rejected = True
            self.transport.close()  # the app has answered (or is answering) already: nothing to add
            return
        total = self._head_timeout + self._body_timeout
        self._reject(RequestTimeoutError(f"The request did not arrive within {total:g} s."), detach_app=True)

    def _reject(self, error: GatewayError, *, detach_app: bool = False) -> None:
        """Answer ``error`` and close: stop writing, discard input for :data:`LINGER_SECONDS`, then close.

        ``detach_app``: the running request's app has not started its response; from now on its
        ``receive()`` returns ``http.disconnect`` and its sends are dropped, and ``error`` is the answer.
        """
        self._rejected = True
        self._in_head = False
        self._deadline = None
        self._cancel_timer()
        self._unset_keepalive_if_required()
        transport = self.transport
        if transport.is_closing():
            return
        if error.http_status == 431:
            self.warnings.warn("headers_too_large", "request head from %s too large: %s", self._peer(), error.message)
        cycle = cast("RequestResponseCycle | None", self.cycle)  # None until the first head is complete
        if cycle is not None and not cycle.response_complete:
            if cycle.response_started or not detach_app:
                transport.close()  # a response is being (or may be) written: no room for another one
                return
            cycle.disconnected = True
            cycle.message_event.set()
        transport.write(error_response(error, self.url, self.server_state.default_headers))
        if transport.can_write_eof():
            transport.write_eof()
        self.flow.resume_reading()
        self._timer = self.loop.call_later(LINGER_SECONDS, transport.close)

    def _refuse(self, kind: str, message: str, limit: int) -> None:
        self._rejected = True
        self.warnings.warn(kind, message + "; connection from %s closed", limit, self._peer())
        self.transport.close()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _release_address(self) -> None:
        if self._address is not None:
            self.clients.remove(self._address)
            self._address = None

    def _peer(self) -> str:
        return self.client[0] if self.client else "a local socket"


def http_protocol(server: ServerSettings) -> type[LimitedHttpToolsProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)`` enforcing ``server``'s HTTP limits.

    Each call makes a new class with its own per-address connection count, so build one per server.
    Logs a warning when ``server.max_connections`` leaves fewer than :data:`RESERVED_DESCRIPTORS` of
    the process's descriptor limit (``ulimit -n``): ``accept()`` would fail before the cap applies.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and server.max_connections + RESERVED_DESCRIPTORS > soft:
        logger.warning(
            "server.max_connections (%d) is too close to the descriptor limit (ulimit -n: %d); "
            "keep it at most %d, or raise the limit",
            server.max_connections,
            soft,
            max(soft - RESERVED_DESCRIPTORS, 1),
        )
    clients = ClientConnections()
    warnings = _WarningThrottle()

    class HivegateHttpProtocol(LimitedHttpToolsProtocol):
        pass

    HivegateHttpProtocol.limits = server
    HivegateHttpProtocol.clients = clients
    HivegateHttpProtocol.warnings = warnings
    HivegateHttpProtocol.sweep = _DeadlineSweep(
        min(SWEEP_INTERVAL_SECONDS, server.header_read_timeout_seconds / 4, server.body_read_timeout_seconds / 4)
    )
    return HivegateHttpProtocol
