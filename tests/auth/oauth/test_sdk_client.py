"""Interoperability with the official MCP SDK client (``mcp.client.auth.OAuthClientProvider``).

The client discovers everything from a 401 (RFC 9728 metadata, then RFC 8414 metadata, checking
the issuer), registers (RFC 7591), authorizes with PKCE S256 and ``resource``, checks ``iss``
(RFC 9207) byte for byte, and redeems the code. The consent step is driven by a headless
"browser" (httpx with a cookie jar) inside the client's redirect handler.
"""

from __future__ import annotations

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from pydantic import AnyUrl

from tests.auth.oauth.conftest import CALLBACK, Browser, OAuthServer, query
from tests.oauth_token_storage import MemoryTokenStorage


async def test_official_client_gets_a_token_for_the_agent(oauth: OAuthServer, browser: Browser) -> None:
    results: list[AuthorizationCodeResult] = []
    authorize_urls: list[str] = []

    async def redirect_handler(url: str) -> None:
        authorize_urls.append(url)
        response = await browser.http.get(url)
        assert response.status_code == 302, response.text
        request_id = query(response.headers["location"])["request"]
        request_id = await browser.sign_in(request_id)
        consent = await browser.consent_page(request_id)
        assert 'value="alpha" checked' in consent.text  # pre-selected from resource and scope
        allowed = await browser.consent(request_id, ["alpha"])
        params = query(allowed.headers["location"])
        results.append(AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss")))

    async def callback_handler() -> AuthorizationCodeResult:
        return results[-1]

    storage = MemoryTokenStorage()
    provider = OAuthClientProvider(
        server_url=f"{oauth.base}/alpha/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="SDK client",
            redirect_uris=[AnyUrl(CALLBACK)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=10) as http:
        response = await http.post(f"{oauth.base}/alpha/mcp", json={})
    assert response.status_code == 200, response.text
    assert response.json()["aud"] == [f"{oauth.base}/alpha/mcp"]
    [url] = authorize_urls
    sent = query(url)
    assert sent["resource"] == f"{oauth.base}/alpha/mcp"
    assert sent["scope"] == "agent:alpha"
    assert sent["code_challenge_method"] == "S256"
    assert storage.tokens is not None
    assert storage.tokens.refresh_token
    grants = await oauth.store.list_grants()
    assert [(g.agents, g.client_name) for g in grants] == [(("alpha",), "SDK client")]
