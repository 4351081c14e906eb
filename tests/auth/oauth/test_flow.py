"""The authorization-code flow end to end, by hand: DCR, authorize, sign-in, consent, token, refresh, revoke.

Spec: RFC 6749 §4.1 and §6, RFC 7591, RFC 7636 (S256), RFC 8707 (resource → audience),
RFC 9207 (``iss`` in the redirect), RFC 7009 (revocation, public clients), MCP authorization
2025-11-25 / 2026-07-28 (CIMD, refresh rotation for public clients).
"""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime

import httpx
import pytest

from hivegate.auth.oauth.pages import PAGE_HEADERS
from hivegate.auth.oauth.server import BROWSER_COOKIE
from tests.auth.oauth.conftest import CALLBACK, Browser, OAuthServer, checkboxes, hidden, parse_form, pkce, query
from tests.auth.oauth.conftest import text_of as text


def _assert_page_headers(response: httpx.Response) -> None:
    for name, value in PAGE_HEADERS.items():
        assert response.headers[name] == value, name
    csp = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp
    assert "default-src 'self'" in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["referrer-policy"] == "no-referrer"
    styles = re.findall(r"<style>(.*?)</style>", response.text, flags=re.S)
    assert len(styles) == 1
    digest = base64.b64encode(hashlib.sha256(styles[0].encode()).digest()).decode()
    assert f"'sha256-{digest}'" in csp  # the inline stylesheet as rendered is the one the CSP allows
    assert "<script" not in response.text


async def test_registration_echoes_metadata_for_a_public_native_client(browser: Browser) -> None:
    client = await browser.register(application_type="native", grant_types=["authorization_code", "refresh_token"])
    assert client["client_id"]
    assert client["redirect_uris"] == [CALLBACK]
    assert client["token_endpoint_auth_method"] == "none"
    assert client["application_type"] == "native"
    assert "client_secret" not in client


