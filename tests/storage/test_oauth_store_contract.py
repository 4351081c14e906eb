"""The ``OAuthStore`` contract, run over every store (memory, SQLite, PostgreSQL), plus SQL-only checks."""

from __future__ import annotations

import itertools
import secrets
import sqlite3
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from alembic import command

from hivegate.auth.api_keys import key_digest
from hivegate.storage import open_storage
from hivegate.storage.memory.oauth import MemoryOAuthStore
from hivegate.storage.oauth import (
    AuthorizationCodeRecord,
    AuthorizationRequestRecord,
    GrantRecord,
    OAuthClientRecord,
    OAuthStore,
    RefreshTokenRecord,
)
from hivegate.storage.sql.migrate import alembic_config
from hivegate.storage.sql.oauth import SqlOAuthStore
from tests.storage.cleanup import clean_database
from tests.storage.conftest import ALL_BACKENDS, SQL_BACKENDS

WAIT_SECONDS = 30
"""Bound on every concurrent race (SQLite writers queue for the write lock)."""

RACERS = 8

T = TypeVar("T")

T0 = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
PLUS_TWO = timezone(timedelta(hours=2))


@pytest.fixture(params=ALL_BACKENDS)
def oauth_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for ``create_oauth_store`` on each backend.

    Synchronous on purpose: the session's PostgreSQL database (an async, session-loop
    fixture) is set up here, outside any test's event loop.
    """
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'missing-folder' / 'oauth.db'}"
    url = request.getfixturevalue("postgres_database_url")
    assert isinstance(url, str)
    return url


@pytest.fixture
async def clean_oauth_url(oauth_url: str) -> AsyncGenerator[str]:
    """``oauth_url`` with no tables yet (PostgreSQL: dropped before and after the test)."""
    async with clean_database(oauth_url):
        yield oauth_url


@pytest.fixture
async def oauth_store(clean_oauth_url: str) -> AsyncGenerator[OAuthStore]:
    """A fresh, empty OAuth store on each backend."""
    storage = await open_storage(clean_oauth_url)
    store = storage.oauth
    try:
        yield store
    finally:
        await storage.close()


def digest() -> str:
    return key_digest(secrets.token_urlsafe(32))


def request_record(
    request_id: str = "req_1", *, expires_at: datetime = T0 + timedelta(minutes=10)
) -> AuthorizationRequestRecord:
    return AuthorizationRequestRecord(
        id=request_id,
        client_id="client-1",
        redirect_uri="http://127.0.0.1:3000/callback",
        redirect_uri_provided_explicitly=True,
        state="xyzzy",
        scopes=("agent:notes", "agent:echo"),
        code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        resource="https://gateway.example/mcp/notes",
        created_at=T0,
        expires_at=expires_at,
    )


def code_record(code_hash: str, *, expires_at: datetime = T0 + timedelta(minutes=1)) -> AuthorizationCodeRecord:
    return AuthorizationCodeRecord(
        code_hash=code_hash,
        client_id="client-1",
        user_id="usr_alice",
        redirect_uri="http://127.0.0.1:3000/callback",
        redirect_uri_provided_explicitly=False,
        code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        scopes=("agent:notes",),
        agents=("notes",),
        resource=None,
        expires_at=expires_at,
    )


def grant_record(
    grant_id: str, *, user_id: str = "usr_alice", created_at: datetime = T0, client_name: str | None = "Claude"
) -> GrantRecord:
    return GrantRecord(
        id=grant_id,
        user_id=user_id,
        client_id="client-1",
        client_name=client_name,
        agents=("notes", "echo"),
        scopes=("agent:notes", "agent:echo"),
        resource="https://gateway.example/mcp",
        created_at=created_at,
    )


def token_record(
    token_hash: str, grant_id: str = "grt_1", *, expires_at: datetime = T0 + timedelta(days=30)
) -> RefreshTokenRecord:
    return RefreshTokenRecord(
        token_hash=token_hash,
        grant_id=grant_id,
        client_id="client-1",
        user_id="usr_alice",
        scopes=("agent:notes",),
        resource=None,
        created_at=T0,
        expires_at=expires_at,
    )


async def race(call: Callable[[], Awaitable[T]], n: int = RACERS) -> list[T]:
    """Run ``call`` ``n`` times concurrently; every result, within :data:`WAIT_SECONDS`."""
    results: list[T] = []

    async def one() -> None:
        results.append(await call())

    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as group:
            for _ in range(n):
                group.start_soon(one)
    assert len(results) == n
    return results


# --- clients ----------------------------------------------------------------------------------


async def test_empty_store(oauth_store: OAuthStore) -> None:
    await oauth_store.ping()
    assert await oauth_store.get_client("client-1") is None
    assert await oauth_store.get_request("req_1", T0) is None
    assert await oauth_store.take_request("req_1") is None
    assert await oauth_store.get_code(digest()) is None
    assert await oauth_store.redeem_code(digest(), grant_record("grt_1"), None, T0) is False
    assert await oauth_store.get_grant("grt_1") is None
    assert await oauth_store.list_grants() == []
    assert await oauth_store.revoke_grant("grt_1", T0) is None
    assert await oauth_store.get_refresh_token(digest()) is None
    assert await oauth_store.rotate_refresh_token(digest(), token_record(digest()), T0) is False
    assert await oauth_store.get_grant("grt_1") is None  # a failed redemption stored no grant
    assert await oauth_store.purge_expired(T0 + timedelta(days=365)) == 0


async def test_save_and_get_client(oauth_store: OAuthStore) -> None:
    metadata: dict[str, Any] = {
        "client_id": "client-1",
        "client_name": "Clåude ✓",
        "redirect_uris": ["http://127.0.0.1:3000/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "client_secret_post",
        "client_secret": "s3cret",
        "client_id_issued_at": 1796212800,
        "nested": {"flag": True, "none": None, "ratio": 0.5},
    }
    created = datetime(2026, 11, 30, 14, 0, 0, 5, tzinfo=PLUS_TWO)
    await oauth_store.save_client(OAuthClientRecord("client-1", metadata, created))
    metadata["client_name"] = "changed after saving"

    client = await oauth_store.get_client("client-1")
    assert client is not None
    assert client.client_id == "client-1"
    assert client.metadata["client_name"] == "Clåude ✓"
    assert client.metadata == {**metadata, "client_name": "Clåude ✓"}
    assert client.created_at == created
    assert client.created_at.utcoffset() == timedelta(0)
    client.metadata["client_name"] = "changed after reading"
    again = await oauth_store.get_client("client-1")
    assert again is not None
    assert again.metadata["client_name"] == "Clåude ✓"
    assert await oauth_store.get_client("client-2") is None


async def test_duplicate_client_id_refused(oauth_store: OAuthStore) -> None:
    await oauth_store.save_client(OAuthClientRecord("client-1", {"client_name": "first"}, T0))

    with pytest.raises(ValueError, match="client-1"):
        await oauth_store.save_client(OAuthClientRecord("client-1", {"client_name": "second"}, T0))
    client = await oauth_store.get_client("client-1")
    assert client is not None
    assert client.metadata == {"client_name": "first"}


# --- authorization requests -------------------------------------------------------------------


async def test_request_round_trip_and_expiry(oauth_store: OAuthStore) -> None:
    saved = request_record(expires_at=T0 + timedelta(minutes=10))
    await oauth_store.save_request(saved)

    assert await oauth_store.get_request("req_1", T0) == saved
    assert await oauth_store.get_request("req_1", T0 + timedelta(minutes=10) - timedelta(microseconds=1)) == saved
    assert await oauth_store.get_request("req_1", T0 + timedelta(minutes=10)) is None  # expired at expires_at
    assert await oauth_store.get_request("req_1", T0 + timedelta(hours=1)) is None
    assert await oauth_store.get_request("req_2", T0) is None


async def test_request_with_nulls_and_no_scopes(oauth_store: OAuthStore) -> None:
    plain = AuthorizationRequestRecord(
        id="req_plain",
        client_id="client-1",
        redirect_uri="http://localhost/cb",
        redirect_uri_provided_explicitly=False,
        state=None,
        scopes=(),
        code_challenge="c",
        resource=None,
        created_at=T0.astimezone(PLUS_TWO),
        expires_at=(T0 + timedelta(minutes=5)).astimezone(PLUS_TWO),
    )
    await oauth_store.save_request(plain)

    found = await oauth_store.get_request("req_plain", T0)
    assert found == plain
    assert found is not None
    assert (found.scopes, found.state, found.resource, found.user_id) == ((), None, None, None)
    assert found.expires_at.utcoffset() == timedelta(0)


async def test_signed_in_request_round_trip_then_taken_once(oauth_store: OAuthStore) -> None:
    binding = digest()
    saved = replace(request_record(), user_id="usr_alice", browser_binding=binding)
    await oauth_store.save_request(saved)

    found = await oauth_store.get_request("req_1", T0)
    assert found == saved
    assert found is not None
    assert (found.user_id, found.browser_binding) == ("usr_alice", binding)

    taken = await oauth_store.take_request("req_1")
    assert taken == saved
    assert await oauth_store.take_request("req_1") is None
    assert await oauth_store.get_request("req_1", T0) is None


async def test_take_request_returns_an_expired_request(oauth_store: OAuthStore) -> None:
    saved = request_record(expires_at=T0 - timedelta(seconds=1))
    await oauth_store.save_request(saved)

    assert await oauth_store.get_request("req_1", T0) is None
    assert await oauth_store.take_request("req_1") == saved  # the caller checks expires_at


async def test_duplicate_request_id_refused(oauth_store: OAuthStore) -> None:
    await oauth_store.save_request(request_record())

    with pytest.raises(ValueError, match="already exists"):
        await oauth_store.save_request(request_record(expires_at=T0 + timedelta(days=1)))
    found = await oauth_store.get_request("req_1", T0)
    assert found is not None
    assert found.expires_at == T0 + timedelta(minutes=10)


async def test_concurrent_take_request_gives_it_once(oauth_store: OAuthStore) -> None:
    saved = request_record()
    await oauth_store.save_request(saved)

    results = await race(lambda: oauth_store.take_request("req_1"))

    assert [r for r in results if r is not None] == [saved]
    assert results.count(None) == RACERS - 1


# --- authorization codes ----------------------------------------------------------------------


async def test_code_round_trip_and_redeem_once(oauth_store: OAuthStore) -> None:
    """Issue 7 item 8: a code is redeemed once, for its grant and first refresh token, in one transaction."""
    code_hash = digest()
    saved = code_record(code_hash)
    other = code_record(digest())
    await oauth_store.save_code(saved)
    await oauth_store.save_code(other)
    found = await oauth_store.get_code(code_hash)
    assert found == saved
    assert found is not None
    assert (found.scopes, found.agents, found.redirect_uri_provided_explicitly) == (("agent:notes",), ("notes",), False)
    assert (found.redeemed_at, found.grant_id) == (None, None)
    first_token = digest()
    at = T0 + timedelta(seconds=5)

    assert await oauth_store.redeem_code(code_hash, grant_record("grt_1"), token_record(first_token), at) is True

    redeemed = await oauth_store.get_code(code_hash)
    assert redeemed == replace(saved, redeemed_at=at, grant_id="grt_1")  # kept until it expires
    assert await oauth_store.get_grant("grt_1") == grant_record("grt_1")
    assert await oauth_store.get_refresh_token(first_token) == token_record(first_token)
    assert await oauth_store.get_code(other.code_hash) == other  # the other code was not touched


async def test_redeeming_a_redeemed_code_revokes_the_grant_it_produced(oauth_store: OAuthStore) -> None:
    """Issue 7 item 8, RFC 6749 §4.1.2: a second redemption fails, stores nothing, and revokes the first's grant."""
    code_hash = digest()
    await oauth_store.save_code(code_record(code_hash))
    first_token, second_token = digest(), digest()
    assert await oauth_store.redeem_code(code_hash, grant_record("grt_1"), token_record(first_token), T0) is True
    replay_at = T0 + timedelta(seconds=3)

    again = await oauth_store.redeem_code(
        code_hash, grant_record("grt_2"), token_record(second_token, "grt_2"), replay_at
    )

    assert again is False
    revoked = await oauth_store.get_grant("grt_1")
    assert revoked is not None
    assert revoked.revoked_at == replay_at
    spent = await oauth_store.get_refresh_token(first_token)
    assert spent is not None
    assert spent.rotated_at == replay_at
    assert await oauth_store.get_grant("grt_2") is None
    assert await oauth_store.get_refresh_token(second_token) is None
    code = await oauth_store.get_code(code_hash)
    assert code is not None
    assert code.grant_id == "grt_1"


