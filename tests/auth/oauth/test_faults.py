"""OAuth under faults and attack, against a real authorization server on loopback (issue 7 items 4, 7, 8).

Item 4: anonymous ``/oauth/authorize`` calls write nothing and are limited per client address.
Item 7: a refresh retried within ``security.refresh_reuse_grace_seconds`` (a lost response, or a
client racing its own refreshes) gets the successor already issued; later reuse revokes the grant.
Item 8: of simultaneous redemptions of one code exactly one succeeds and the grant is revoked.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy import func, select

from hivegate.storage.sql.oauth import SqlOAuthStore
from hivegate.storage.sql.oauth_tables import oauth_requests
from tests.auth.oauth.conftest import CALLBACK, Browser, OAuthServer, pkce, stored_rows

WAIT_SECONDS = 60
"""Bound on every burst of concurrent requests."""


async def _burst(count: int, call: Any) -> list[httpx.Response]:
    """``count`` concurrent calls of ``call()``; every response, within :data:`WAIT_SECONDS`."""
    responses: list[httpx.Response] = []

    async def one() -> None:
        responses.append(await call())

    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as group:
            for _ in range(count):
                group.start_soon(one)
    assert len(responses) == count
    return responses


async def _tokens(browser: Browser) -> tuple[str, dict[str, Any]]:
    """A registered client's id and its first token response (a grant for ``alpha``)."""
    client = await browser.register()
    verifier, challenge = pkce()
    code = await browser.code(client["client_id"], challenge, ["alpha"])
    response = await browser.exchange(client["client_id"], code, verifier)
    assert response.status_code == 200, response.text
    return client["client_id"], response.json()


# -- item 4: /oauth/authorize ------------------------------------------------------------------


def _authorize_params(client_id: str) -> dict[str, str]:
    return {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "code_challenge": pkce()[1],
        "code_challenge_method": "S256",
        "state": "s",
    }


@pytest.fixture
async def elsewhere(oauth: OAuthServer) -> AsyncGenerator[httpx.AsyncClient]:
    """A client connecting from another loopback address (127.0.0.2)."""
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(base_url=oauth.base, transport=transport, follow_redirects=False) as client:
        yield client


@pytest.mark.parametrize("oauth", ["sqlite"], indirect=True)
async def test_anonymous_authorize_calls_write_no_row_and_are_limited_per_address(
    oauth: OAuthServer, browser: Browser, elsewhere: httpx.AsyncClient
) -> None:
    """Issue 7 item 4: N anonymous authorize calls write 0 rows; past the per-address limit they get 429."""
    assert isinstance(oauth.store, SqlOAuthStore)
    client_id = (await browser.register())["client_id"]
    limit = oauth.settings.security.authorizations_per_minute

    admitted = await _burst(limit, lambda: browser.authorize(**_authorize_params(client_id)))

    assert [r.status_code for r in admitted] == [302] * limit
    assert all(r.headers["location"].startswith("/oauth/login?request=") for r in admitted)
    async with oauth.store.engine.connect() as conn:
        rows = (await conn.execute(select(func.count()).select_from(oauth_requests))).scalar_one()
    assert rows == 0
    refused = await browser.authorize(**_authorize_params(client_id))
    assert refused.status_code == 429
    assert 0 < int(refused.headers["retry-after"]) <= 60
    assert refused.headers["content-type"].startswith("text/html")
    assert "Too many authorization requests" in refused.text
    # another address is served meanwhile, and its sealed request still signs in
    other = await elsewhere.get("/oauth/authorize", params=_authorize_params(client_id))
    assert other.status_code == 302
    assert await stored_rows(oauth.store) == 0


async def test_a_signed_in_request_is_the_first_write(oauth: OAuthServer, browser: Browser) -> None:
    """Issue 7 item 4: the request is stored when the user signs in, and the flow completes."""
    client_id = (await browser.register())["client_id"]
    verifier, challenge = pkce()
    sealed = await browser.start(client_id, challenge)
    assert await oauth.store.purge_expired(datetime.now(UTC) + timedelta(days=1)) == 0  # nothing yet
    request_id = await browser.sign_in(sealed)
    stored = await oauth.store.get_request(request_id, datetime.now(UTC))
    assert stored is not None
    assert stored.code_challenge == challenge
    allowed = await browser.consent(request_id, ["alpha"])
    assert allowed.status_code == 303
    code = dict(httpx.URL(allowed.headers["location"]).params)["code"]
    assert (await browser.exchange(client_id, code, verifier)).status_code == 200


# -- item 8: simultaneous redemptions of one code -----------------------------------------------


@pytest.mark.parametrize("oauth", ["memory", "sqlite"], indirect=True)
@pytest.mark.parametrize("racers", [2, 20])
async def test_simultaneous_redemptions_one_succeeds_and_the_grant_is_revoked(
    oauth: OAuthServer, browser: Browser, racers: int
) -> None:
    """Issue 7 item 8, RFC 6749 §4.1.2: of simultaneous redemptions exactly one succeeds; the grant is revoked."""
    client = await browser.register()
    client_id = client["client_id"]
    verifier, challenge = pkce()
    code = await browser.code(client_id, challenge, ["alpha"])

    responses = await _burst(racers, lambda: browser.exchange(client_id, code, verifier))

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [400] * (racers - 1)
    assert {r.json()["error"] for r in responses if r.status_code == 400} == {"invalid_grant"}
    grants = await oauth.store.list_grants()
    assert len(grants) == 1
    assert not grants[0].active
    winner = next(r.json() for r in responses if r.status_code == 200)
    assert await oauth.server.provider.load_access_token(winner["access_token"]) is None
    refreshed = await browser.refresh(client_id, winner["refresh_token"])
    assert refreshed.status_code == 400
    assert refreshed.json()["error"] == "invalid_grant"


