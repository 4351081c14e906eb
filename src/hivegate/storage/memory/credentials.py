"""``MemoryCredentialStore``: users and API keys in process memory, for tests and ephemeral runs."""

from __future__ import annotations

import builtins
from dataclasses import replace
from datetime import UTC, datetime

from hivegate.auth.api_keys import find_digest
from hivegate.storage.credentials import (
    MAX_ACTIVE_AGENT_KEYS,
    ApiKey,
    CredentialStore,
    KeyLimitError,
    UnknownUserError,
    User,
    UsernameTakenError,
    new_id,
    require_key_shape,
    validate_username,
)

__all__ = ["MemoryCredentialStore"]


class MemoryCredentialStore(CredentialStore):
    """A :class:`CredentialStore` held in dicts; nothing survives the process.

    No method awaits, so each call is atomic on its event loop (the key limit needs no
    lock). Key lookups compare every stored digest in constant time. Not thread-safe.
    """

    def __init__(self) -> None:
        self._users: dict[str, User] = {}
        self._keys: dict[str, ApiKey] = {}
        self._key_ids_by_hash: dict[str, str] = {}

    async def create_user(self, username: str, password_hash: str) -> User:
        """See :meth:`CredentialStore.create_user`."""
        validate_username(username)
        if self._find_user(username) is not None:
            raise UsernameTakenError(f"username {username!r} is taken")
        user = User(new_id("usr"), username, password_hash, disabled=False, created_at=datetime.now(UTC))
        self._users[user.id] = user
        return user

    async def get_user(self, user_id: str) -> User | None:
        """See :meth:`CredentialStore.get_user`."""
        return self._users.get(user_id)

    async def get_user_by_username(self, username: str) -> User | None:
        """See :meth:`CredentialStore.get_user_by_username`."""
        return self._find_user(username)

    async def list_users(self) -> builtins.list[User]:
        """See :meth:`CredentialStore.list_users`."""
        return sorted(self._users.values(), key=lambda u: (u.username.lower(), u.id))

    async def set_user_disabled(self, username: str, disabled: bool) -> User | None:
        """See :meth:`CredentialStore.set_user_disabled`."""
        user = self._find_user(username)
        if user is None:
            return None
        self._users[user.id] = updated = replace(user, disabled=disabled)
        return updated

    async def set_password_hash(self, username: str, password_hash: str) -> User | None:
        """See :meth:`CredentialStore.set_password_hash`."""
        user = self._find_user(username)
        if user is None:
            return None
        self._users[user.id] = updated = replace(user, password_hash=password_hash)
        return updated

    async def create_api_key(
        self, *, user_id: str, agent_id: str | None, name: str, key_hash: str, prefix: str
    ) -> ApiKey:
        """See :meth:`CredentialStore.create_api_key`."""
        require_key_shape(agent_id, prefix)
        if user_id not in self._users:
            raise UnknownUserError(f"no user with id {user_id!r}")
        if key_hash in self._key_ids_by_hash:
            raise ValueError("a key with this digest already exists")
        if agent_id is not None:
            active = sum(1 for k in self._keys.values() if k.agent_id == agent_id and k.active)
            if active >= MAX_ACTIVE_AGENT_KEYS:
                raise KeyLimitError(f"agent {agent_id!r} already has {active} active keys")
        key = ApiKey(new_id("key"), prefix, user_id, agent_id, name, datetime.now(UTC), None, None)
        self._keys[key.id] = key
        self._key_ids_by_hash[key_hash] = key.id
        return key

    async def get_api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        """See :meth:`CredentialStore.get_api_key_by_hash`; compares every digest in constant time."""
        found = find_digest(key_hash, self._key_ids_by_hash)
        return self._keys[self._key_ids_by_hash[found]] if found is not None else None

    async def list_api_keys(self, user_id: str | None = None) -> builtins.list[ApiKey]:
        """See :meth:`CredentialStore.list_api_keys`."""
        keys = [k for k in self._keys.values() if user_id is None or k.user_id == user_id]
        return sorted(keys, key=lambda k: (k.created_at, k.id))

    async def revoke_api_key(self, key_id: str) -> ApiKey | None:
        """See :meth:`CredentialStore.revoke_api_key`."""
        key = self._keys.get(key_id)
        if key is None or not key.active:
            return key
        self._keys[key_id] = revoked = replace(key, revoked_at=datetime.now(UTC))
        return revoked

    async def touch_api_key(self, key_id: str, at: datetime) -> None:
        """See :meth:`CredentialStore.touch_api_key`."""
        if at.tzinfo is None:
            raise ValueError("touch_api_key needs an aware datetime")
        key = self._keys.get(key_id)
        if key is not None:
            self._keys[key_id] = replace(key, last_used_at=at.astimezone(UTC))

    async def ping(self) -> None:
        """See :meth:`CredentialStore.ping`; memory is always reachable."""

    def _find_user(self, username: str) -> User | None:
        wanted = username.lower()
        return next((u for u in self._users.values() if u.username.lower() == wanted), None)