async def test_redeem_without_refresh_token_and_an_expired_code(oauth_store: OAuthStore) -> None:
    saved = code_record(digest(), expires_at=(T0 - timedelta(days=1)).astimezone(PLUS_TWO))
    await oauth_store.save_code(saved)
    found = await oauth_store.get_code(saved.code_hash)
    assert found == saved
    assert found is not None
    assert found.expires_at.utcoffset() == timedelta(0)

    assert (
        await oauth_store.redeem_code(saved.code_hash, grant_record("grt_1"), None, T0) is True
    )  # caller checks expiry
    assert await oauth_store.get_grant("grt_1") == grant_record("grt_1")


async def test_failed_redemption_writes_nothing(oauth_store: OAuthStore) -> None:
    """A redemption whose grant id exists already is rolled back whole: the code stays unredeemed."""
    saved = code_record(digest())
    await oauth_store.save_code(saved)
    await oauth_store.create_grant(grant_record("grt_1", user_id="usr_bob"))
    token_hash = digest()

    with pytest.raises(ValueError, match="exists already"):
        await oauth_store.redeem_code(saved.code_hash, grant_record("grt_1"), token_record(token_hash), T0)

    assert await oauth_store.get_code(saved.code_hash) == saved
    assert await oauth_store.get_refresh_token(token_hash) is None
    assert await oauth_store.redeem_code(saved.code_hash, grant_record("grt_2"), None, T0) is True


