"""The ``CredentialStore`` contract, run over every store (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from hivegate.auth.api_keys import KeyKind, MintedKey, mint_key
from hivegate.storage import open_storage
from hivegate.storage.credentials import (
    MAX_ACTIVE_AGENT_KEYS,
    ApiKey,
    CredentialStore,
    KeyLimitError,
    UnknownUserError,
    User,
    UsernameTakenError,
)
from tests.storage.conftest import SQL_BACKENDS
from tests.storage.credential_fixtures import credential_backend_url, credential_store, credential_url

__all__ = ["credential_backend_url", "credential_store", "credential_url"]  # fixtures, imported for pytest

HASH = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA"


async def add_key(store: CredentialStore, user: User, agent_id: str | None = None, name: str = "") -> MintedKey:
    minted = mint_key(KeyKind.USER if agent_id is None else KeyKind.AGENT)
    await store.create_api_key(
        user_id=user.id, agent_id=agent_id, name=name, key_hash=minted.digest, prefix=minted.prefix
    )
    return minted


async def lookup(store: CredentialStore, minted: MintedKey) -> ApiKey:
    key = await store.get_api_key_by_hash(minted.digest)
    assert key is not None
    return key


# --- users ------------------------------------------------------------------------------------


async def test_empty_store(credential_store: CredentialStore) -> None:
    await credential_store.ping()
    assert await credential_store.list_users() == []
    assert await credential_store.list_api_keys() == []
    assert await credential_store.get_user_by_username("alice") is None


async def test_create_and_get_user(credential_store: CredentialStore) -> None:
    before = datetime.now(UTC)
    user = await credential_store.create_user("Alice.B-1_x", HASH)

    assert (user.username, user.password_hash, user.disabled) == ("Alice.B-1_x", HASH, False)
    assert user.created_at.tzinfo is not None
    assert before - timedelta(seconds=1) <= user.created_at <= datetime.now(UTC) + timedelta(seconds=1)
    assert await credential_store.get_user_by_username("Alice.B-1_x") == user
    assert await credential_store.get_user_by_username("alice.b-1_X") == user
    assert await credential_store.get_user(user.id) == user
    assert await credential_store.get_user("usr_missing") is None


async def test_list_users_ordered_ignoring_case(credential_store: CredentialStore) -> None:
    for name in ("carol", "Bob", "alice"):
        await credential_store.create_user(name, HASH)

    assert [u.username for u in await credential_store.list_users()] == ["alice", "Bob", "carol"]


async def test_duplicate_username_refused_ignoring_case(credential_store: CredentialStore) -> None:
    await credential_store.create_user("alice", HASH)

    with pytest.raises(UsernameTakenError):
        await credential_store.create_user("ALICE", HASH)
    assert len(await credential_store.list_users()) == 1


@pytest.mark.parametrize("username", ["", "a" * 65, "al ice", "alice!", "ålice", "a/b"])
async def test_invalid_username_refused(credential_store: CredentialStore, username: str) -> None:
    with pytest.raises(ValueError, match="invalid username"):
        await credential_store.create_user(username, HASH)
    assert await credential_store.list_users() == []


async def test_longest_username_accepted(credential_store: CredentialStore) -> None:
    user = await credential_store.create_user("a" * 64, HASH)
    assert await credential_store.get_user_by_username("A" * 64) == user


async def test_disable_and_enable(credential_store: CredentialStore) -> None:
    user = await credential_store.create_user("alice", HASH)

    disabled = await credential_store.set_user_disabled("ALICE", True)
    assert disabled is not None
    assert disabled.disabled
    assert disabled.id == user.id
    assert (await credential_store.get_user_by_username("alice")) == disabled
    enabled = await credential_store.set_user_disabled("alice", False)
    assert enabled is not None
    assert not enabled.disabled
    assert await credential_store.set_user_disabled("nobody", True) is None


async def test_set_password_hash(credential_store: CredentialStore) -> None:
    user = await credential_store.create_user("alice", HASH)
    changed = await credential_store.set_password_hash("ALICE", "$argon2id$v=19$m=65536,t=3,p=4$new$hash")
    assert changed is not None
    assert changed.id == user.id
    assert changed.password_hash == "$argon2id$v=19$m=65536,t=3,p=4$new$hash"
    assert (await credential_store.get_user("nobody-id")) is None
    assert (await credential_store.get_user_by_username("alice")) == changed
    assert await credential_store.set_password_hash("nobody", HASH) is None


# --- keys ---------------------------------------------------------------------------------------


async def test_user_key_create_and_lookup(credential_store: CredentialStore) -> None:
    alice = await credential_store.create_user("alice", HASH)
    minted = await add_key(credential_store, alice, name="laptop")

    key = await lookup(credential_store, minted)
    assert (key.user_id, key.agent_id, key.name, key.prefix) == (alice.id, None, "laptop", minted.plaintext[:12])
    assert key.prefix.startswith("oag_")
    assert key.active
    assert (key.last_used_at, key.revoked_at) == (None, None)
    assert key.created_at.tzinfo is not None
    assert await credential_store.get_api_key_by_hash(mint_key(KeyKind.USER).digest) is None
    assert await credential_store.get_api_key_by_hash(minted.plaintext) is None  # the key is not its digest


async def test_agent_key_bound_to_agent(credential_store: CredentialStore) -> None:
    alice = await credential_store.create_user("alice", HASH)
    minted = await add_key(credential_store, alice, agent_id="notes")

    key = await lookup(credential_store, minted)
    assert (key.agent_id, key.prefix[:4]) == ("notes", "bak_")


async def test_key_kind_must_match_agent(credential_store: CredentialStore) -> None:
    alice = await credential_store.create_user("alice", HASH)
    user_key, agent_key = mint_key(KeyKind.USER), mint_key(KeyKind.AGENT)

    with pytest.raises(ValueError, match="bak_"):
        await credential_store.create_api_key(
            user_id=alice.id, agent_id="notes", name="", key_hash=user_key.digest, prefix=user_key.prefix
        )
    with pytest.raises(ValueError, match="oag_"):
        await credential_store.create_api_key(
            user_id=alice.id, agent_id=None, name="", key_hash=agent_key.digest, prefix=agent_key.prefix
        )
    assert await credential_store.list_api_keys() == []


async def test_key_for_unknown_user_refused(credential_store: CredentialStore) -> None:
    minted = mint_key(KeyKind.USER)
    with pytest.raises(UnknownUserError):
        await credential_store.create_api_key(
            user_id="usr_missing", agent_id=None, name="", key_hash=minted.digest, prefix=minted.prefix
        )


async def test_list_keys_by_user(credential_store: CredentialStore) -> None:
    alice = await credential_store.create_user("alice", HASH)
    bob = await credential_store.create_user("bob", HASH)
    a1 = await add_key(credential_store, alice, name="one")
    b1 = await add_key(credential_store, bob, agent_id="notes")
    a2 = await add_key(credential_store, alice, name="two")

    everything = await credential_store.list_api_keys()
    assert {k.id for k in everything} == {(await lookup(credential_store, m)).id for m in (a1, b1, a2)}
    assert [k.name for k in await credential_store.list_api_keys(alice.id)] == ["one", "two"]
    assert [k.agent_id for k in await credential_store.list_api_keys(bob.id)] == ["notes"]
    assert await credential_store.list_api_keys("usr_missing") == []


async def test_revoke(credential_store: CredentialStore) -> None:
    alice = await credential_store.create_user("alice", HASH)
    minted = await add_key(credential_store, alice)
    key = await lookup(credential_store, minted)

    revoked = await credential_store.revoke_api_key(key.id)
    assert revoked is not None
    assert revoked.revoked_at is not None
    assert revoked.revoked_at.tzinfo is not None
    assert not revoked.active
    again = await credential_store.revoke_api_key(key.id)
    assert again == revoked  # the first revocation time is kept
    assert await lookup(credential_store, minted) == revoked  # still found, marked revoked
    assert await credential_store.revoke_api_key("key_missing") is None


async def test_touch_last_used(credential_store: CredentialStore) -> None:
    alice = await credential_store.create_user("alice", HASH)
    minted = await add_key(credential_store, alice)
    key = await lookup(credential_store, minted)
    at = datetime(2026, 11, 30, 12, 0, 5, tzinfo=timezone(timedelta(hours=2)))

    await credential_store.touch_api_key(key.id, at)
    used = await lookup(credential_store, minted)
    assert used.last_used_at == at
    assert used.last_used_at is not None
    assert used.last_used_at.utcoffset() == timedelta(0)
    await credential_store.touch_api_key("key_missing", at)
    with pytest.raises(ValueError, match="aware"):
        await credential_store.touch_api_key(key.id, datetime(2026, 11, 30))  # naive on purpose


async def test_agent_key_limit(credential_store: CredentialStore) -> None:
    alice = await credential_store.create_user("alice", HASH)
    minted = [await add_key(credential_store, alice, agent_id="notes") for _ in range(MAX_ACTIVE_AGENT_KEYS)]

    with pytest.raises(KeyLimitError):
        await add_key(credential_store, alice, agent_id="notes")
    await add_key(credential_store, alice, agent_id="other")  # the limit is per agent
    await add_key(credential_store, alice)  # and user keys do not count
    assert len(await credential_store.list_api_keys()) == MAX_ACTIVE_AGENT_KEYS + 2

    await credential_store.revoke_api_key((await lookup(credential_store, minted[0])).id)
    await add_key(credential_store, alice, agent_id="notes")  # a revoked key frees its slot
    with pytest.raises(KeyLimitError):
        await add_key(credential_store, alice, agent_id="notes")


@pytest.mark.parametrize("credential_backend_url", SQL_BACKENDS, indirect=True)
async def test_sql_store_persists_across_instances(credential_url: str) -> None:
    storage = await open_storage(credential_url)
    first = storage.credentials
    try:
        alice = await first.create_user("alice", HASH)
        minted = await add_key(first, alice, agent_id="notes")
    finally:
        await storage.close()
    storage = await open_storage(credential_url)
    second = storage.credentials
    try:
        assert await second.get_user_by_username("ALICE") == alice
        assert (await lookup(second, minted)).user_id == alice.id
    finally:
        await storage.close()
