"""A client that goes away in the middle of its request body is no server error (issue 7 item 5's rule).

Found by the HTTP-limits work of issue 7 (item 3): when a body stops arriving (the client
disconnects, or ``server.body_read_timeout_seconds`` ends it), Starlette raises ``ClientDisconnect``
from the form or JSON read; on ``/oauth/register`` the SDK's handler let it through and uvicorn
logged "Exception in ASGI application" with a traceback. Every OAuth endpoint now ends such a
request quietly (nobody is left to read an answer).
"""

from __future__ import annotations

import pytest
from starlette.routing import Router
from starlette.types import Message

from tests.auth.oauth.conftest import OAuthServer

PATHS = ["/oauth/register", "/oauth/token", "/oauth/revoke", "/oauth/login", "/oauth/consent", "/oauth/authorize"]


@pytest.mark.parametrize("path", PATHS)
async def test_a_disconnect_mid_body_raises_nothing(oauth: OAuthServer, path: str) -> None:
    """The endpoint returns without an exception when ``receive`` reports the disconnect mid-body."""
    is_json = path == "/oauth/register"
    content_type = b"application/json" if is_json else b"application/x-www-form-urlencoded"
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", content_type), (b"content-length", b"1000")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }
    incoming: list[Message] = [
        {"type": "http.request", "body": b'{"redirect_uris": [' if is_json else b"grant_type=", "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await Router(routes=oauth.server.routes())(scope, receive, send)  # raises on main: ClientDisconnect
    statuses = [m["status"] for m in sent if m["type"] == "http.response.start"]
    assert all(status < 500 for status in statuses), statuses