async def test_duplicate_code_refused(oauth_store: OAuthStore) -> None:
    saved = code_record(digest())
    await oauth_store.save_code(saved)

    with pytest.raises(ValueError, match="already exists"):
        await oauth_store.save_code(code_record(saved.code_hash, expires_at=T0 + timedelta(days=1)))
    assert await oauth_store.get_code(saved.code_hash) == saved


@pytest.mark.parametrize("racers", [2, 20])
async def test_concurrent_redemptions_one_wins_and_its_grant_is_revoked(oauth_store: OAuthStore, racers: int) -> None:
    """Issue 7 item 8: of simultaneous redemptions of one code exactly one succeeds, and the grant is revoked."""
    saved = code_record(digest())
    await oauth_store.save_code(saved)
    ids = iter(f"grt_{n}" for n in range(racers))

    results = await race(lambda: oauth_store.redeem_code(saved.code_hash, grant_record(next(ids)), None, T0), n=racers)

    assert sorted(results) == [False] * (racers - 1) + [True]
    code = await oauth_store.get_code(saved.code_hash)
    assert code is not None
    assert code.grant_id is not None
    grants = await oauth_store.list_grants()
    assert [g.id for g in grants] == [code.grant_id]  # the losers stored nothing
    assert not grants[0].active  # revoked by the losers


