"""Unknown paths and methods under ``/oauth/*`` and ``/.well-known/*`` answer in OAuth JSON (issue 7 item 5's rule).

Found by the attack trial of issue 7: ``GET /oauth/token``, ``PUT /oauth/register``, ``DELETE
/.well-known/oauth-authorization-server`` and ``GET /oauth/nothing`` got Starlette's bare
``text/plain`` "Method Not Allowed" / "Not Found", where every other answer of those paths is an
RFC 6749 §5.2 JSON body (clients and their error handling parse those paths as JSON). The 405
keeps its ``Allow`` header (RFC 9110 §15.5.6).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.gateway_process import GatewayProcess, run_gateway


@pytest.fixture(scope="module")
def gateway() -> Iterator[GatewayProcess]:
    with run_gateway(None) as running:
        yield running


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/oauth/token", 405),
        ("PUT", "/oauth/register", 405),
        ("GET", "/oauth/revoke", 405),
        ("DELETE", "/oauth/authorize", 405),
        ("DELETE", "/.well-known/oauth-authorization-server", 405),
        ("GET", "/oauth/nothing", 404),
        ("GET", "/.well-known/openid-configuration", 404),
        ("GET", "/.well-known/oauth-protected-resource/mcp/x", 404),
        ("GET", "/.well-known/oauth-protected-resource/mcp/", 404),
        ("POST", "/oauth/token/", 404),
    ],
)
def test_unrouted_oauth_requests_get_oauth_json(gateway: GatewayProcess, method: str, path: str, status: int) -> None:
    """Issue 7 item 5: 404 / 405 on the OAuth plane are JSON errors, never bare text."""
    response = httpx.request(method, gateway.url + path, timeout=10)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert body["error"] == ("invalid_request" if status == 405 else "not_found"), body
    if status == 405:
        assert response.headers["allow"], response.headers


def test_no_trailing_slash_redirect_is_built_from_the_host_header(gateway: GatewayProcess) -> None:
    """Found by issue 8's attack trial: ``/.well-known/oauth-protected-resource/mcp/`` answered 307
    with ``Location: http://<the request's Host>/…`` (Starlette's ``redirect_slashes``), a redirect
    any client could point at another host (cache poisoning). Now a plain OAuth 404, no Location."""
    response = httpx.get(
        gateway.url + "/.well-known/oauth-protected-resource/mcp/", headers={"Host": "evil.example"}, timeout=10
    )
    assert response.status_code == 404
    assert "location" not in response.headers
    assert response.json()["error"] == "not_found"


@pytest.mark.parametrize("path", ["/mcp/", "/echo/mcp/", "/agents/echo/mcp/"])
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_an_mcp_endpoint_with_a_trailing_slash_is_a_json_rpc_404(
    gateway: GatewayProcess, method: str, path: str
) -> None:
    """Found by issue 8's attack trial: ``/mcp/`` answered a plain-text 404. An MCP client (or a proxy
    that adds the slash) now reads the MCP plane's error shape (JSON-RPC 2.0 §5.1, ``id`` null) naming
    the endpoint, and no redirect is built from the Host header."""
    response = httpx.request(method, gateway.url + path, headers={"Host": "evil.example"}, timeout=10)
    assert response.status_code == 404, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    assert "location" not in response.headers
    body = response.json()
    assert body["id"] is None
    assert body["error"]["code"] == -32600
    assert body["error"]["data"]["code"] == "not_found"
    assert path[:-1] in body["error"]["message"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/nothing/here", 404),
        ("POST", "//echo/a2a", 404),
        ("POST", "/echo/v1/invoke/", 404),
        ("GET", "/echo/a2a2", 404),
        ("POST", "/healthz", 405),
        ("DELETE", "/", 405),
    ],
)
def test_every_other_unrouted_request_gets_the_rest_envelope(
    gateway: GatewayProcess, method: str, path: str, status: int
) -> None:
    """Found by issue 9's attack trial: paths no plane serves (``//{id}/a2a``, ``/{id}/v1/invoke/``) and
    methods a route does not take got Starlette's plain-text answer. Now the REST plane's JSON envelope
    (docs/rest.md) with code ``not_found`` / ``method_not_allowed``; a 405 keeps ``Allow``."""
    response = httpx.request(method, gateway.url + path, timeout=10)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    error = response.json()["error"]
    assert error["code"] == ("not_found" if status == 404 else "method_not_allowed"), error
    if status == 405:
        assert "GET" in response.headers["allow"], response.headers
