"""Every refusal the issue lists, through the real server: each gets the spec's error and nothing is granted.

Spec: RFC 6749 §4.1.2.1 (no redirect to an unverified URI), §4.1.3 / §5.2 (``invalid_grant``,
``invalid_request``, ``invalid_client``), §10.5 (single-use codes), RFC 7636 §4.4.1 / §4.6 (PKCE),
RFC 7591 §3.2.2 (``invalid_redirect_uri``), RFC 8707 §2 (``invalid_target``), RFC 9207 §2 (``iss``
on error responses too), OAuth 2.1 §4.3.1 / RFC 9700 §4.14.2 (refresh-token reuse revokes the
family), OWASP (CSRF, login throttling, no user enumeration).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from hivegate.storage.oauth import AuthorizationCodeRecord, AuthorizationRequestRecord
from tests.auth.oauth.conftest import (
    CALLBACK,
    MAX_FAILURES,
    Browser,
    OAuthServer,
    checkboxes,
    hidden,
    pkce,
    query,
    stored_rows,
)
from tests.auth.oauth.conftest import text_of as text


async def _no_grants(oauth: OAuthServer) -> None:
    assert await oauth.store.list_grants() == []


# -- PKCE ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pkce_params",
    [
        {"code_challenge_method": "plain"},
        {"code_challenge": None},
        {"code_challenge": "too-short"},
    ],
    ids=["plain", "missing-challenge", "not-s256-shaped"],
)
async def test_pkce_downgrade_at_authorize_redirects_invalid_request_with_iss(
    oauth: OAuthServer, browser: Browser, pkce_params: dict[str, str | None]
) -> None:
    client = await browser.register()
    _, challenge = pkce()
    params: dict[str, str | None] = {
        "response_type": "code",
        "client_id": client["client_id"],
        "redirect_uri": CALLBACK,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "s1",
        **pkce_params,
    }
    response = await browser.authorize(**{k: v for k, v in params.items() if v is not None})
    assert response.status_code == 302
    location = response.headers["location"]
    assert location.startswith(f"{CALLBACK}?")
    got = query(location)
    assert got["error"] == "invalid_request"
    assert got["state"] == "s1"
    assert got["iss"] == oauth.base
    assert "code" not in got


async def test_missing_or_wrong_code_verifier_is_refused(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    missing = await browser.token(
        grant_type="authorization_code", client_id=client["client_id"], code=code, redirect_uri=CALLBACK
    )
    assert missing.status_code == 400
    assert missing.json()["error"] == "invalid_request"
    wrong = await browser.exchange(client["client_id"], code, pkce()[0])
    assert wrong.status_code == 400
    assert wrong.json()["error"] == "invalid_grant"
    await _no_grants(oauth)
    # a failed check spends nothing (else whoever intercepted a code could burn it for the client, RFC 7636 §1):
    # the right verifier still works, once
    late = await browser.exchange(client["client_id"], code, verifier)
    assert late.status_code == 200, late.text
    again = await browser.exchange(client["client_id"], code, verifier)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"


# -- redirect URIs and open redirects ----------------------------------------------------


async def test_redirect_uri_mismatch_at_authorize_shows_a_page_and_does_not_redirect(
    oauth: OAuthServer, browser: Browser
) -> None:
    client = await browser.register()
    _, challenge = pkce()
    for uri in ("https://evil.example/callback", f"{CALLBACK}/extra", "http://127.0.0.1:9/callback?x=1"):
        response = await browser.authorize(
            response_type="code",
            client_id=client["client_id"],
            redirect_uri=uri,
            code_challenge=challenge,
            code_challenge_method="S256",
            state="s",
        )
        assert response.status_code == 400, uri
        assert "location" not in response.headers
        assert response.headers["content-type"].startswith("text/html")
        assert response.headers["x-frame-options"] == "DENY"
        assert "not registered" in text(response.text)
    assert await oauth.store.list_grants() == []


async def test_loopback_redirect_uri_matches_on_any_port_only(oauth: OAuthServer, browser: Browser) -> None:
    """RFC 8252 §7.3: a loopback redirect URI may name any port at request time; nothing else may differ."""
    client = await browser.register(redirect_uris=[CALLBACK, "http://localhost:9/cb"])
    verifier, challenge = pkce()
    for other_port in ("http://127.0.0.1:53123/callback", "http://localhost:61000/cb"):
        code = await browser.code(client["client_id"], challenge, ["alpha"], redirect_uri=other_port)
        response = await browser.exchange(client["client_id"], code, verifier, redirect_uri=other_port)
        assert response.status_code == 200, response.text
    for refused in (
        "https://127.0.0.1:53123/callback",  # another scheme
        "http://127.0.0.1:53123/callback/x",  # another path
        "http://127.0.0.1:53123/callback?next=x",  # another query
        "http://localhost:61000/callback",  # a path registered for the other host
        "http://127.0.0.2:9/callback",  # another host
    ):
        response = await browser.authorize(
            response_type="code",
            client_id=client["client_id"],
            redirect_uri=refused,
            code_challenge=challenge,
            code_challenge_method="S256",
            state="s",
        )
        assert response.status_code == 400, refused
        assert "location" not in response.headers


async def test_unknown_client_gets_an_error_page_not_a_redirect(browser: Browser) -> None:
    _, challenge = pkce()
    for client_id in ("no-such-client", ""):
        response = await browser.authorize(
            response_type="code",
            client_id=client_id,
            redirect_uri="https://evil.example/steal",
            code_challenge=challenge,
            code_challenge_method="S256",
        )
        assert response.status_code == 400
        assert "location" not in response.headers
        assert "evil.example" not in response.text


async def test_unverifiable_metadata_document_client_gets_an_error_page(oauth: OAuthServer, browser: Browser) -> None:
    _, challenge = pkce()
    response = await browser.authorize(
        response_type="code",
        client_id=f"{oauth.base}/clients/missing.json",
        redirect_uri=CALLBACK,
        code_challenge=challenge,
        code_challenge_method="S256",
    )
    assert response.status_code == 400
    assert "location" not in response.headers
    assert "metadata document" in text(response.text)


async def test_client_with_several_redirect_uris_must_name_one(browser: Browser) -> None:
    client = await browser.register(redirect_uris=[CALLBACK, "http://localhost:9/cb"])
    _, challenge = pkce()
    response = await browser.authorize(
        response_type="code", client_id=client["client_id"], code_challenge=challenge, code_challenge_method="S256"
    )
    assert response.status_code == 400
    assert "location" not in response.headers


async def test_redirect_uri_mismatch_at_token_is_refused(oauth: OAuthServer, browser: Browser) -> None:
    other = "http://localhost:9/cb"
    client = await browser.register(redirect_uris=[CALLBACK, other])
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    response = await browser.exchange(client["client_id"], code, verifier, redirect_uri=other)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    await _no_grants(oauth)


@pytest.mark.parametrize(
    "uri",
    [
        "javascript:alert(1)",
        "http://evil.example/callback",
        "http://192.168.1.10/callback",
        "http://127.0.0.1.evil.example/cb",
        "data:text/html,hi",
        "https://app.example/cb#fragment",
    ],
)
async def test_registration_refuses_dangerous_redirect_uris(oauth: OAuthServer, browser: Browser, uri: str) -> None:
    response = await browser.http.post(
        "/oauth/register",
        json={"client_name": "Bad", "redirect_uris": [uri], "token_endpoint_auth_method": "none"},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")
    assert response.json()["error"] == "invalid_redirect_uri" or uri.startswith("data:")


async def test_registration_without_redirect_uris_is_refused(browser: Browser) -> None:
    for body in ({"client_name": "x"}, {"client_name": "x", "redirect_uris": []}, {"redirect_uris": None}):
        response = await browser.http.post("/oauth/register", json=body)
        assert response.status_code == 400, body
        assert response.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")


# -- codes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("oauth", ["memory", "sqlite"], indirect=True)
async def test_code_replay_is_refused_and_revokes_the_first_grant(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    first = await browser.exchange(client["client_id"], code, verifier)
    assert first.status_code == 200
    replay = await browser.exchange(client["client_id"], code, verifier)
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    grants = await oauth.store.list_grants()
    assert [g.active for g in grants] == [False]  # RFC 6749 §4.1.2: tokens from the code are revoked
    refreshed = await browser.refresh(client["client_id"], first.json()["refresh_token"])
    assert refreshed.json()["error"] == "invalid_grant"


async def test_code_of_another_client_is_refused(oauth: OAuthServer, browser: Browser) -> None:
    owner = await browser.register()
    thief = await browser.register(client_name="Thief")
    verifier, challenge = pkce()
    code = await browser.code(owner["client_id"], challenge, ["alpha"])
    response = await browser.exchange(thief["client_id"], code, verifier)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    await _no_grants(oauth)


async def test_expired_code_is_refused(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    code = "expired-code-" + "x" * 40
    await oauth.store.save_code(
        AuthorizationCodeRecord(
            code_hash=hashlib.sha256(code.encode()).hexdigest(),
            client_id=client["client_id"],
            user_id="usr_whatever",
            redirect_uri=CALLBACK,
            redirect_uri_provided_explicitly=True,
            code_challenge=challenge,
            scopes=("agent:alpha",),
            agents=("alpha",),
            resource=None,
            expires_at=datetime.now(UTC) - timedelta(seconds=1),
        )
    )
    response = await browser.exchange(client["client_id"], code, verifier)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    await _no_grants(oauth)


# -- resource indicators ------------------------------------------------------------------


async def test_foreign_resource_at_authorize_redirects_invalid_target(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    _, challenge = pkce()
    for resource in ("https://other.example/mcp", f"{oauth.base}/alpha/mcp/extra", f"{oauth.base}/-x/mcp"):
        response = await browser.authorize(
            response_type="code",
            client_id=client["client_id"],
            redirect_uri=CALLBACK,
            code_challenge=challenge,
            code_challenge_method="S256",
            state="s",
            resource=resource,
        )
        assert response.status_code == 302
        got = query(response.headers["location"])
        assert got["error"] == "invalid_target", resource
        assert got["iss"] == oauth.base


async def test_unknown_scope_is_left_out_not_refused(oauth: OAuthServer, browser: Browser) -> None:
    """Issue 7 item 11: an unknown scope does not fail the request (RFC 6749 §3.3); the flow goes on to sign-in."""
    client = await browser.register()
    _, challenge = pkce()
    response = await browser.authorize(
        response_type="code",
        client_id=client["client_id"],
        redirect_uri=CALLBACK,
        code_challenge=challenge,
        code_challenge_method="S256",
        scope="admin",
    )
    assert response.status_code == 302
    assert response.headers["location"].startswith("/oauth/login?request="), response.headers["location"]


@pytest.mark.parametrize(
    ("authorized", "requested"),
    [
        ("/alpha/mcp", "/beta/mcp"),  # differs from the authorization request's
        (None, "/bobs/mcp"),  # an agent outside the grant
        (None, "/agents/bobs/mcp"),
        (None, "https://other.example/mcp"),
    ],
)
async def test_token_resource_outside_the_grant_is_invalid_target(
    oauth: OAuthServer, browser: Browser, authorized: str | None, requested: str
) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    extra = {"resource": f"{oauth.base}{authorized}"} if authorized else {}
    code = await browser.code(client["client_id"], challenge, ["alpha", "beta"], **extra)
    target = requested if requested.startswith("https:") else f"{oauth.base}{requested}"
    response = await browser.exchange(client["client_id"], code, verifier, resource=target)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"
    await _no_grants(oauth)


async def test_refresh_with_another_resource_is_invalid_target(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    resource = f"{oauth.base}/alpha/mcp"
    code = await browser.code(client["client_id"], challenge, ["alpha", "beta"], resource=resource)
    token = (await browser.exchange(client["client_id"], code, verifier)).json()
    response = await browser.refresh(client["client_id"], token["refresh_token"], resource=f"{oauth.base}/beta/mcp")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"
    # the refusal did not use up the refresh token
    ok = await browser.refresh(client["client_id"], token["refresh_token"])
    assert ok.status_code == 200, ok.text


# -- refresh tokens -----------------------------------------------------------------------


@pytest.mark.parametrize("oauth", ["memory", "sqlite"], indirect=True)
async def test_refresh_token_reuse_revokes_the_whole_family(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    first = (await browser.exchange(client["client_id"], code, verifier)).json()
    second = (await browser.refresh(client["client_id"], first["refresh_token"])).json()
    third = (await browser.refresh(client["client_id"], second["refresh_token"])).json()
    # first's successor (second) has been used: presenting first again is reuse, not a retry, even within the grace
    reuse = await browser.refresh(client["client_id"], first["refresh_token"])
    assert reuse.status_code == 400
    assert reuse.json()["error"] == "invalid_grant"
    assert [g.active for g in await oauth.store.list_grants()] == [False]
    # the legitimate holder's newer token is dead too, and so are the access tokens
    newer = await browser.refresh(client["client_id"], third["refresh_token"])
    assert newer.json()["error"] == "invalid_grant"
    assert await oauth.server.provider.load_access_token(third["access_token"]) is None


async def test_refresh_token_of_another_client_is_refused(oauth: OAuthServer, browser: Browser) -> None:
    owner = await browser.register()
    thief = await browser.register(client_name="Thief")
    verifier, challenge = pkce()
    code = await browser.code(owner["client_id"], challenge, ["alpha"])
    token = (await browser.exchange(owner["client_id"], code, verifier)).json()
    response = await browser.refresh(thief["client_id"], token["refresh_token"])
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    assert [g.active for g in await oauth.store.list_grants()] == [True]


async def test_refresh_cannot_widen_scope(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    token = (await browser.exchange(client["client_id"], code, verifier)).json()
    response = await browser.refresh(client["client_id"], token["refresh_token"], scope="agent:alpha agent:beta")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_scope"


async def test_refresh_for_a_disabled_user_is_refused(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    token = (await browser.exchange(client["client_id"], code, verifier)).json()
    await oauth.credentials.set_user_disabled("alice", True)
    response = await browser.refresh(client["client_id"], token["refresh_token"])
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


# -- sign-in ------------------------------------------------------------------------------


async def _sign_in_page(browser: Browser) -> tuple[str, str]:
    client = await browser.register()
    _, challenge = pkce()
    request_id = await browser.start(client["client_id"], challenge)
    page = await browser.http.get("/oauth/login", params={"request": request_id})
    return request_id, hidden(page.text, "csrf")


@pytest.mark.parametrize(
    ("username", "password"),
    [("alice", "wrong"), ("nobody", "whatever"), ("carol", "carol-password")],
    ids=["wrong-password", "unknown-user", "disabled-user"],
)
async def test_failed_sign_in_is_generic(oauth: OAuthServer, browser: Browser, username: str, password: str) -> None:
    request_id, csrf = await _sign_in_page(browser)
    response = await browser.http.post(
        "/oauth/login", data={"request": request_id, "csrf": csrf, "username": username, "password": password}
    )
    assert response.status_code == 401
    assert "Invalid username or password" in response.text
    assert hidden(response.text, "request") == request_id
    assert await stored_rows(oauth.store) == 0  # nothing is stored before a sign-in succeeds


async def test_sign_in_is_throttled_per_username(oauth: OAuthServer, browser: Browser) -> None:
    request_id, csrf = await _sign_in_page(browser)
    for _ in range(MAX_FAILURES):
        response = await browser.http.post(
            "/oauth/login", data={"request": request_id, "csrf": csrf, "username": "alice", "password": "guess"}
        )
        assert response.status_code == 401
    # now even the right password is not tried
    blocked = await browser.http.post(
        "/oauth/login", data={"request": request_id, "csrf": csrf, "username": "ALICE", "password": "alice-password"}
    )
    assert blocked.status_code == 429
    assert int(blocked.headers["retry-after"]) > 0
    assert "Too many failed sign-in attempts" in text(blocked.text)
    assert await stored_rows(oauth.store) == 0  # nothing is stored before a sign-in succeeds


async def test_parallel_sign_ins_cannot_outrun_the_throttle(oauth: OAuthServer, browser: Browser) -> None:
    """Attempts are counted before the (slow) password check, so a burst gets at most MAX_FAILURES checks."""
    request_id, csrf = await _sign_in_page(browser)
    statuses: list[int] = []

    async def attempt(password: str) -> None:
        response = await browser.http.post(
            "/oauth/login", data={"request": request_id, "csrf": csrf, "username": "alice", "password": password}
        )
        statuses.append(response.status_code)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for index in range(MAX_FAILURES * 3):
                tg.start_soon(attempt, f"guess-{index}")
    assert len(statuses) == MAX_FAILURES * 3
    assert statuses.count(401) == MAX_FAILURES
    assert statuses.count(429) == MAX_FAILURES * 2


async def test_sign_in_is_throttled_per_client_address(oauth: OAuthServer, browser: Browser) -> None:
    request_id, csrf = await _sign_in_page(browser)
    for index in range(MAX_FAILURES):
        response = await browser.http.post(
            "/oauth/login",
            data={"request": request_id, "csrf": csrf, "username": f"user{index}", "password": "guess"},
        )
        assert response.status_code == 401
    blocked = await browser.http.post(
        "/oauth/login", data={"request": request_id, "csrf": csrf, "username": "bob", "password": "bob-password"}
    )
    assert blocked.status_code == 429
    assert "retry-after" in blocked.headers


async def test_sign_in_form_csrf_is_checked(oauth: OAuthServer, browser: Browser, other_browser: Browser) -> None:
    request_id, csrf = await _sign_in_page(browser)
    forged = await browser.http.post(
        "/oauth/login",
        data={"request": request_id, "csrf": "0" * 64, "username": "alice", "password": "alice-password"},
    )
    assert forged.status_code == 403
    # a valid token from one browser is useless in another (no cookie there)
    elsewhere = await other_browser.http.post(
        "/oauth/login", data={"request": request_id, "csrf": csrf, "username": "alice", "password": "alice-password"}
    )
    assert elsewhere.status_code == 403
    assert await stored_rows(oauth.store) == 0  # nothing is stored before a sign-in succeeds


async def test_expired_or_unknown_request_shows_an_error_page(oauth: OAuthServer, browser: Browser) -> None:
    client = await browser.register()
    now = datetime.now(UTC)
    sealed = oauth.server.provider.pending
    expired_sealed = sealed.seal(
        client_id=client["client_id"],
        redirect_uri=CALLBACK,
        redirect_uri_provided_explicitly=True,
        state="s",
        scopes=(),
        code_challenge=pkce()[1],
        resource=None,
        now=now - timedelta(seconds=oauth.settings.security.authorization_request_ttl_seconds),
    )
    live = await browser.start(client["client_id"], pkce()[1])
    forged = live[:-2] + ("AA" if not live.endswith("AA") else "BB")
    await oauth.store.save_request(
        AuthorizationRequestRecord(
            id="expired-request-id-0123456789",
            client_id=client["client_id"],
            redirect_uri=CALLBACK,
            redirect_uri_provided_explicitly=True,
            state="s",
            scopes=(),
            code_challenge=pkce()[1],
            resource=None,
            created_at=now - timedelta(seconds=700),
            expires_at=now - timedelta(seconds=100),
        )
    )
    for request_id in (
        "expired-request-id-0123456789",
        "unknown-request-id-0123456789",
        "<bad>",
        expired_sealed,
        forged,
    ):
        for path in ("/oauth/login", "/oauth/consent"):
            response = await browser.http.get(path, params={"request": request_id})
            assert response.status_code == 400, (path, request_id)
            assert "location" not in response.headers
            assert "expired" in text(response.text)


# -- consent ------------------------------------------------------------------------------


async def _signed_in_with(browser: Browser, username: str = "alice") -> tuple[dict[str, str], str, str, str]:
    """Register, authorize, sign in: the client, the stored request id, its consent CSRF token, the sealed request."""
    client = await browser.register()
    _, challenge = pkce()
    sealed = await browser.start(client["client_id"], challenge)
    request_id = await browser.sign_in(sealed, username)
    consent = await browser.consent_page(request_id)
    assert consent.status_code == 200
    return client, request_id, hidden(consent.text, "csrf"), sealed


async def _signed_in(browser: Browser, username: str = "alice") -> tuple[dict[str, str], str, str]:
    client, request_id, csrf, _ = await _signed_in_with(browser, username)
    return client, request_id, csrf


@pytest.mark.parametrize("oauth", ["memory", "sqlite"], indirect=True)
async def test_consent_csrf_is_checked(oauth: OAuthServer, browser: Browser) -> None:
    _, request_id, csrf = await _signed_in(browser)
    for forged in ("", "0" * 64, csrf[:-1] + ("0" if csrf[-1] != "0" else "1")):
        response = await browser.consent(request_id, ["alpha"], csrf=forged)
        assert response.status_code == 403
        assert "location" not in response.headers
    # the request is still pending and no code was issued
    pending = await oauth.store.get_request(request_id, datetime.now(UTC))
    assert pending is not None
    ok = await browser.consent(request_id, ["alpha"], csrf=csrf)
    assert ok.status_code == 303


async def test_consent_csrf_of_another_request_is_refused(browser: Browser) -> None:
    _, first_id, first_csrf = await _signed_in(browser)
    _, second_id, _ = await _signed_in(browser)
    response = await browser.consent(second_id, ["alpha"], csrf=first_csrf)
    assert response.status_code == 403
    assert first_id != second_id


async def test_consent_from_another_browser_is_refused(
    oauth: OAuthServer, browser: Browser, other_browser: Browser
) -> None:
    _, request_id, csrf, sealed = await _signed_in_with(browser)
    page = await other_browser.consent_page(request_id)
    assert page.status_code == 403
    response = await other_browser.consent(request_id, ["alpha"], csrf=csrf)
    assert response.status_code == 403
    # signing in to the same sealed request elsewhere stores a request of its own; alice's stays hers
    theirs = await other_browser.sign_in(sealed, "bob")
    assert theirs != request_id
    assert (await other_browser.consent(request_id, ["alpha"], csrf=csrf)).status_code == 403
    pending = await oauth.store.get_request(request_id, datetime.now(UTC))
    assert pending is not None
    alice = await oauth.credentials.get_user_by_username("alice")
    assert alice is not None
    assert pending.user_id == alice.id
    assert (await browser.consent(request_id, ["alpha"], csrf=csrf)).status_code == 303


async def test_consent_with_no_agent_is_refused(oauth: OAuthServer, browser: Browser) -> None:
    _, request_id, csrf = await _signed_in(browser)
    response = await browser.consent(request_id, [], csrf=csrf)
    assert response.status_code == 400
    assert "at least one agent" in text(response.text)
    assert checkboxes(response.text) == {"alpha": False, "beta": False}
    assert await oauth.store.get_request(request_id, datetime.now(UTC)) is not None


@pytest.mark.parametrize("agent", ["bobs", "hidden", "no-such-agent"], ids=["not-owned", "not-mcp", "unknown"])
async def test_consent_to_an_agent_not_the_users_is_refused(oauth: OAuthServer, browser: Browser, agent: str) -> None:
    _, request_id, csrf = await _signed_in(browser)
    response = await browser.consent(request_id, ["alpha", agent], csrf=csrf)
    assert response.status_code == 400
    assert "location" not in response.headers
    assert await oauth.store.get_request(request_id, datetime.now(UTC)) is not None
    await _no_grants(oauth)


async def test_consent_before_sign_in_goes_to_the_sign_in_page(browser: Browser) -> None:
    client = await browser.register()
    _, challenge = pkce()
    request_id = await browser.start(client["client_id"], challenge)
    response = await browser.consent_page(request_id)
    assert response.status_code == 303
    assert response.headers["location"] == f"/oauth/login?request={request_id}"


async def test_consent_cannot_be_submitted_twice(oauth: OAuthServer, browser: Browser) -> None:
    _, request_id, csrf = await _signed_in(browser)
    first = await browser.consent(request_id, ["alpha"], csrf=csrf)
    assert first.status_code == 303
    second = await browser.consent(request_id, ["alpha"], csrf=csrf)
    assert second.status_code == 400
    assert "location" not in second.headers


async def test_unknown_consent_action_is_refused(oauth: OAuthServer, browser: Browser) -> None:
    _, request_id, csrf = await _signed_in(browser)
    response = await browser.consent(request_id, ["alpha"], action="maybe", csrf=csrf)
    assert response.status_code == 400
    assert await oauth.store.get_request(request_id, datetime.now(UTC)) is not None


async def test_unreadable_forms_are_400_not_500(oauth: OAuthServer, browser: Browser) -> None:
    """RFC 6749 §5.2 ``invalid_request`` for bodies that are not a readable form."""
    multipart = await browser.http.post("/oauth/token", files={"f": ("x.txt", b"data")})
    no_boundary = await browser.http.post(
        "/oauth/login", content=b"a=1", headers={"Content-Type": "multipart/form-data"}
    )
    too_many_fields = await browser.http.post(
        "/oauth/revoke",
        content="&".join(f"a{i}=1" for i in range(2500)).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    for response in (multipart, no_boundary, too_many_fields):
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "invalid_request", (response.request.url, response.text)
    assert await oauth.store.list_grants() == []


async def test_loopback_redirect_uri_with_a_fragment_is_refused(browser: Browser) -> None:
    """RFC 6749 §3.1.2: the redirection endpoint URI MUST NOT include a fragment, on any port."""
    client = await browser.register()
    _, challenge = pkce()
    response = await browser.authorize(
        response_type="code",
        client_id=client["client_id"],
        redirect_uri=f"{CALLBACK}#frag",
        code_challenge=challenge,
        code_challenge_method="S256",
        state="s",
    )
    assert response.status_code == 400
    assert "location" not in response.headers


@pytest.mark.parametrize("name", ["x" * 201, "Claude\u202eedoc", "bell\x07", "new\nline"])
async def test_registration_refuses_client_names_that_could_mislead(browser: Browser, name: str) -> None:
    response = await browser.http.post(
        "/oauth/register",
        json={"client_name": name, "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none"},
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"


async def test_registration_is_limited_per_address(oauth: OAuthServer, browser: Browser) -> None:
    """RFC 7591 §5: open registration must not let one host fill the database (default 60 per hour)."""
    body = {"client_name": "Flood", "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none"}
    statuses = [(await browser.http.post("/oauth/register", json=body)).status_code for _ in range(61)]
    assert statuses[:60] == [201] * 60
    assert statuses[60] == 429
    limited = await browser.http.post("/oauth/register", json=body)
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) > 0
    assert limited.json()["error"] == "slow_down"