# --- grants -----------------------------------------------------------------------------------


async def test_create_and_get_grant(oauth_store: OAuthStore) -> None:
    saved = grant_record("grt_1", client_name=None)
    await oauth_store.create_grant(saved)

    found = await oauth_store.get_grant("grt_1")
    assert found == saved
    assert found is not None
    assert found.active
    assert (found.agents, found.client_name, found.revoked_at) == (("notes", "echo"), None, None)
    assert await oauth_store.get_grant("grt_2") is None


async def test_duplicate_grant_refused(oauth_store: OAuthStore) -> None:
    await oauth_store.create_grant(grant_record("grt_1"))

    with pytest.raises(ValueError, match="grt_1"):
        await oauth_store.create_grant(grant_record("grt_1", user_id="usr_bob"))
    found = await oauth_store.get_grant("grt_1")
    assert found is not None
    assert found.user_id == "usr_alice"


async def test_list_grants_ordered_by_creation_then_id(oauth_store: OAuthStore) -> None:
    later = T0 + timedelta(minutes=1)
    for grant in (
        grant_record("grt_c", created_at=later),
        grant_record("grt_b", user_id="usr_bob", created_at=T0),
        grant_record("grt_z", created_at=T0 - timedelta(microseconds=1)),
        grant_record("grt_a", created_at=T0),
    ):
        await oauth_store.create_grant(grant)
    await oauth_store.revoke_grant("grt_a", later)

    assert [g.id for g in await oauth_store.list_grants()] == ["grt_z", "grt_a", "grt_b", "grt_c"]
    alice = await oauth_store.list_grants("usr_alice")
    assert [g.id for g in alice] == ["grt_z", "grt_a", "grt_c"]  # revoked included
    assert [g.active for g in alice] == [True, False, True]
    assert [g.id for g in await oauth_store.list_grants("usr_bob")] == ["grt_b"]
    assert await oauth_store.list_grants("usr_nobody") == []


