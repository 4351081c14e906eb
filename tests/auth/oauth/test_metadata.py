"""Discovery documents: RFC 8414 authorization-server metadata and RFC 9728 protected-resource metadata.

Spec: RFC 8414 §2–3 (issuer identical to the one the URL was built from), RFC 9728 §2–3 (``resource``
equals the endpoint URL), MCP 2025-11-25 / 2026-07-28 authorization (S256 advertised,
``authorization_response_iss_parameter_supported``, CIMD, no ``offline_access``).
"""

from __future__ import annotations

from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata

from tests.auth.oauth.conftest import Browser, OAuthServer


async def test_authorization_server_metadata(oauth: OAuthServer, browser: Browser) -> None:
    response = await browser.http.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    body = response.json()
    base = oauth.base
    assert body["issuer"] == base  # byte-identical: no trailing slash
    assert body["authorization_endpoint"] == f"{base}/oauth/authorize"
    assert body["token_endpoint"] == f"{base}/oauth/token"
    assert body["registration_endpoint"] == f"{base}/oauth/register"
    assert body["revocation_endpoint"] == f"{base}/oauth/revoke"
    assert body["response_types_supported"] == ["code"]
    assert body["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert body["code_challenge_methods_supported"] == ["S256"]
    assert "none" in body["token_endpoint_auth_methods_supported"]
    assert "none" in body["revocation_endpoint_auth_methods_supported"]
    assert body["authorization_response_iss_parameter_supported"] is True
    assert body["client_id_metadata_document_supported"] is True
    assert "offline_access" not in body.get("scopes_supported", [])
    assert str(OAuthMetadata.model_validate(body).issuer) == base


async def test_metadata_allows_cross_origin_reads(browser: Browser) -> None:
    headers = {"Origin": "https://inspector.example"}
    response = await browser.http.get("/.well-known/oauth-authorization-server", headers=headers)
    assert response.headers["access-control-allow-origin"] == "*"
    preflight = await browser.http.options(
        "/.well-known/oauth-protected-resource/alpha/mcp",
        headers={**headers, "Access-Control-Request-Method": "GET"},
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "*"


async def test_protected_resource_metadata_per_agent(oauth: OAuthServer, browser: Browser) -> None:
    response = await browser.http.get("/.well-known/oauth-protected-resource/alpha/mcp")
    assert response.status_code == 200
    body = response.json()
    assert body["resource"] == f"{oauth.base}/alpha/mcp"
    assert body["authorization_servers"] == [oauth.base]
    assert body["scopes_supported"] == ["agent:alpha"]
    assert body["bearer_methods_supported"] == ["header"]
    assert body["resource_name"]
    assert str(ProtectedResourceMetadata.model_validate(body).resource) == f"{oauth.base}/alpha/mcp"


async def test_protected_resource_metadata_alias_and_user_level(oauth: OAuthServer, browser: Browser) -> None:
    """Issue 7 item 11: every document has ``scopes_supported``; ``/mcp``'s is ``["mcp"]`` (never offline_access)."""
    alias = (await browser.http.get("/.well-known/oauth-protected-resource/agents/alpha/mcp")).json()
    assert alias["resource"] == f"{oauth.base}/agents/alpha/mcp"
    assert alias["scopes_supported"] == ["agent:alpha"]
    user = (await browser.http.get("/.well-known/oauth-protected-resource/mcp")).json()
    assert user["resource"] == f"{oauth.base}/mcp"
    assert user["authorization_servers"] == [oauth.base]
    assert user["scopes_supported"] == ["mcp"]
    assert str(ProtectedResourceMetadata.model_validate(user).resource) == f"{oauth.base}/mcp"


async def test_protected_resource_metadata_does_not_reveal_which_agents_exist(
    oauth: OAuthServer, browser: Browser
) -> None:
    existing = (await browser.http.get("/.well-known/oauth-protected-resource/alpha/mcp")).json()
    missing = await browser.http.get("/.well-known/oauth-protected-resource/no-such-agent/mcp")
    assert missing.status_code == 200
    body = missing.json()
    assert body["resource"] == f"{oauth.base}/no-such-agent/mcp"
    assert set(body) == set(existing)
    assert body["resource_name"].replace("no-such-agent", "alpha") == existing["resource_name"]


async def test_protected_resource_metadata_invalid_agent_id_is_404(browser: Browser) -> None:
    for path in ("/.well-known/oauth-protected-resource/-bad/mcp", "/.well-known/oauth-protected-resource/a.b/mcp"):
        response = await browser.http.get(path)
        assert response.status_code == 404, path
    long_id = "a" * 65
    response = await browser.http.get(f"/.well-known/oauth-protected-resource/{long_id}/mcp")
    assert response.status_code == 404
