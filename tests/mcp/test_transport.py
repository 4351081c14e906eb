"""Transport checks in front of every MCP endpoint: Host/Origin policy, Content-Type, body size.

Spec: MCP 2025-11-25 basic/transports#security-warning (Origin MUST be validated); RFC 9110 §5.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from starlette.types import Message, Receive

from hivegate.errors import (
    BatchNotSupportedError,
    ForbiddenOriginError,
    HeaderMismatchError,
    InvalidRequestError,
    MisdirectedRequestError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
)
from hivegate.mcp.transport import (
    HostPolicy,
    check_content_type,
    check_encoded_headers,
    check_modern_envelope,
    decode_headers,
    read_body,
    read_mcp_post,
    replay_receive,
)
from hivegate.settings import ServerSettings


def _default_policy() -> HostPolicy:
    defaults = ServerSettings()
    return HostPolicy(defaults.allowed_hosts, defaults.allowed_origins)


def _host_allowed(policy: HostPolicy, host: str | None) -> bool:
    headers = {} if host is None else {"host": host}
    try:
        policy.check(headers)
    except MisdirectedRequestError:
        return False
    return True


def _origin_allowed(policy: HostPolicy, origin: str) -> bool:
    try:
        policy.check({"host": "127.0.0.1:8094", "origin": origin})
    except ForbiddenOriginError:
        return False
    return True


def test_refusals_carry_their_codes_and_statuses() -> None:
    with pytest.raises(MisdirectedRequestError) as bad_host:
        _default_policy().check({"host": "evil.example"})
    assert (bad_host.value.code, bad_host.value.http_status) == ("invalid_host", 421)
    with pytest.raises(ForbiddenOriginError) as bad_origin:
        _default_policy().check({"host": "localhost:1", "origin": "http://evil.example"})
    assert (bad_origin.value.code, bad_origin.value.http_status) == ("forbidden_origin", 403)


# -- Host ---------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1:8094", "127.0.0.1:1", "localhost:80", "LOCALHOST:65535", "[::1]:9000"])
def test_default_hosts_allow_loopback_on_any_port(host: str) -> None:
    assert _host_allowed(_default_policy(), host)


@pytest.mark.parametrize(
    "host",
    [
        None,
        "",
        "evil.example",
        "evil.example:8094",
        "127.0.0.10:80",
        "127.0.0.1.evil.example:80",
        "localhost.evil.example:80",
        "evil.localhost:80",
        "127.0.0.1:abc",
        "127.0.0.1:",
        "127.0.0.1:80:80",
        "[::2]:80",
    ],
)
def test_default_hosts_refuse_everything_else(host: str | None) -> None:
    assert not _host_allowed(_default_policy(), host)


def test_name_star_pattern_matches_only_that_name_with_a_numeric_port() -> None:
    policy = HostPolicy(["gateway.example.com:*"], [])
    assert _host_allowed(policy, "gateway.example.com:443")
    assert _host_allowed(policy, "Gateway.Example.COM:8080")
    assert not _host_allowed(policy, "api.gateway.example.com:443")
    assert not _host_allowed(policy, "gateway.example.com:https")
    assert not _host_allowed(policy, "gateway.example.co:443")


def test_exact_pattern_is_case_insensitive_and_exact() -> None:
    policy = HostPolicy(["gateway.example.com"], [])
    assert _host_allowed(policy, "GATEWAY.example.com")
    assert not _host_allowed(policy, "gateway.example.com:443")
    assert not _host_allowed(policy, "gateway.example.com.evil")


def test_glob_pattern() -> None:
    policy = HostPolicy(["*.example.com"], [])
    assert _host_allowed(policy, "api.example.com")
    assert not _host_allowed(policy, "example.com")
    assert not _host_allowed(policy, "api.example.org")


@pytest.mark.parametrize("host", [None, "", "anything", "evil.example:1", "[::9]:80"])
def test_star_allows_any_host_even_a_missing_one(host: str | None) -> None:
    assert _host_allowed(HostPolicy(["*"], []), host)


# -- Origin -------------------------------------------------------------------------------


def test_missing_origin_is_allowed() -> None:
    _default_policy().check({"host": "localhost:8094"})
    HostPolicy(["*"], []).check({})


@pytest.mark.parametrize(
    "origin", ["http://127.0.0.1:3000", "http://localhost:5173", "HTTP://LOCALHOST:80", "http://[::1]:8080"]
)
def test_default_origins_allow_loopback_pages(origin: str) -> None:
    assert _origin_allowed(_default_policy(), origin)


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "http://evil.example:3000",
        "https://localhost:3000",  # another scheme is another origin
        "http://localhost.evil.example:80",
        "http://127.0.0.1:x",
        "null",
        "",
    ],
)
def test_default_origins_refuse_everything_else(origin: str) -> None:
    assert not _origin_allowed(_default_policy(), origin)


def test_star_allows_any_origin() -> None:
    policy = HostPolicy(["*"], ["*"])
    assert _origin_allowed(policy, "https://anything.example")
    assert _origin_allowed(policy, "null")


def test_origin_is_checked_after_host() -> None:
    with pytest.raises(MisdirectedRequestError):
        _default_policy().check({"host": "evil.example", "origin": "http://evil.example"})


# -- Content-Type -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON", " application/json "]
)
def test_json_content_types_pass(content_type: str) -> None:
    check_content_type({"content-type": content_type})


@pytest.mark.parametrize(
    "content_type", [None, "", "text/plain", "application/jsonl", "application/json-patch+json", "multipart/form-data"]
)
def test_other_content_types_are_415(content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    with pytest.raises(UnsupportedMediaTypeError) as refused:
        check_content_type(headers)
    assert (refused.value.code, refused.value.http_status) == ("unsupported_media_type", 415)


# -- body ---------------------------------------------------------------------------------


def _receive(chunks: Sequence[bytes], *, disconnect_after: bool = False) -> Receive:
    """A fake ASGI ``receive`` yielding ``chunks`` as ``http.request`` messages."""
    messages: list[Message] = [
        {"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1 or disconnect_after}
        for index, chunk in enumerate(chunks)
    ]
    if disconnect_after:
        messages.append({"type": "http.disconnect"})

    async def receive() -> Message:
        if not messages:
            raise AssertionError("read past the end of the request")
        return messages.pop(0)

    return receive


async def test_body_is_joined_from_chunks() -> None:
    body = await read_body({}, _receive([b'{"a"', b":", b"1}"]), 1024, {})
    assert body == b'{"a":1}'


async def test_body_at_the_limit_is_accepted() -> None:
    body = await read_body({}, _receive([b"x" * 600, b"y" * 424]), 1024, {"content-length": "1024"})
    assert len(body) == 1024


async def test_declared_size_over_the_limit_is_413_before_reading() -> None:
    async def never() -> Message:
        raise AssertionError("the body must not be read")

    with pytest.raises(PayloadTooLargeError) as refused:
        await read_body({}, never, 1024, {"content-length": "1025"})
    assert (refused.value.code, refused.value.http_status) == ("payload_too_large", 413)


async def test_streamed_size_over_the_limit_is_413() -> None:
    with pytest.raises(PayloadTooLargeError):
        await read_body({}, _receive([b"x" * 1000, b"y" * 25, b"z"]), 1024, {})


async def test_disconnect_ends_the_body() -> None:
    assert await read_body({}, _receive([b"{}"], disconnect_after=True), 1024, {}) == b"{}"


async def test_replay_yields_the_body_once_then_defers() -> None:
    replay = replay_receive(b"{}", _receive([b"ignored"], disconnect_after=True))
    assert await replay() == {"type": "http.request", "body": b"{}", "more_body": False}
    assert (await replay())["type"] == "http.request"
    assert (await replay())["type"] == "http.disconnect"


def test_header_whitespace_is_stripped() -> None:
    scope: dict[str, Any] = {"headers": [(b"mcp-method", b" tools/list\t"), (b"accept", b"application/json")]}
    assert decode_headers(scope) == [("mcp-method", "tools/list"), ("accept", "application/json")]
    assert scope["headers"] == [(b"mcp-method", b"tools/list"), (b"accept", b"application/json")]
    clean = [(b"mcp-method", b"tools/list")]
    untouched: dict[str, Any] = {"headers": clean}
    assert decode_headers(untouched) == [("mcp-method", "tools/list")]
    assert untouched["headers"] is clean


@pytest.mark.parametrize("method", [["tools/list"], {"a": 1}, 5, None, True])
def test_a_modern_method_that_is_not_a_string_is_an_invalid_request(method: object) -> None:
    """Issue 7 item 6: refused before dispatch (the lean path looked it up in a set: a 500)."""
    for message in ({"jsonrpc": "2.0", "id": 1, "method": method}, {"jsonrpc": "2.0", "method": method}):
        with pytest.raises(InvalidRequestError) as refused:
            check_modern_envelope(message)
        assert (refused.value.code, refused.value.http_status, refused.value.jsonrpc_code) == (
            "invalid_request",
            400,
            -32600,
        )
    for fine in ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 1}, [1], None):
        check_modern_envelope(fine)  # the SDK's ladder words the rest


@pytest.mark.parametrize("header", ["mcp-name", "mcp-param-region"])
def test_an_encoded_header_that_is_not_ascii_is_a_header_mismatch(header: str) -> None:
    """Issue 7 item 6: ``=?base64?…?=`` with a non-ASCII payload made the SDK's decoder raise (a 500)."""
    for value in ("=?base64?\xe9?=", "=?base64?a\u00ffb?="):
        with pytest.raises(HeaderMismatchError) as refused:
            check_encoded_headers({header: value})
        assert (refused.value.code, refused.value.http_status, refused.value.jsonrpc_code) == (
            "header_mismatch",
            400,
            -32020,
        )
    # Decodable or merely malformed ASCII values are left to the SDK (which calls them a mismatch).
    for value in ("=?base64?ZWNobw==?=", "=?base64?!!?=", "plain", "\xe9"):
        check_encoded_headers({header: value})
    check_encoded_headers({"user-agent": "=?base64?\xe9?="})  # not a routing header


async def test_batches_are_returned_only_where_allowed() -> None:
    """Issue 7 item 13: a batch is refused unless the caller allows one (a 2025-03-26 session), never modern."""
    headers = {"content-type": "application/json"}
    body = b' [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]'
    scope: dict[str, Any] = {"type": "http", "headers": []}
    post = await read_mcp_post(scope, _receive([body]), headers, 1024, modern=False, allow_batch=True)
    assert post.decoded == [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]
    for modern, allow in ((False, False), (True, True), (True, False)):
        with pytest.raises(BatchNotSupportedError):
            await read_mcp_post(scope, _receive([body]), headers, 1024, modern=modern, allow_batch=allow)
