"""Issue 7 item 3: the HTTP limits' settings and the error responses of the HTTP layer (no server).

The limits themselves are exercised against a real server in ``tests/e2e/test_http_limits.py``.
"""

from __future__ import annotations

import json
import logging
import resource

import pytest

from hivegate.errors import HeadersTooLargeError, RequestTimeoutError
from hivegate.http_server import ClientConnections, error_response, http_protocol
from hivegate.settings import SettingsError, load_settings


def test_limits_have_bounded_defaults_and_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 7 item 3: every HTTP limit is on by default and set through ``HIVEGATE_SERVER__*``."""
    server = load_settings().server
    assert server.header_read_timeout_seconds == 10.0
    assert server.body_read_timeout_seconds == 60.0
    assert server.max_header_bytes == 64 * 1024
    assert server.max_headers == 100
    assert server.keep_alive_timeout_seconds == 5
    assert server.max_connections == 1000
    assert server.max_connections_per_client == 128
    monkeypatch.setenv("HIVEGATE_SERVER__MAX_HEADER_BYTES", "8192")
    monkeypatch.setenv("HIVEGATE_SERVER__MAX_CONNECTIONS_PER_CLIENT", "0")
    server = load_settings().server
    assert server.max_header_bytes == 8192
    assert server.max_connections_per_client == 0


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("header_read_timeout_seconds", "0"),
        ("body_read_timeout_seconds", "0"),
        ("max_header_bytes", "100"),
        ("max_headers", "2"),
        ("keep_alive_timeout_seconds", "0"),
        ("max_connections", "0"),
        ("max_connections_per_client", "-1"),
    ],
)
def test_unusable_limits_are_refused_naming_the_key(monkeypatch: pytest.MonkeyPatch, key: str, value: str) -> None:
    """Issue 7 item 3: a limit that would refuse every request (or none) is a settings error."""
    monkeypatch.setenv(f"HIVEGATE_SERVER__{key.upper()}", value)
    with pytest.raises(SettingsError, match=rf"server\.{key} \(env HIVEGATE_SERVER__{key.upper()}\)"):
        load_settings()


def test_error_responses_carry_the_planes_body() -> None:
    """Issue 7 item 3: 431 and 408 are JSON-RPC errors (id null) on MCP paths, OAuth errors under /oauth/."""
    raw = error_response(HeadersTooLargeError("too big"), b"/echo/mcp", [(b"server", b"uvicorn")])
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert b"connection: close" in head
    assert b"server: uvicorn" in head
    assert f"content-length: {len(body)}".encode() in head
    assert json.loads(body) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "too big", "data": {"code": "headers_too_large"}},
    }
    raw = error_response(RequestTimeoutError("slow"), b"/.well-known/oauth-authorization-server", [])
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert json.loads(body) == {"error": "invalid_request", "error_description": "slow"}


def test_each_protocol_class_counts_its_own_connections() -> None:
    """Issue 7 item 3: two servers in one process do not share per-address counts."""
    settings = load_settings().server
    first, second = http_protocol(settings), http_protocol(settings)
    assert first.clients is not second.clients
    clients = ClientConnections()
    clients.add("10.0.0.1")
    clients.add("10.0.0.1")
    clients.remove("10.0.0.1")
    assert clients.count("10.0.0.1") == 1
    clients.remove("10.0.0.1")
    assert clients.count("10.0.0.1") == 0


def test_a_connection_cap_above_the_descriptor_limit_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 7 item 3: a ``max_connections`` the descriptor limit cannot honour is named at start-up."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        pytest.skip("no descriptor limit in this process")
    settings = load_settings(server={"max_connections": soft})
    with caplog.at_level(logging.WARNING, logger="hivegate.http_server"):
        http_protocol(settings.server)
    assert "server.max_connections" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hivegate.http_server"):
        http_protocol(load_settings(server={"max_connections": max(soft - 100, 1)}).server)
    assert caplog.text == ""