async def test_revoke_grant_keeps_first_time_and_spends_its_tokens(oauth_store: OAuthStore) -> None:
    await oauth_store.create_grant(grant_record("grt_1"))
    await oauth_store.create_grant(grant_record("grt_2"))
    live, rotated, elsewhere = digest(), digest(), digest()
    await oauth_store.save_refresh_token(token_record(live, "grt_1"))
    await oauth_store.save_refresh_token(token_record(rotated, "grt_1"))
    await oauth_store.save_refresh_token(token_record(elsewhere, "grt_2"))
    rotated_at = T0 + timedelta(minutes=1)
    successor = digest()
    assert await oauth_store.rotate_refresh_token(rotated, token_record(successor, "grt_1"), rotated_at) is True
    revoked_at = datetime(2026, 11, 30, 15, 0, tzinfo=PLUS_TWO)  # 13:00 UTC

    revoked = await oauth_store.revoke_grant("grt_1", revoked_at)
    assert revoked is not None
    assert revoked.revoked_at == revoked_at
    assert revoked.revoked_at is not None
    assert revoked.revoked_at.utcoffset() == timedelta(0)
    assert not revoked.active
    assert revoked == replace(grant_record("grt_1"), revoked_at=revoked_at)

    again = await oauth_store.revoke_grant("grt_1", revoked_at + timedelta(hours=1))
    assert again == revoked  # the first revocation time is kept
    assert await oauth_store.get_grant("grt_1") == revoked

    spent = await oauth_store.get_refresh_token(live)
    assert spent is not None
    assert spent.rotated_at == revoked_at
    spent_successor = await oauth_store.get_refresh_token(successor)
    assert spent_successor is not None
    assert spent_successor.rotated_at == revoked_at
    assert (
        await oauth_store.rotate_refresh_token(live, token_record(digest()), revoked_at + timedelta(hours=2)) is False
    )
    earlier = await oauth_store.get_refresh_token(rotated)
    assert earlier is not None
    assert earlier.rotated_at == rotated_at  # an already-rotated token keeps its time

    untouched = await oauth_store.get_refresh_token(elsewhere)
    assert untouched == token_record(elsewhere, "grt_2")
    other_grant = await oauth_store.get_grant("grt_2")
    assert other_grant is not None
    assert other_grant.active
    assert await oauth_store.rotate_refresh_token(elsewhere, token_record(digest(), "grt_2"), revoked_at) is True