@pytest.mark.parametrize("oauth", ["memory", "sqlite"], indirect=True)
async def test_full_flow_with_agent_resource(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    client_id = client["client_id"]
    verifier, challenge = pkce()
    resource = f"{oauth.base}/alpha/mcp"

    # authorize → 302 to the sign-in page, carrying the request sealed: nothing is stored yet
    sealed = await browser.start(client_id, challenge, state="xyz", resource=resource, scope="agent:alpha")
    request_id = sealed

    # the sign-in page: the form the browser test relies on, the client's name and redirect host
    page = await browser.http.get("/oauth/login", params={"request": request_id})
    assert page.status_code == 200
    _assert_page_headers(page)
    form = parse_form(page.text)
    assert form.forms == [{"method": "post", "action": "/oauth/login"}]
    names = {(i.get("name"), i.get("type")) for i in form.inputs}
    assert {("username", "text"), ("password", "password"), ("request", "hidden"), ("csrf", "hidden")} <= names
    assert {"type": "submit"} in form.buttons
    assert "Sign in" in page.text
    assert "Test App" in text(page.text)
    assert "127.0.0.1:9" in text(page.text)
    assert hidden(page.text, "request") == request_id

    # sign in → cookie bound to the request, 303 to consent
    signed_in = await browser.http.post(
        "/oauth/login",
        data={
            "request": request_id,
            "csrf": hidden(page.text, "csrf"),
            "username": "alice",
            "password": "alice-password",
        },
    )
    assert signed_in.status_code == 303, signed_in.text
    assert signed_in.headers["location"].startswith("/oauth/consent?request=")
    request_id = query(signed_in.headers["location"])["request"]  # the request, stored now that alice signed in
    assert request_id != sealed
    cookie = signed_in.headers["set-cookie"]
    assert cookie.startswith(f"{BROWSER_COOKIE}=")
    assert "httponly" in cookie.lower()
    assert "samesite=lax" in cookie.lower()
    assert "path=/oauth" in cookie.lower()
    value = cookie.split(";", 1)[0].split("=", 1)[1]
    assert page.headers["set-cookie"].startswith(f"{BROWSER_COOKIE}={value};")  # the one set with the form
    pending = await oauth.store.get_request(request_id, datetime.now(UTC))
    assert pending is not None
    alice = await oauth.credentials.get_user_by_username("alice")
    assert alice is not None
    assert pending.user_id == alice.id
    assert (pending.state, pending.resource, pending.scopes, pending.code_challenge) == (
        "xyz",
        resource,
        ("agent:alpha",),
        challenge,
    )
    assert pending.browser_binding == hashlib.sha256(value.encode()).hexdigest()

    # consent: alice's MCP-enabled agents only, the asked-for one pre-checked
    consent = await browser.consent_page(request_id)
    assert consent.status_code == 200
    _assert_page_headers(consent)
    assert checkboxes(consent.text) == {"alpha": True, "beta": False}
    buttons = parse_form(consent.text).buttons
    assert {"type": "submit", "name": "action", "value": "allow"} in buttons
    assert {"type": "submit", "name": "action", "value": "deny"} in buttons
    assert hidden(consent.text, "request") == request_id

    allowed = await browser.consent(request_id, ["alpha", "beta"], csrf=hidden(consent.text, "csrf"))
    assert allowed.status_code == 303
    location = allowed.headers["location"]
    assert location.startswith(f"{CALLBACK}?")
    params = query(location)
    assert params["state"] == "xyz"
    assert params["iss"] == oauth.base
    assert len(params["code"]) >= 43  # ≥ 256 bits, base64url
    assert await oauth.store.get_request(request_id, datetime.now(UTC)) is None  # taken

    # token
    response = await browser.exchange(client_id, params["code"], verifier, resource=resource)
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    token = response.json()
    assert token["token_type"] == "Bearer"
    assert token["expires_in"] == 3600
    assert token["scope"] == "agent:alpha agent:beta"
    assert token["refresh_token"]
    claims = oauth.codec.verify(token["access_token"])
    assert claims.audience == (f"{oauth.base}/alpha/mcp", f"{oauth.base}/beta/mcp")
    assert claims.client_id == client_id
    assert claims.scopes == ("agent:alpha", "agent:beta")
    assert claims.expires_at - claims.issued_at == 3600
    alice = await oauth.credentials.get_user_by_username("alice")
    assert alice is not None
    assert claims.subject == alice.id
    grant = await oauth.store.get_grant(claims.grant_id)
    assert grant is not None
    assert grant.active
    assert grant.agents == ("alpha", "beta")
    assert grant.client_name == "Test App"
    assert grant.resource == resource
    assert await oauth.server.provider.load_access_token(token["access_token"]) is not None

    # refresh: rotated, new access token in the same grant
    refreshed = await browser.refresh(client_id, token["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    second = refreshed.json()
    assert second["refresh_token"] != token["refresh_token"]
    assert oauth.codec.verify(second["access_token"]).grant_id == claims.grant_id
    again = await browser.refresh(client_id, second["refresh_token"], scope="agent:beta")
    assert again.status_code == 200, again.text
    narrowed = again.json()
    assert narrowed["scope"] == "agent:beta"
    assert oauth.codec.verify(narrowed["access_token"]).audience == (f"{oauth.base}/beta/mcp",)

    # revoke (public client, no secret): the whole grant goes
    revoked = await browser.revoke(client_id=client_id, token=narrowed["refresh_token"])
    assert revoked.status_code == 200
    grant = await oauth.store.get_grant(claims.grant_id)
    assert grant is not None
    assert not grant.active
    assert await oauth.server.provider.load_access_token(token["access_token"]) is None
    after = await browser.refresh(client_id, narrowed["refresh_token"])
    assert after.status_code == 400
    assert after.json()["error"] == "invalid_grant"


async def test_user_level_resource_preselects_every_agent_and_joins_the_audience(
    oauth: OAuthServer, browser: Browser
) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    resource = f"{oauth.base}/mcp"
    request_id = await browser.start(client["client_id"], challenge, resource=resource)
    request_id = await browser.sign_in(request_id)
    consent = await browser.consent_page(request_id)
    assert checkboxes(consent.text) == {"alpha": True, "beta": True}
    response = await browser.consent(request_id, ["alpha", "beta"])
    code = query(response.headers["location"])["code"]
    token = await browser.exchange(client["client_id"], code, verifier, resource=resource)
    assert token.status_code == 200, token.text
    claims = oauth.codec.verify(token.json()["access_token"])
    assert claims.audience == (f"{oauth.base}/alpha/mcp", f"{oauth.base}/beta/mcp", f"{oauth.base}/mcp")


async def test_alias_resource_joins_the_audience(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    resource = f"{oauth.base}/agents/beta/mcp"
    code = await browser.code(client["client_id"], challenge, ["beta"], resource=resource)
    token = await browser.exchange(client["client_id"], code, verifier, resource=resource)
    assert token.status_code == 200, token.text
    claims = oauth.codec.verify(token.json()["access_token"])
    assert claims.audience == (f"{oauth.base}/beta/mcp", resource)
    refreshed = await browser.refresh(client["client_id"], token.json()["refresh_token"])
    assert oauth.codec.verify(refreshed.json()["access_token"]).audience == claims.audience


async def test_token_without_resource_gets_the_granted_agents(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["beta"])
    token = await browser.exchange(client["client_id"], code, verifier)
    assert token.status_code == 200, token.text
    assert oauth.codec.verify(token.json()["access_token"]).audience == (f"{oauth.base}/beta/mcp",)


async def test_scope_preselects_and_offline_access_is_ignored(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    _, challenge = pkce()
    request_id = await browser.start(client["client_id"], challenge, scope="agent:beta offline_access")
    request_id = await browser.sign_in(request_id)
    consent = await browser.consent_page(request_id)
    assert checkboxes(consent.text) == {"alpha": False, "beta": True}


async def test_deny_redirects_with_access_denied_state_and_iss(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    _, challenge = pkce()
    request_id = await browser.start(client["client_id"], challenge, state="s-deny")
    request_id = await browser.sign_in(request_id)
    response = await browser.consent(request_id, [], action="deny")
    assert response.status_code == 303
    params = query(response.headers["location"])
    assert params["error"] == "access_denied"
    assert params["state"] == "s-deny"
    assert params["iss"] == oauth.base
    assert "code" not in params
    assert await oauth.store.list_grants() == []


async def test_confidential_client_must_authenticate_at_token_and_revoke(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register(token_endpoint_auth_method="client_secret_post")
    secret = client["client_secret"]
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    no_secret = await browser.exchange(client["client_id"], code, verifier)
    assert no_secret.status_code == 401
    assert no_secret.json()["error"] == "invalid_client"
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    token = await browser.exchange(client["client_id"], code, verifier, client_secret=secret)
    assert token.status_code == 200, token.text
    refresh_token = token.json()["refresh_token"]
    refused = await browser.revoke(client_id=client["client_id"], token=refresh_token)
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_client"
    ok = await browser.revoke(client_id=client["client_id"], client_secret=secret, token=refresh_token)
    assert ok.status_code == 200
    assert [g.active for g in await oauth.store.list_grants()] == [False]


@pytest.mark.parametrize("oauth", ["memory", "sqlite"], indirect=True)
async def test_revoking_an_access_token_revokes_its_grant(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    token = (await browser.exchange(client["client_id"], code, verifier)).json()
    response = await browser.revoke(
        client_id=client["client_id"], token=token["access_token"], token_type_hint="access_token"
    )
    assert response.status_code == 200
    refreshed = await browser.refresh(client["client_id"], token["refresh_token"])
    assert refreshed.status_code == 400
    assert refreshed.json()["error"] == "invalid_grant"


async def test_revocation_of_unknown_or_foreign_tokens_answers_200_and_revokes_nothing(
    oauth: OAuthServer, browser: Browser
) -> None:
    owner = await browser.register()
    other = await browser.register(client_name="Other")
    verifier, challenge = pkce()
    code = await browser.code(owner["client_id"], challenge, ["alpha"])
    token = (await browser.exchange(owner["client_id"], code, verifier)).json()
    unknown = await browser.revoke(client_id=owner["client_id"], token="not-a-token")
    assert unknown.status_code == 200
    for presented in (token["refresh_token"], token["access_token"]):
        foreign = await browser.revoke(client_id=other["client_id"], token=presented)
        assert foreign.status_code == 200
    assert [g.active for g in await oauth.store.list_grants()] == [True]
    unknown_client = await browser.revoke(client_id="no-such-client", token=token["refresh_token"])
    assert unknown_client.status_code == 400
    assert unknown_client.json()["error"] == "invalid_client"
    missing = await browser.revoke(client_id=owner["client_id"])
    assert missing.status_code == 400
    assert missing.json()["error"] == "invalid_request"
    assert [g.active for g in await oauth.store.list_grants()] == [True]


async def test_client_identified_by_metadata_document(oauth: OAuthServer, browser: Browser) -> None:
    client_id = f"{oauth.base}/clients/app.json"
    verifier, challenge = pkce()
    request_id = await browser.start(client_id, challenge, resource=f"{oauth.base}/alpha/mcp")
    page = await browser.http.get("/oauth/login", params={"request": request_id})
    assert "Metadata App" in text(page.text)
    assert f"client identified by {client_id}" in text(page.text)
    assert "your own computer" in text(page.text)  # loopback redirect of a CIMD client: impersonation warning
    request_id = await browser.sign_in(request_id)
    response = await browser.consent(request_id, ["alpha"])
    code = query(response.headers["location"])["code"]
    token = await browser.exchange(client_id, code, verifier, resource=f"{oauth.base}/alpha/mcp")
    assert token.status_code == 200, token.text
    assert oauth.codec.verify(token.json()["access_token"]).client_id == client_id
    refreshed = await browser.refresh(client_id, token.json()["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    grants = await oauth.store.list_grants()
    assert [g.client_name for g in grants] == ["Metadata App"]


async def test_client_without_refresh_grant_gets_no_refresh_token(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register(grant_types=["authorization_code"])
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    token = await browser.exchange(client["client_id"], code, verifier)
    assert token.status_code == 200, token.text
    assert "refresh_token" not in token.json()


async def test_client_name_is_escaped_on_the_pages(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register(client_name='<script>alert("x")</script>')
    _, challenge = pkce()
    request_id = await browser.start(client["client_id"], challenge)
    page = await browser.http.get("/oauth/login", params={"request": request_id})
    assert "<script>" not in page.text
    assert "&lt;script&gt;" in page.text
    request_id = await browser.sign_in(request_id)
    consent = await browser.consent_page(request_id)
    assert "<script>" not in consent.text
    assert "Beta &lt;b&gt;" in consent.text  # agent names are escaped too
