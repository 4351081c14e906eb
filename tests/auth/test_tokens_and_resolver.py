"""Access-token codec and credential resolution, on the memory stores (the server-level matrix is in tests/e2e).

Spec: RFC 6750 §2 (one credential per request) and §3.1 (error codes); RFC 8725 §3.1 (accept
only the expected algorithm); RFC 9068 §2.1 (``typ: at+jwt``).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import anyio
import jwt
import pytest

from hivegate.auth.api_keys import KeyKind, mint_key
from hivegate.auth.passwords import hash_password
from hivegate.auth.principal import CredentialKind
from hivegate.auth.resolver import CredentialResolver, presented_credential
from hivegate.auth.tokens import InvalidAccessToken, TokenCodec
from hivegate.errors import AuthenticationError
from hivegate.storage.credentials import ApiKey
from hivegate.storage.memory.credentials import MemoryCredentialStore
from hivegate.storage.memory.oauth import MemoryOAuthStore
from hivegate.storage.oauth import GrantRecord

ISSUER = "http://127.0.0.1:8094"
KEY = b"0123456789abcdef" * 4  # 64 bytes: long enough for the HS512 forgery attempt below
BAK = "bak_" + "a" * 64
OAG = "oag_" + "b" * 64


def _codec(ttl: int = 3600, key: bytes = KEY, issuer: str = ISSUER) -> TokenCodec:
    return TokenCodec(issuer, key, ttl)


def _mint(codec: TokenCodec) -> str:
    token, _ = codec.mint(
        subject="usr_1", audience=[f"{ISSUER}/alpha/mcp"], client_id="c1", scopes=["agent:alpha"], grant_id="grt_1"
    )
    return token


def test_token_round_trip() -> None:
    codec = _codec()
    token, claims = codec.mint(
        subject="usr_1", audience=[f"{ISSUER}/alpha/mcp"], client_id="c1", scopes=["agent:alpha"], grant_id="grt_1"
    )
    assert jwt.get_unverified_header(token) == {"alg": "HS256", "typ": "at+jwt"}
    verified = codec.verify(token)
    assert verified == claims
    assert verified.expires_at - verified.issued_at == 3600
    assert verified.audience == (f"{ISSUER}/alpha/mcp",)


@pytest.mark.parametrize(
    ("token_of", "reason"),
    [
        (lambda: _mint(_codec(ttl=-5)), "expired"),
        (lambda: _mint(_codec(key=b"another-key-another-key-another-key!")), "invalid"),
        (lambda: _mint(_codec(issuer="http://elsewhere.example")), "another issuer"),
        (lambda: "not-a-jwt", "invalid"),
        (lambda: "", "invalid"),
    ],
    ids=["expired", "forged", "wrong-issuer", "garbage", "empty"],
)
def test_bad_tokens_are_refused(token_of: Callable[[], str], reason: str) -> None:
    with pytest.raises(InvalidAccessToken, match=reason):
        _codec().verify(token_of())


def test_alg_none_other_algorithms_and_other_types_are_refused() -> None:
    now = int(time.time())
    claims: dict[str, object] = {
        "iss": ISSUER,
        "sub": "usr_1",
        "aud": [f"{ISSUER}/alpha/mcp"],
        "client_id": "c1",
        "scope": "agent:alpha",
        "iat": now,
        "exp": now + 60,
        "jti": "j",
        "gid": "grt_1",
    }

    def b64(data: Mapping[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    unsigned = f"{b64({'alg': 'none', 'typ': 'at+jwt'})}.{b64(claims)}."
    hs512 = jwt.encode(claims, KEY, algorithm="HS512", headers={"typ": "at+jwt"})
    id_token = jwt.encode(claims, KEY, algorithm="HS256", headers={"typ": "JWT"})
    missing_gid = jwt.encode({k: v for k, v in claims.items() if k != "gid"}, KEY, "HS256", headers={"typ": "at+jwt"})
    padded = _mint(_codec()) + "="  # one spelling per token: padding is not base64url (RFC 7515 §2)
    for token in (unsigned, hs512, id_token, missing_gid, padded):
        with pytest.raises(InvalidAccessToken):
            _codec().verify(token)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([], None),
        ([("authorization", f"Bearer {OAG}")], OAG),
        ([("authorization", f"bearer {OAG}")], OAG),  # the scheme is case-insensitive (RFC 9110 §11.1)
        ([("x-agent-api-key", BAK)], BAK),
        ([("authorization", f"Bearer {BAK}"), ("x-agent-api-key", BAK)], BAK),  # the same key twice is one
        ([("authorization", f"Bearer {OAG}"), ("authorization", f"Bearer {OAG}")], OAG),
    ],
)
def test_presented_credential(headers: list[tuple[str, str]], expected: str | None) -> None:
    assert presented_credential(headers) == expected


@pytest.mark.parametrize(
    "headers",
    [
        [("authorization", f"Bearer {OAG}"), ("x-agent-api-key", BAK)],
        [("authorization", f"Bearer {OAG}"), ("authorization", f"Bearer {BAK}")],
        [("authorization", f"Basic {OAG}")],
        [("authorization", "Bearer")],
        [("authorization", "Bearer a b")],
        [("x-agent-api-key", " ")],
        [("authorization", "Bearer " + "a" * 9000)],
        [("authorization", f"Bearer {OAG}\xa0")],
        [("x-agent-api-key", OAG)],
    ],
    ids=[
        "two-credentials",
        "repeated-different",
        "basic",
        "no-token",
        "space-in-token",
        "empty-key-header",
        "too-long",
        "nbsp-is-not-whitespace",
        "user-key-in-agent-key-header",
    ],
)
def test_malformed_or_ambiguous_headers_are_invalid_request(headers: list[tuple[str, str]]) -> None:
    with pytest.raises(AuthenticationError) as caught:
        presented_credential(headers)
    assert caught.value.oauth_error == "invalid_request"


async def test_resolver_keys_tokens_and_the_cache() -> None:
    credentials = MemoryCredentialStore()
    oauth = MemoryOAuthStore()
    alice = await credentials.create_user("alice", hash_password("pw"))
    user_key = mint_key(KeyKind.USER)
    stored = await credentials.create_api_key(
        user_id=alice.id, agent_id=None, name="", key_hash=user_key.digest, prefix=user_key.prefix
    )
    agent_key = mint_key(KeyKind.AGENT)
    await credentials.create_api_key(
        user_id=alice.id, agent_id="alpha", name="", key_hash=agent_key.digest, prefix=agent_key.prefix
    )
    await oauth.create_grant(
        GrantRecord(
            id="grt_1",
            user_id=alice.id,
            client_id="c1",
            client_name=None,
            agents=("alpha",),
            scopes=("agent:alpha",),
            resource=None,
            created_at=datetime.now(UTC),
        )
    )
    codec = _codec()
    token, _ = codec.mint(
        subject=alice.id, audience=[f"{ISSUER}/alpha/mcp"], client_id="c1", scopes=["agent:alpha"], grant_id="grt_1"
    )
    resolver = CredentialResolver(credentials=credentials, oauth=oauth, codec=codec, cache_seconds=60)
    uncached = CredentialResolver(credentials=credentials, oauth=oauth, codec=codec, cache_seconds=0)

    user = await resolver.resolve([("authorization", f"Bearer {user_key.plaintext}")])
    assert user is not None
    assert (user.kind, user.username, user.agents) == (CredentialKind.USER_KEY, "alice", None)
    agent = await resolver.resolve([("x-agent-api-key", agent_key.plaintext)])
    assert agent is not None
    assert (agent.kind, agent.agents) == (CredentialKind.AGENT_KEY, frozenset({"alpha"}))
    oauth_principal = await resolver.resolve([("authorization", f"Bearer {token}")])
    assert oauth_principal is not None
    assert oauth_principal.kind is CredentialKind.OAUTH
    assert oauth_principal.agents == frozenset({"alpha"})
    assert oauth_principal.audience == (f"{ISSUER}/alpha/mcp",)
    touched = await credentials.get_api_key_by_hash(user_key.digest)
    assert touched is not None
    assert touched.last_used_at is not None

    await credentials.revoke_api_key(stored.id)
    await oauth.revoke_grant("grt_1", datetime.now(UTC))
    # Within the cache time the resolver still trusts what it saw; without a cache, refusal is immediate.
    assert await resolver.resolve([("authorization", f"Bearer {user_key.plaintext}")]) == user
    for headers in ([("authorization", f"Bearer {user_key.plaintext}")], [("authorization", f"Bearer {token}")]):
        with pytest.raises(AuthenticationError) as caught:
            await uncached.resolve(headers)
        assert caught.value.oauth_error == "invalid_token"

    await credentials.set_user_disabled("alice", True)
    with pytest.raises(AuthenticationError, match="disabled"):
        await uncached.resolve([("x-agent-api-key", agent_key.plaintext)])
    for unknown in ("oag_" + "0" * 64, "bak_" + "0" * 64, "oag_short"):
        with pytest.raises(AuthenticationError) as caught:
            await uncached.resolve([("authorization", f"Bearer {unknown}")])
        assert caught.value.oauth_error == "invalid_token"


class _CountingStore(MemoryCredentialStore):
    """Counts key lookups; the first one waits until ``release`` is set (no sleeps)."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0
        self.release = anyio.Event()

    async def get_api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        self.lookups += 1
        await self.release.wait()
        return await super().get_api_key_by_hash(key_hash)


async def test_one_lookup_serves_concurrent_requests_for_one_credential() -> None:
    """When a cache entry expires under load, the database sees one lookup, not one per request."""
    credentials = _CountingStore()
    alice = await credentials.create_user("alice", hash_password("pw"))
    good = mint_key(KeyKind.USER)
    await credentials.create_api_key(user_id=alice.id, agent_id=None, name="", key_hash=good.digest, prefix=good.prefix)
    resolver = CredentialResolver(credentials=credentials, oauth=MemoryOAuthStore(), codec=_codec(), cache_seconds=60)
    results: list[str | None] = []
    errors: list[str | None] = []

    async def resolve(key: str) -> None:
        try:
            principal = await resolver.resolve([("authorization", f"Bearer {key}")])
            results.append(principal.username if principal else None)
        except AuthenticationError as exc:
            errors.append(exc.oauth_error)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(resolve, good.plaintext)
            for _ in range(5):
                tg.start_soon(resolve, "oag_" + "9" * 64)  # unknown: one lookup, five refusals
            await anyio.wait_all_tasks_blocked()
            credentials.release.set()
    assert results == ["alice"] * 20
    assert errors == ["invalid_token"] * 5
    assert credentials.lookups == 2