# --- refresh tokens ---------------------------------------------------------------------------


async def test_refresh_token_round_trip_and_rotation(oauth_store: OAuthStore) -> None:
    token_hash = digest()
    saved = token_record(token_hash)
    await oauth_store.save_refresh_token(saved)
    assert await oauth_store.get_refresh_token(token_hash) == saved

    at = datetime(2026, 12, 1, 1, 2, 3, 456789, tzinfo=PLUS_TWO)
    successor_hash = digest()
    successor = replace(token_record(successor_hash), created_at=at)
    assert await oauth_store.rotate_refresh_token(token_hash, successor, at) is True
    assert await oauth_store.get_refresh_token(successor_hash) == successor  # stored in the same transaction
    rotated = await oauth_store.get_refresh_token(token_hash)
    assert rotated is not None
    assert rotated.rotated_at == at
    assert rotated.rotated_at is not None
    assert rotated.rotated_at.utcoffset() == timedelta(0)
    assert (rotated.grant_id, rotated.scopes, rotated.expires_at) == ("grt_1", ("agent:notes",), saved.expires_at)

    later = token_record(digest())
    assert await oauth_store.rotate_refresh_token(token_hash, later, at + timedelta(seconds=1)) is False  # reuse
    assert await oauth_store.get_refresh_token(later.token_hash) is None  # nothing stored
    after_reuse = await oauth_store.get_refresh_token(token_hash)
    assert after_reuse is not None
    assert after_reuse.rotated_at == at
    assert await oauth_store.get_refresh_token(key_digest("not a stored token")) is None


async def test_duplicate_refresh_token_refused(oauth_store: OAuthStore) -> None:
    saved = token_record(digest())
    await oauth_store.save_refresh_token(saved)

    with pytest.raises(ValueError, match="already exists"):
        await oauth_store.save_refresh_token(token_record(saved.token_hash, "grt_other"))
    assert await oauth_store.get_refresh_token(saved.token_hash) == saved


async def test_rotation_with_an_existing_successor_writes_nothing(oauth_store: OAuthStore) -> None:
    """Issue 7 item 7: rotation is one transaction; when storing the successor fails, the token stays unrotated."""
    token_hash, taken = digest(), digest()
    await oauth_store.save_refresh_token(token_record(token_hash))
    await oauth_store.save_refresh_token(token_record(taken))

    with pytest.raises(ValueError, match="already exists"):
        await oauth_store.rotate_refresh_token(token_hash, token_record(taken, "grt_other"), T0)

    assert await oauth_store.get_refresh_token(token_hash) == token_record(token_hash)
    assert await oauth_store.get_refresh_token(taken) == token_record(taken)
    assert await oauth_store.rotate_refresh_token(token_hash, token_record(digest()), T0) is True


async def test_concurrent_rotation_succeeds_once(oauth_store: OAuthStore) -> None:
    token_hash = digest()
    await oauth_store.save_refresh_token(token_record(token_hash))
    successors = [digest() for _ in range(RACERS)]
    offered = iter(successors)

    results = await race(
        lambda: oauth_store.rotate_refresh_token(token_hash, token_record(next(offered)), T0 + timedelta(minutes=1))
    )

    assert sorted(results) == [False] * (RACERS - 1) + [True]
    stored = [h for h in successors if await oauth_store.get_refresh_token(h) is not None]
    assert len(stored) == 1  # only the winner's successor
    rotated = await oauth_store.get_refresh_token(token_hash)
    assert rotated is not None
    assert rotated.rotated_at == T0 + timedelta(minutes=1)


