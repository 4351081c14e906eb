"""HTTP to an ``mcp`` backend's upstream: the result limit on every answer, and the lean hop.

**The result limit.** The SDK client's HTTP transport (:class:`LimitedTransport`) cuts the answer to
each POST off past the agent's ``max_result_bytes``, as a per-request stream error
(:class:`ResultTooLargeError`): that one call fails, the connection and the other calls go on.

**The lean hop** (:class:`UpstreamPost`). The 2026-07-28 revision needs no session: a request is one
POST carrying its own envelope (``_meta`` protocol version, client info and capabilities; the
``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` headers), and its answer
is the POST's response, as one JSON object or an SSE stream that ends with it. A call that needs
nothing streamed back (no progress relayed, no log messages asked for) is sent this way instead of
through the SDK client's dispatcher, on an aiohttp session of the connection's own (C-parsed HTTP/1.1,
pooled keep-alive connections): measured on loopback, the SDK client's stack (httpx2, httpcore2, h11)
spends about 600 µs of CPU per request, aiohttp about 190 µs (``docs/performance.md``).

What the SDK client does for such a call is done here the same way: the same envelope and headers
(the SDK's own header codec, ``mcp.shared.inbound``), the same reading of the answer (a JSON-RPC
error body at any status is the upstream's error; a bare 404 is method not found, another bare error
status an internal error, a 202 or an unfollowed redirect an invalid request; an answer that does not
parse is a parse error; a negative ``ttlMs`` is floored to 0; SSE parsed by httpx2's ``EventSource``,
the SDK client's parser), the result validated as the method's result model (``mcp_types``), and the
same limits (``max_result_bytes`` on the answer; ``timeout_seconds`` on connecting, and on each read of
the answer to any method but ``tools/call``, which the agent's invoke timeout bounds, as documented).
Cancelling the calling task closes the POST, which is the 2026-07-28 wire's cancellation. Cookies are
not kept (one upstream connection serves many callers); the environment's proxy settings are
read as httpx2 reads them, once per connection.

Spec: MCP 2026-07-28 basic/transports (Streamable HTTP, modern era: one request per POST; closing the
response stream cancels it); SEP-2243 (``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``); SEP-2575 (the
per-request ``_meta`` envelope).
"""

from __future__ import annotations

import itertools
import logging
import urllib.request
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from typing import Any, NoReturn

import aiohttp
import httpx2
import mcp_types as types
import orjson
import yarl
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
    find_invalid_x_mcp_header,
    mcp_param_headers,
    x_mcp_header_map,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    PROTOCOL_VERSION_META_KEY,
)
from mcp_types.methods import validate_server_result
from pydantic import ValidationError

__all__ = ["POST_METHODS", "EncodedAnswerError", "LimitedTransport", "ResultTooLargeError", "UpstreamPost"]

POST_METHODS = frozenset({"tools/call", "resources/read", "prompts/get", "completion/complete"})
"""The methods sent by :class:`UpstreamPost` (the lists keep the SDK client's paging and caching)."""

_RESULTS: dict[str, type[types.Result]] = {
    "tools/call": types.CallToolResult,
    "resources/read": types.ReadResourceResult,
    "prompts/get": types.GetPromptResult,
    "completion/complete": types.CompleteResult,
}
_INPUT_REQUIRED = frozenset({"tools/call", "resources/read", "prompts/get"})
"""The methods whose answer may be an ``InputRequiredResult`` (Spec: MCP 2026-07-28, SEP-2322)."""
_ACCEPT = "application/json, text/event-stream"
_MAX_HEADER_MAPS = 10_000
_POOL_CONNECTIONS = 100
"""The most connections to one upstream at once; more calls wait for one (bounded by their own deadline)."""
_KEEPALIVE_SECONDS = 2.0
_CHUNK_BYTES = 65_536


class ResultTooLargeError(httpx2.StreamError):
    """An upstream's answer to one request passed the backend's ``max_result_bytes`` (the rest is not read).

    A stream error, not a transport error: the SDK client then fails that one request (a JSON answer:
    -32700; an SSE stream: the request resolved as abandoned) instead of its whole connection, and every
    other call in flight on the agent goes on (the attack trial saw one over-limit answer fail 30 of 30
    concurrent calls)."""