# -- item 7: refresh retries within the grace window --------------------------------------------


@pytest.mark.parametrize("oauth", ["memory", "sqlite"], indirect=True)
async def test_refresh_retried_within_the_grace_gets_the_successor_already_issued(
    oauth: OAuthServer, browser: Browser
) -> None:
    """Issue 7 item 7: a lost response retried within the grace returns the same refresh token, the family lives."""
    client_id, first = await _tokens(browser)
    rotated = await browser.refresh(client_id, first["refresh_token"])
    assert rotated.status_code == 200
    issued = rotated.json()

    retried = await browser.refresh(client_id, first["refresh_token"])  # the client never saw `issued`

    assert retried.status_code == 200, retried.text
    again = retried.json()
    assert again["refresh_token"] == issued["refresh_token"]
    assert again["access_token"] != issued["access_token"]  # a fresh access token of the same grant
    assert again["scope"] == issued["scope"]
    assert await oauth.server.provider.load_access_token(again["access_token"]) is not None
    assert await oauth.server.provider.load_access_token(issued["access_token"]) is not None
    onward = await browser.refresh(client_id, again["refresh_token"])
    assert onward.status_code == 200
    assert [g.active for g in await oauth.store.list_grants()] == [True]


@pytest.mark.parametrize("oauth", ["memory", "sqlite"], indirect=True)
async def test_a_client_racing_its_own_refreshes_stays_signed_in(oauth: OAuthServer, browser: Browser) -> None:
    """Issue 7 item 7: eight simultaneous refreshes of one token all get the one successor; the grant lives."""
    client_id, first = await _tokens(browser)

    responses = await _burst(8, lambda: browser.refresh(client_id, first["refresh_token"]))

    assert [r.status_code for r in responses] == [200] * 8, [r.text for r in responses]
    assert len({r.json()["refresh_token"] for r in responses}) == 1
    assert [g.active for g in await oauth.store.list_grants()] == [True]
    onward = await browser.refresh(client_id, responses[0].json()["refresh_token"])
    assert onward.status_code == 200


@pytest.mark.parametrize("oauth", ["memory", "sqlite"], indirect=True)
async def test_reuse_after_the_grace_revokes_the_family(oauth: OAuthServer, browser: Browser) -> None:
    """Issue 7 item 7, RFC 9700 §4.14.2: a rotated token presented after the grace window revokes its grant."""
    grace = oauth.settings.security.refresh_reuse_grace_seconds
    assert grace > 0
    offset = [timedelta(0)]
    oauth.server.provider.clock = lambda: datetime.now(UTC) + offset[0]
    client_id, first = await _tokens(browser)
    issued = (await browser.refresh(client_id, first["refresh_token"])).json()

    offset[0] = timedelta(seconds=grace + 1)
    late = await browser.refresh(client_id, first["refresh_token"])

    assert late.status_code == 400
    assert late.json()["error"] == "invalid_grant"
    assert [g.active for g in await oauth.store.list_grants()] == [False]
    dead = await browser.refresh(client_id, issued["refresh_token"])
    assert dead.json()["error"] == "invalid_grant"
    assert await oauth.server.provider.load_access_token(issued["access_token"]) is None


async def test_a_retry_by_another_client_is_refused_without_revoking(oauth: OAuthServer, browser: Browser) -> None:
    """The grace answers only the client the token was issued to (RFC 6749 §10.4: the binding is verified)."""
    client_id, first = await _tokens(browser)
    assert (await browser.refresh(client_id, first["refresh_token"])).status_code == 200
    thief = (await browser.register(client_name="Thief"))["client_id"]

    stolen = await browser.refresh(thief, first["refresh_token"])

    assert stolen.status_code == 400
    assert stolen.json()["error"] == "invalid_grant"
    assert [g.active for g in await oauth.store.list_grants()] == [True]


async def test_sign_ins_are_counted_in_the_per_address_limit(oauth: OAuthServer, browser: Browser) -> None:
    """Issue 7 item 4: each sign-in stores a request, so sign-ins count against the same per-address limit."""
    client_id = (await browser.register())["client_id"]
    sealed = await browser.start(client_id, pkce()[1])  # one admitted call
    limit = oauth.settings.security.authorizations_per_minute
    stored = {await browser.sign_in(sealed) for _ in range(limit - 1)}  # a sealed request may be signed in again
    assert len(stored) == limit - 1

    refused = await browser.login(sealed)

    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) > 0
    assert "Too many sign-ins" in refused.text
    assert await stored_rows(oauth.store) == limit - 1


async def test_a_request_too_large_to_carry_is_refused_at_authorize(browser: Browser) -> None:
    """A request that would not fit the sign-in link is refused up front (RFC 6749 §4.1.2.1), not stranded."""
    client_id = (await browser.register())["client_id"]
    scopes = " ".join(f"agent:a{n:05d}" for n in range(1500))  # every one well-formed; 19,500 characters

    response = await browser.authorize(**{**_authorize_params(client_id), "scope": scopes})

    assert response.status_code == 302
    location = response.headers["location"]
    assert location.startswith(f"{CALLBACK}?")
    params = dict(httpx.URL(location).params)
    assert params["error"] == "invalid_request"
    assert params["state"] == "s"