# --- purging and validation -------------------------------------------------------------------


async def test_purge_expired_removes_expired_requests_codes_and_tokens_only(oauth_store: OAuthStore) -> None:
    now = T0 + timedelta(hours=1)
    old, fresh = now - timedelta(seconds=1), now + timedelta(seconds=1)
    await oauth_store.save_request(request_record("req_old", expires_at=old))
    await oauth_store.save_request(request_record("req_edge", expires_at=now))  # expired at now
    await oauth_store.save_request(request_record("req_fresh", expires_at=fresh))
    old_code, fresh_code = code_record(digest(), expires_at=old), code_record(digest(), expires_at=fresh)
    await oauth_store.save_code(old_code)
    await oauth_store.save_code(fresh_code)
    old_token, fresh_token = digest(), digest()
    await oauth_store.save_refresh_token(token_record(old_token, expires_at=old))
    await oauth_store.save_refresh_token(token_record(fresh_token, expires_at=fresh))
    ancient = grant_record("grt_ancient", created_at=T0 - timedelta(days=400))
    await oauth_store.create_grant(ancient)
    await oauth_store.save_client(OAuthClientRecord("client-1", {}, T0 - timedelta(days=400)))

    assert await oauth_store.purge_expired(now) == 4  # two requests, a code, a token
    assert await oauth_store.purge_expired(now) == 0

    assert await oauth_store.take_request("req_old") is None
    assert await oauth_store.take_request("req_edge") is None
    assert await oauth_store.take_request("req_fresh") == request_record("req_fresh", expires_at=fresh)
    assert await oauth_store.get_code(old_code.code_hash) is None
    assert await oauth_store.get_code(fresh_code.code_hash) == fresh_code
    assert await oauth_store.get_refresh_token(old_token) is None
    assert await oauth_store.get_refresh_token(fresh_token) == token_record(fresh_token, expires_at=fresh)
    assert await oauth_store.get_grant("grt_ancient") == ancient
    assert await oauth_store.get_client("client-1") is not None


async def test_naive_datetimes_refused(oauth_store: OAuthStore) -> None:
    naive = datetime(2026, 11, 30, 12)  # naive on purpose
    token_hash = digest()
    await oauth_store.create_grant(grant_record("grt_1"))
    await oauth_store.save_refresh_token(token_record(token_hash))
    await oauth_store.save_request(request_record())

    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: oauth_store.save_client(OAuthClientRecord("client-1", {}, naive)),
        lambda: oauth_store.save_request(request_record("req_2", expires_at=naive)),
        lambda: oauth_store.get_request("req_1", naive),
        lambda: oauth_store.save_code(code_record(digest(), expires_at=naive)),
        lambda: oauth_store.create_grant(grant_record("grt_2", created_at=naive)),
        lambda: oauth_store.revoke_grant("grt_1", naive),
        lambda: oauth_store.save_refresh_token(token_record(digest(), expires_at=naive)),
        lambda: oauth_store.rotate_refresh_token(token_hash, token_record(digest()), naive),
        lambda: oauth_store.rotate_refresh_token(token_hash, token_record(digest(), expires_at=naive), T0),
        lambda: oauth_store.redeem_code(digest(), grant_record("grt_3"), None, naive),
        lambda: oauth_store.redeem_code(digest(), grant_record("grt_3", created_at=naive), None, T0),
        lambda: oauth_store.purge_expired(naive),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="aware"):
            await call()

    assert await oauth_store.get_client("client-1") is None
    assert await oauth_store.get_request("req_2", T0) is None
    assert [g.id for g in await oauth_store.list_grants()] == ["grt_1"]
    grant = await oauth_store.get_grant("grt_1")
    assert grant is not None
    assert grant.active
    assert await oauth_store.get_refresh_token(token_hash) == token_record(token_hash)
    assert await oauth_store.get_request("req_1", T0) == request_record()


