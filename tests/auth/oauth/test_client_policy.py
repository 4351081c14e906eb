"""What the authorization server accepts from clients: PKCE formats, redirect URIs as written, scopes.

Issue 7 items 9 (PKCE verifier and challenge format; loopback redirect matching without normalisation),
10 (the operator allow-list ``security.allowed_redirect_uris`` at registration and for client ID metadata
documents) and 11 (unknown scopes do not fail the flow; the granted scope is in the token response).
Against the real authorization server on loopback (``conftest.py``).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncGenerator

import pytest
import pytest_asyncio

from hivegate.storage import open_storage
from tests.auth.oauth.conftest import CALLBACK, Browser, OAuthServer, checkboxes, pkce, query, serve_oauth


async def _authorize(browser: Browser, client_id: str, redirect_uri: str, challenge: str, **extra: str):
    return await browser.authorize(
        response_type="code",
        client_id=client_id,
        redirect_uri=redirect_uri,
        code_challenge=challenge,
        code_challenge_method="S256",
        state="st-1",
        **extra,
    )


# -- item 9: PKCE ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "verifier",
    [
        "short",
        "a" * 42,
        "a" * 129,
        "a" * 42 + "+",
        "a" * 42 + "/",
        "a" * 42 + "=",
        "a" * 42 + " ",
        "a" * 42 + "\u00e9",
    ],
)
async def test_malformed_verifier_is_invalid_request_and_leaves_the_code(
    oauth: OAuthServer, browser: Browser, verifier: str
) -> None:
    """Issue 7 item 9: RFC 7636 §4.1 format → 400 invalid_request (RFC 6749 §5.2), and the code stays redeemable."""
    client = await browser.register()
    good, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    refused = await browser.exchange(client["client_id"], code, verifier)
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_request"
    assert "code_verifier" in refused.json()["error_description"]
    assert refused.headers["cache-control"] == "no-store"
    redeemed = await browser.exchange(client["client_id"], code, good)
    assert redeemed.status_code == 200, redeemed.text


async def test_well_formed_wrong_verifier_is_invalid_grant(oauth: OAuthServer, browser: Browser) -> None:
    """Issue 7 item 9: a verifier of the right format that does not hash to the challenge: invalid_grant (§4.6)."""
    client = await browser.register()
    _, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    other, _ = pkce()
    refused = await browser.exchange(client["client_id"], code, other)
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_grant"


async def test_two_verifiers_are_invalid_request(oauth: OAuthServer, browser: Browser) -> None:
    """Issue 7 item 9: a repeated ``code_verifier`` is ambiguous, so malformed."""
    client = await browser.register()
    good, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    form = [
        ("grant_type", "authorization_code"),
        ("client_id", client["client_id"]),
        ("code", code),
        ("redirect_uri", CALLBACK),
        ("code_verifier", good),
        ("code_verifier", good),
    ]
    refused = await browser.http.post(
        "/oauth/token",
        content="&".join(f"{k}={v}" for k, v in form),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_request"


async def test_challenge_no_verifier_can_match_is_refused(oauth: OAuthServer, browser: Browser) -> None:
    """Issue 7 item 9: 43 base64url characters whose last one is not canonical are no S256 value (RFC 7636 §4.2)."""
    client = await browser.register()
    real = base64.urlsafe_b64encode(hashlib.sha256(b"v" * 43).digest()).decode().rstrip("=")
    response = await _authorize(browser, client["client_id"], CALLBACK, real[:42] + "B")
    assert response.status_code == 302
    got = query(response.headers["location"])
    assert got["error"] == "invalid_request"
    assert "code_challenge" in got["error_description"]


# -- item 9: redirect URIs as written ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "requested",
    [
        "http://127.0.0.1:9/callback",
        "http://127.0.0.1:53682/callback",
        "http://127.0.0.1/callback",
    ],
)
async def test_loopback_redirect_matches_on_any_port(oauth: OAuthServer, browser: Browser, requested: str) -> None:
    """Issue 7 item 9: RFC 8252 §7.3: the port of a loopback redirect URI is free; the code comes back there."""
    client = await browser.register()
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"], redirect_uri=requested)
    redeemed = await browser.exchange(client["client_id"], code, verifier, redirect_uri=requested)
    assert redeemed.status_code == 200, redeemed.text


async def test_https_redirect_without_a_path(oauth: OAuthServer, browser: Browser) -> None:
    """Issue 7 item 9: exact matching still serves a redirect URI with an empty path (the SDK adds a ``/``)."""
    uri = "https://client.example.com"
    client = await browser.register(redirect_uris=[uri])
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"], redirect_uri=uri)
    redeemed = await browser.exchange(client["client_id"], code, verifier, redirect_uri=uri)
    assert redeemed.status_code == 200, redeemed.text
    refused = await _authorize(browser, client["client_id"], "https://client.example.com/x", challenge)
    assert refused.status_code == 400


@pytest.mark.parametrize(
    "requested",
    [
        "http://127.0.0.1:5555/x/../callback",
        "http://127.0.0.1:5555/./callback",
        "http://127.0.0.1:5555/%63allback",
        "http://127.0.0.1:5555/x/%2e%2e/callback",
        "http://0x7f.0.0.1:5555/callback",
        "http://127.1:5555/callback",
        "http://2130706433:5555/callback",
        "http://user@127.0.0.1:5555/callback",
        "http://127.0.0.1:5555@127.0.0.1:9/callback",
        "http://localhost:5555/callback",
        "http://LOCALHOST:5555/callback",
        "HTTP://127.0.0.1:5555/callback",
        "http://127.0.0.1:05555/callback",
        "http://127.0.0.1:5555/callback/",
        "http://127.0.0.1:5555/Callback",
        "http://127.0.0.1:5555/callback?x=1",
        "http://127.0.0.1:5555/callback#x",
        "https://127.0.0.1:5555/callback",
        "http://[::ffff:127.0.0.1]:5555/callback",
    ],
)
async def test_loopback_redirect_is_otherwise_exact(oauth: OAuthServer, browser: Browser, requested: str) -> None:
    """Issue 7 item 9: only the port may differ; no normalisation admits dot segments, escapes, spellings, userinfo.

    An unregistered redirect URI gets the error page, never a redirect (RFC 6749 §4.1.2.1).
    """
    client = await browser.register()
    _, challenge = pkce()
    response = await _authorize(browser, client["client_id"], requested, challenge)
    assert response.status_code == 400, (requested, response.headers.get("location"))
    assert "location" not in response.headers
    assert "redirect URI is not registered" in response.text


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("http://127.0.0.1:9/x/../callback", "'.' or '..' path segments"),
        ("http://127.0.0.1:9/%63allback", "percent-encodes"),
        ("http://0x7f.0.0.1:9/callback", "only on 127.0.0.1"),
        ("http://LOCALHOST:9/callback", "only on 127.0.0.1"),
        ("https://App.example.com/cb", "canonical form"),
    ],
)
async def test_registration_checks_redirect_uris_as_sent(
    oauth: OAuthServer, browser: Browser, uri: str, reason: str
) -> None:
    """Issue 7 item 9: registration judges the strings the client sent, not the SDK's normalised copies."""
    response = await browser.http.post(
        "/oauth/register", json={"redirect_uris": [uri], "token_endpoint_auth_method": "none"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "invalid_redirect_uri"
    assert reason in response.json()["error_description"]


# -- item 10: the operator allow-list --------------------------------------------------------------------

ALLOWED = ("https://app.example.com/*/callback", "http://127.0.0.1/callback")


@pytest_asyncio.fixture
async def allow_listed() -> AsyncGenerator[OAuthServer]:
    """The server with ``security.allowed_redirect_uris`` set to :data:`ALLOWED`."""
    storage = await open_storage("memory://")
    store = storage.oauth
    try:
        async for running in serve_oauth(store, allowed_redirect_uris=ALLOWED):
            yield running
    finally:
        await storage.close()


@pytest.mark.parametrize(
    ("uri", "status"),
    [
        ("https://app.example.com/tenant-1/callback", 201),
        ("http://127.0.0.1:9/callback", 201),
        ("http://127.0.0.1:61000/callback", 201),
        ("https://client.example.com/callback", 400),
        ("https://app.example.com/a/b/callback", 400),
        ("http://localhost:9/callback", 400),
        ("com.example.app:/callback", 400),
    ],
)
async def test_allow_list_at_registration(allow_listed: OAuthServer, uri: str, status: int) -> None:
    """Issue 7 item 10: with an allow-list, DCR accepts only matching redirect URIs (400 invalid_redirect_uri)."""
    browser = Browser(allow_listed.base)
    try:
        response = await browser.http.post(
            "/oauth/register", json={"redirect_uris": [uri], "token_endpoint_auth_method": "none"}
        )
    finally:
        await browser.aclose()
    assert response.status_code == status, response.text
    if status == 400:
        assert response.json()["error"] == "invalid_redirect_uri"
        assert "allowed_redirect_uris" in response.json()["error_description"]


async def test_allow_list_for_client_metadata_documents(oauth: OAuthServer) -> None:
    """Issue 7 item 10: a CIMD client whose redirect URI the allow-list refuses cannot authorize.

    The fixture's metadata document lists ``http://127.0.0.1:9/callback``: allowed by default, refused under
    an allow-list that does not match it.
    """
    storage = await open_storage("memory://")
    store = storage.oauth
    try:
        async for narrow in serve_oauth(store, allowed_redirect_uris=("https://app.example.com/cb",)):
            browser = Browser(narrow.base)
            try:
                _, challenge = pkce()
                refused = await _authorize(browser, f"{narrow.base}/clients/app.json", CALLBACK, challenge)
            finally:
                await browser.aclose()
            assert refused.status_code == 400
            assert "allowed_redirect_uris" in refused.text
    finally:
        await storage.close()
    browser = Browser(oauth.base)
    try:
        _, challenge = pkce()
        accepted = await _authorize(browser, f"{oauth.base}/clients/app.json", CALLBACK, challenge)
    finally:
        await browser.aclose()
    assert accepted.status_code == 302, accepted.text


# -- item 11: scopes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "resource", "ticked", "granted"),
    [
        ("openid email profile", "/mcp", {"alpha": True, "beta": True}, "agent:alpha agent:beta"),
        ("mcp", None, {"alpha": True, "beta": True}, "agent:alpha agent:beta"),
        ("openid agent:beta offline_access", "/beta/mcp", {"alpha": False, "beta": True}, "agent:beta"),
        ("profile", None, {"alpha": False, "beta": False}, "agent:beta"),
    ],
)
async def test_unknown_scopes_are_left_out_and_the_granted_scope_returned(
    oauth: OAuthServer,
    browser: Browser,
    scope: str,
    resource: str | None,
    ticked: dict[str, bool],
    granted: str,
) -> None:
    """Issue 7 item 11: mcp-remote asks for ``openid email profile``; the flow goes on (RFC 6749 §3.3).

    The consent page pre-ticks what the known scopes and the resource name; the token response's ``scope``
    is what the user granted.
    """
    client = await browser.register()
    verifier, challenge = pkce()
    extra = {"scope": scope} | ({"resource": f"{oauth.base}{resource}"} if resource else {})
    request_id = await browser.start(client["client_id"], challenge, **extra)
    request_id = await browser.sign_in(request_id)
    consent = await browser.consent_page(request_id)
    assert checkboxes(consent.text) == ticked
    agents = [agent for agent, on in ticked.items() if on] or ["beta"]
    allowed = await browser.consent(request_id, agents)
    assert allowed.status_code == 303, allowed.text
    code = query(allowed.headers["location"])["code"]
    token = await browser.exchange(
        client["client_id"], code, verifier, **({"resource": extra["resource"]} if resource else {})
    )
    assert token.status_code == 200, token.text
    assert token.json()["scope"] == granted
