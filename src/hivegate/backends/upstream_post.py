"""The lean hop to a 2026-07-28 upstream over Streamable HTTP: one request, one POST, one answer.

The stateless revision needs no session: a request is one POST carrying its own envelope
(``_meta`` protocol version, client info and capabilities; the ``MCP-Protocol-Version``,
``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` headers), and its answer is the POST's
response, as one JSON object or an SSE stream that ends with it. A call that needs nothing
streamed back (no progress relayed, no log messages asked for) is sent this way on the agent's
pooled HTTP client, the one its SDK client holds, instead of through the SDK client's
dispatcher (its memory streams, a task per request and per message): the SDK client costs
about a millisecond of CPU per call, this under a tenth of it (``docs/performance.md``).

What the SDK client does for such a call is done here the same way: the same envelope and
headers (the SDK's own header codec, ``mcp.shared.inbound``), the same reading of the answer
(a JSON-RPC error body at any status is the upstream's error; a bare 404 is method not found,
another bare error status an internal error, a 202 or an unfollowed redirect an invalid
request; an answer that does not parse is a parse error; a negative ``ttlMs`` is floored to 0),
and the result validated as the method's result model (``mcp_types``). Cancelling the calling
task closes the POST, which is the 2026-07-28 wire's cancellation.

Spec: MCP 2026-07-28 basic/transports (Streamable HTTP, modern era: one request per POST;
closing the response stream cancels it); SEP-2243 (``Mcp-Method``, ``Mcp-Name``,
``Mcp-Param-*``); SEP-2575 (the per-request ``_meta`` envelope).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, NoReturn

import httpx2
import mcp_types as types
import orjson
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
from pydantic import ValidationError

__all__ = ["POST_METHODS", "UpstreamPost"]

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


class UpstreamPost:
    """Send one request to a 2026-07-28 Streamable HTTP upstream as one POST (module docstring).

    Args:
        http: the agent's pooled HTTP client (its credentials, timeouts and result limit set).
        url: the upstream's MCP endpoint.
        version: the negotiated protocol version (a modern one).
        client_info: the ``clientInfo`` the SDK client declares on the same connection.
        max_event_bytes: the largest SSE event read (the agent's ``max_result_bytes``).
    """

    __slots__ = ("_client_info", "_header_maps", "_http", "_ids", "_max_event_bytes", "_url", "version")

    def __init__(
        self, http: httpx2.AsyncClient, url: str, version: str, client_info: dict[str, Any], max_event_bytes: int
    ) -> None:
        self._http = http
        self._url = url
        self.version = version
        self._client_info = client_info
        self._max_event_bytes = max_event_bytes
        self._ids = itertools.count(1)
        self._header_maps: dict[int, dict[tuple[str, ...], str]] = {}

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
            httpx2.HTTPError: the POST failed (connect, read, timeout, a cut-off answer).
        """
        request_id = next(self._ids)
        meta = dict(params.get("_meta") or {})
        meta[PROTOCOL_VERSION_META_KEY] = self.version
        meta[CLIENT_INFO_META_KEY] = self._client_info
        meta.setdefault(CLIENT_CAPABILITIES_META_KEY, {})
        body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": meta}})
        headers = {
            "content-type": "application/json",
            "accept": _ACCEPT,
            MCP_PROTOCOL_VERSION_HEADER: self.version,
            MCP_METHOD_HEADER: method,
        }
        name = params.get(NAME_BEARING_METHODS.get(method, ""))
        if isinstance(name, str):
            headers[MCP_NAME_HEADER] = encode_header_value(name)
        if method == "tools/call" and input_schema is not None:
            arguments = params.get("arguments")
            if isinstance(arguments, Mapping) and arguments:
                headers.update(mcp_param_headers(self._header_map(input_schema), arguments))
        async with self._http.stream("POST", self._url, content=body, headers=headers) as response:
            raw = await self._answer(response, request_id)
        return _validated(method, raw)

    def _header_map(self, input_schema: Mapping[str, Any]) -> dict[tuple[str, ...], str]:
        """The tool's ``x-mcp-header`` annotations (none when they are invalid: the SDK client drops such a
        tool from its listing, and the gateway's listing already left it out or shows it unannotated)."""
        key = id(input_schema)
        found = self._header_maps.get(key)
        if found is None:
            found = {} if find_invalid_x_mcp_header(input_schema) else x_mcp_header_map(input_schema)
            if len(self._header_maps) >= _MAX_HEADER_MAPS:
                self._header_maps.clear()
            self._header_maps[key] = found
        return found

    async def _answer(self, response: httpx2.Response, request_id: int) -> dict[str, Any]:
        """The result of the JSON-RPC response to ``request_id`` in ``response`` (module docstring)."""
        content_type = response.headers.get("content-type", "").lower()
        if response.status_code != 200:
            await _refusal(response, content_type)
        if content_type.startswith("application/json"):
            message = _message(await response.aread())
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

    async def _from_stream(self, response: httpx2.Response, request_id: int) -> dict[str, Any] | None:
        """The response to ``request_id`` on an SSE answer (anything before it, a notification none asked
        for, is passed over), or None when the stream ends without it."""
        async for event in httpx2.EventSource(response, max_event_size=self._max_event_bytes):
            if event.event == "message" and event.data:
                message = _message(event.data)
                if message is not None and message.get("id") == request_id:
                    return message
        return None


async def _refusal(response: httpx2.Response, content_type: str) -> NoReturn:
    """A POST answered with another status than 200, as the SDK client reads it (module docstring)."""
    status = response.status_code
    if status == 202:
        raise MCPError(INVALID_REQUEST, "server answered a request with 202 Accepted")
    if status < 400:
        raise MCPError(INVALID_REQUEST, f"server answered {status}; redirects are not followed")
    if content_type.startswith("application/json"):
        message = _message(await response.aread())
        if message is not None and "error" in message:
            raise _error(message)
    if status == 404:
        raise MCPError(METHOD_NOT_FOUND, "Not Found")
    raise MCPError(INTERNAL_ERROR, "Server returned an error response")


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


def _validated(method: str, raw: dict[str, Any]) -> types.Result:
    """``raw`` as ``method``'s result model (an ``InputRequiredResult`` where the method may answer one)."""
    ttl = raw.get("ttlMs")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0  # as the SDK client: a negative ttl is floored, not refused (SEP-2549 SHOULD)
    try:
        if raw.get("resultType") == "input_required" and method in _INPUT_REQUIRED:
            return types.InputRequiredResult.model_validate(raw, by_name=False)
        return _RESULTS[method].model_validate(raw, by_name=False)
    except ValidationError:
        raise MCPError(PARSE_ERROR, f"the upstream's {method} result does not validate") from None