class _CutOffLogFilter(logging.Filter):
    """The SDK client logs a cut-off answer as a JSON parse failure, with its traceback; the backend
    logs it as one line of its own (``McpUpstreamBackend._cut_off_answer``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        cause = record.exc_info[1] if record.exc_info else None
        return not isinstance(cause, ResultTooLargeError)


logging.getLogger("mcp.client.streamable_http").addFilter(_CutOffLogFilter())


class _LimitedStream(httpx2.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes], limit: int, on_cut: Callable[[], None]) -> None:
        self._stream, self._limit, self._on_cut = stream, limit, on_cut

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                self._on_cut()
                raise ResultTooLargeError(f"the answer passed {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        if isinstance(self._stream, httpx2.AsyncByteStream):
            await self._stream.aclose()


class EncodedAnswerError(httpx2.StreamError):
    """An upstream answered a POST compressed, though the gateway asked for ``Accept-Encoding: identity``.

    Refused unread, as a per-request stream error (that call is ``agent_service_unavailable``): the
    result limit counts the bytes on the wire, and a small compressed body can decompress to gigabytes
    (the attack trial saw a 1 GiB gzip bomb take 3.2 GiB of the gateway's memory)."""


class _RefusedStream(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, error: Exception) -> None:
        self._stream, self._error = stream, error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise self._error
        yield b""  # pragma: no cover  (an async generator that raises at once)

    async def aclose(self) -> None:
        await self._stream.aclose()


class LimitedTransport(httpx2.AsyncBaseTransport):
    """The SDK client's HTTP transport to one upstream: the answer to each POST (one request's result, or
    its SSE stream) is cut off past ``limit`` bytes (``on_cut`` is told of each). The handshake era's
    standalone GET stream, which lives as long as the session, is not counted. Every request asks for
    ``Accept-Encoding: identity``, and a POST's answer compressed all the same is refused
    (:class:`EncodedAnswerError`)."""

    def __init__(self, limit: int, on_cut: Callable[[], None]) -> None:
        self._inner = httpx2.AsyncHTTPTransport(retries=0)
        self._limit = limit
        self._on_cut = on_cut

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["accept-encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        if request.method == "POST" and isinstance(response.stream, httpx2.AsyncByteStream):
            encoding = response.headers.get("content-encoding", "").strip().lower()
            if encoding not in ("", "identity"):
                del response.headers["content-encoding"]  # nothing is decoded: the body is never read
                error = EncodedAnswerError(f"the answer is compressed ({encoding[:40]}), which was not asked for")
                response.stream = _RefusedStream(response.stream, error)
            else:
                response.stream = _LimitedStream(response.stream, self._limit, self._on_cut)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class UpstreamPost:
    """Send one request to a 2026-07-28 Streamable HTTP upstream as one POST (module docstring).

    Args:
        url: the upstream's MCP endpoint.
        version: the negotiated protocol version (a modern one).
        headers: the agent's own headers for the upstream (its credentials included).
        client_info: the ``clientInfo`` the SDK client declares on the same connection.
        timeout_seconds: the longest wait to connect, and for each read of an answer (``tools/call`` aside:
            the caller's invoke timeout bounds it).
        max_result_bytes: the largest answer read (beyond it: :class:`ResultTooLargeError`).
        on_cut: told of each answer cut off.

    Open with ``async with``: the session (its connection pool) lives until the block ends.
    """

    def __init__(
        self,
        url: str,
        version: str,
        headers: Mapping[str, str],
        client_info: dict[str, Any],
        *,
        timeout_seconds: float,
        max_result_bytes: int,
        on_cut: Callable[[], None],
    ) -> None:
        self._url = yarl.URL(url)
        self.version = version
        self._client_info = client_info
        self._limit = max_result_bytes
        self._on_cut = on_cut
        self._ids = itertools.count(1)
        # By tool name: the schema the map was made from (held, so it is that schema), and the map.
        self._header_maps: dict[str, tuple[Mapping[str, Any], dict[tuple[str, ...], str]]] = {}
        self._headers = {
            **headers,
            "content-type": "application/json",
            "accept": _ACCEPT,
            MCP_PROTOCOL_VERSION_HEADER: version,
        }
        # connect=None: the wait for a free pooled connection is not bounded here (a tools/call is bounded by
        # the invoke timeout, the rest by timeout_seconds in the backend); sock_connect bounds connecting.
        self._timeout = aiohttp.ClientTimeout(total=None, connect=None, sock_connect=timeout_seconds)
        self._read_timeout = aiohttp.ClientTimeout(
            total=None, connect=None, sock_connect=timeout_seconds, sock_read=timeout_seconds
        )
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> UpstreamPost:
        # An idle connection is let go after _KEEPALIVE_SECONDS, before common servers close theirs (uvicorn
        # and Node: 5 s), so a POST seldom meets a connection the upstream is closing.
        connector = aiohttp.TCPConnector(limit=_POOL_CONNECTIONS, keepalive_timeout=_KEEPALIVE_SECONDS)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            cookie_jar=aiohttp.DummyCookieJar(),
            proxy=_environment_proxy(self._url),
            raise_for_status=False,
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def request(
        self, method: str, params: Mapping[str, Any], input_schema: Mapping[str, Any] | None = None
    ) -> types.Result:
        """Send ``method`` (one of :data:`POST_METHODS`) with ``params`` and return its validated result.

        ``params`` are the upstream's (names mapped, the caller's envelope removed); their ``_meta``
        may hold the caller's client capabilities, else none are declared. ``input_schema`` is the
        called tool's, from the upstream's listing: the arguments it annotates with
        ``x-mcp-header`` are mirrored into ``Mcp-Param-*`` headers (none when it was never listed,
        as the SDK client does).

        Returns:
            The method's result model, or an ``InputRequiredResult``.

        Raises:
            MCPError: the upstream's JSON-RPC error; or, as the SDK client words them, method
                not found (a bare 404), internal error (another bare error status), invalid
                request (a 202, a redirect, an unexpected content type), parse error (an answer
                that is not the JSON-RPC response to this request, or a result that does not
                validate).
            ResultTooLargeError: the answer passed ``max_result_bytes``.
            aiohttp.ClientError: the POST failed (connect, a dropped connection).
            TimeoutError: no connection within ``timeout_seconds``; or, but for ``tools/call``, no byte of
                the answer within it.
            RuntimeError: the session is closed.
        """
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("the upstream's HTTP session is closed")
        request_id = next(self._ids)
        meta = dict(params.get("_meta") or {})
        meta[PROTOCOL_VERSION_META_KEY] = self.version
        meta[CLIENT_INFO_META_KEY] = self._client_info
        meta.setdefault(CLIENT_CAPABILITIES_META_KEY, {})
        body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": meta}})
        headers = {**self._headers, MCP_METHOD_HEADER: method}
        name = params.get(NAME_BEARING_METHODS.get(method, ""))
        if isinstance(name, str):
            headers[MCP_NAME_HEADER] = encode_header_value(name)
        if method == "tools/call" and input_schema is not None:
            arguments = params.get("arguments")
            if isinstance(arguments, Mapping) and arguments:
                headers.update(mcp_param_headers(self._header_map(str(name), input_schema), arguments))
        timeout = self._timeout if method == "tools/call" else self._read_timeout
        async with session.post(
            self._url, data=body, headers=headers, allow_redirects=False, timeout=timeout
        ) as response:
            raw = await self._answer(response, request_id)
        return _validated(method, self.version, raw)

    def _header_map(self, tool: str, input_schema: Mapping[str, Any]) -> dict[tuple[str, ...], str]:
        """Tool ``tool``'s ``x-mcp-header`` annotations in ``input_schema`` (none when they are invalid: the
        SDK client drops such a tool from its listing). Kept per tool while its listed schema is the same
        object (a new listing makes new schema objects; the attack trial found a cache by ``id()`` giving a
        tool another's map once the old schema's id was reused)."""
        cached = self._header_maps.get(tool)
        if cached is not None and cached[0] is input_schema:
            return cached[1]
        found = {} if find_invalid_x_mcp_header(input_schema) else x_mcp_header_map(input_schema)
        if len(self._header_maps) >= _MAX_HEADER_MAPS:
            self._header_maps.clear()
        self._header_maps[tool] = (input_schema, found)
        return found

    async def _answer(self, response: aiohttp.ClientResponse, request_id: int) -> dict[str, Any]:
        """The result of the JSON-RPC response to ``request_id`` in ``response`` (module docstring)."""
        content_type = response.headers.get("content-type", "").lower()
        if response.status != 200:
            await self._refusal(response, content_type)
        if content_type.startswith("application/json"):
            message = _message(await self._read(response))
        elif content_type.startswith("text/event-stream"):
            message = await self._from_stream(response, request_id)
        else:
            raise MCPError(INVALID_REQUEST, f"Unexpected content type: {content_type}")
        if message is None or message.get("id") != request_id:
            raise MCPError(PARSE_ERROR, "the upstream's answer is not the JSON-RPC response to the request")
        if "error" in message:
            raise _error(message)
        result = message.get("result")
        if not isinstance(result, dict):
            raise MCPError(PARSE_ERROR, "the upstream's answer has no result object")
        return result

    async def _read(self, response: aiohttp.ClientResponse) -> bytes:
        """The whole answer, at most ``max_result_bytes`` of it (one declared longer is not read at all)."""
        length = response.content_length
        if length is not None and not response.headers.get("content-encoding"):
            if length > self._limit:
                self._on_cut()
                raise ResultTooLargeError(f"the answer passed {self._limit} bytes")
            return await response.read()  # exactly Content-Length bytes
        chunks = [chunk async for chunk in self._limited(response)]
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _limited(self, response: aiohttp.ClientResponse) -> _LimitedStream:
        return _LimitedStream(response.content.iter_chunked(_CHUNK_BYTES), self._limit, self._on_cut)

    async def _from_stream(self, response: aiohttp.ClientResponse, request_id: int) -> dict[str, Any] | None:
        """The response to ``request_id`` on an SSE answer (anything before it, a notification none asked
        for, is passed over), or None when the stream ends without it. Parsed by httpx2's
        ``EventSource`` (the SDK client's parser), over the answer's bytes."""
        request = httpx2.Request("POST", str(self._url))
        events = httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, stream=self._limited(response), request=request
        )
        async for event in httpx2.EventSource(events, max_event_size=self._limit):
            if event.event == "message" and event.data:
                message = _message(event.data)
                if message is not None and message.get("id") == request_id:
                    return message
        return None

    async def _refusal(self, response: aiohttp.ClientResponse, content_type: str) -> NoReturn:
        """A POST answered with another status than 200, as the SDK client reads it (module docstring)."""
        status = response.status
        if status == 202:
            raise MCPError(INVALID_REQUEST, "server answered a request with 202 Accepted")
        if 300 <= status < 400:
            raise MCPError(INVALID_REQUEST, f"server answered {status}; redirects are not followed")
        if status < 400:
            raise MCPError(INVALID_REQUEST, f"server answered a request with {status}")
        if content_type.startswith("application/json"):
            message = _message(await self._read(response))
            if message is not None and "error" in message:
                raise _error(message)
        if status == 404:
            raise MCPError(METHOD_NOT_FOUND, "Not Found")
        raise MCPError(INTERNAL_ERROR, "Server returned an error response")


def _environment_proxy(url: yarl.URL) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``, unless
    ``NO_PROXY`` exempts its host), as the SDK client's httpx2 reads them; looked up once per session,
    not per request (aiohttp's ``trust_env`` looks them up, and reads ``.netrc``, on every request)."""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(url.host or ""):
        return None
    return proxy


def _message(data: bytes | str) -> dict[str, Any] | None:
    """One JSON-RPC response object, or None when ``data`` is not one."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if ("result" in message) == ("error" in message):
        return None
    return message


def _error(message: dict[str, Any]) -> MCPError:
    """The upstream's JSON-RPC error as an :class:`MCPError` (a malformed one is a parse error)."""
    try:
        error = types.ErrorData.model_validate(message["error"], by_name=False)
    except ValidationError:
        return MCPError(PARSE_ERROR, "the upstream's error object is malformed")
    return MCPError(error.code, error.message, error.data)


def _validated(method: str, version: str, raw: dict[str, Any]) -> types.Result:
    """``raw`` as ``method``'s result model (an ``InputRequiredResult`` where the method may answer one),
    once it fits ``version``'s result surface, as the SDK client checks it (``validate_server_result``:
    2026-07-28 requires ``resultType``, for one)."""
    ttl = raw.get("ttlMs")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0  # as the SDK client: a negative ttl is floored, not refused (SEP-2549 SHOULD)
    try:
        validate_server_result(method, version, raw)
        if raw.get("resultType") == "input_required" and method in _INPUT_REQUIRED:
            return types.InputRequiredResult.model_validate(raw, by_name=False)
        return _RESULTS[method].model_validate(raw, by_name=False)
    except ValidationError:
        raise MCPError(PARSE_ERROR, f"the upstream's {method} result does not validate") from None