# --- the SQL stores ---------------------------------------------------------------------------


@pytest.mark.parametrize("oauth_url", SQL_BACKENDS, indirect=True)
async def test_sql_store_persists_across_instances(clean_oauth_url: str) -> None:
    code = code_record(digest())
    token_hash = digest()
    storage = await open_storage(clean_oauth_url)
    first = storage.oauth
    try:
        assert isinstance(first, SqlOAuthStore)
        await first.save_client(OAuthClientRecord("client-1", {"client_name": "C"}, T0))
        await first.save_request(request_record())
        await first.save_code(code)
        await first.create_grant(grant_record("grt_1"))
        await first.save_refresh_token(token_record(token_hash))
    finally:
        await storage.close()
    storage = await open_storage(clean_oauth_url)
    second = storage.oauth
    try:
        assert await second.get_client("client-1") == OAuthClientRecord("client-1", {"client_name": "C"}, T0)
        assert await second.get_request("req_1", T0) == request_record()
        assert await second.get_code(code.code_hash) == code
        assert await second.get_grant("grt_1") == grant_record("grt_1")
        assert await second.get_refresh_token(token_hash) == token_record(token_hash)
    finally:
        await storage.close()


@pytest.mark.parametrize("oauth_url", SQL_BACKENDS, indirect=True)
async def test_single_use_holds_across_store_instances(clean_oauth_url: str) -> None:
    """Two stores on one database stand for two gateway replicas."""
    replicas_storage = [await open_storage(clean_oauth_url) for _ in range(2)]
    stores = [storage.oauth for storage in replicas_storage]
    try:
        code = code_record(digest())
        token_hash = digest()
        await stores[0].save_code(code)
        await stores[0].save_refresh_token(token_record(token_hash))
        replicas = itertools.cycle(stores)

        # Not grt_1, the refresh token's grant: the losers revoke the winner's grant and its tokens.
        ids = iter(f"grt_race_{n}" for n in range(RACERS))
        redeemed = await race(lambda: next(replicas).redeem_code(code.code_hash, grant_record(next(ids)), None, T0))
        assert redeemed.count(True) == 1
        grants = await stores[0].list_grants()
        assert len(grants) == 1
        assert not grants[0].active  # revoked by the losers, whichever replica they ran on
        rotated = await race(lambda: next(replicas).rotate_refresh_token(token_hash, token_record(digest()), T0))
        assert rotated.count(True) == 1
        assert rotated.count(False) == RACERS - 1
    finally:
        for storage in replicas_storage:
            await storage.close()


async def test_memory_url_gives_memory_store() -> None:
    storage = await open_storage("memory://")
    store = storage.oauth
    assert isinstance(store, MemoryOAuthStore)
    await storage.close()
    await storage.close()  # idempotent


def test_downgrade_drops_the_oauth_tables(tmp_path: Path) -> None:
    path = tmp_path / "db" / "registry.db"
    config = alembic_config(f"sqlite+aiosqlite:///{path}")
    oauth = {"oauth_clients", "oauth_codes", "oauth_grants", "oauth_refresh_tokens", "oauth_requests"}

    command.upgrade(config, "head")
    assert oauth <= _sqlite_tables(path)
    command.downgrade(config, "0004")
    assert oauth <= _sqlite_tables(path)  # 0005 only adds columns
    command.downgrade(config, "0002")
    assert _sqlite_tables(path).isdisjoint(oauth)
    assert {"users", "api_keys", "agents"} <= _sqlite_tables(path)
    command.upgrade(config, "head")
    assert oauth <= _sqlite_tables(path)


def _sqlite_tables(path: Path) -> set[str]:
    connection = sqlite3.connect(path)
    try:
        return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        connection.close()
