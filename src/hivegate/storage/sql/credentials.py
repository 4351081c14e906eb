"""``SqlCredentialStore``: users and API keys in SQLite (aiosqlite) or PostgreSQL (asyncpg) via SQLAlchemy 2 async.

The schema is created by the Alembic migrations (``hivegate.storage.sql.migrate``);
:func:`hivegate.storage.open_storage` runs them first.

Creating a ``bak_`` key counts the agent's active keys and inserts in one write
transaction that holds a lock for that agent (PostgreSQL: a transaction-scoped
advisory lock on the agent id; SQLite: ``BEGIN IMMEDIATE``), so concurrent creations
cannot exceed the limit.
"""

from __future__ import annotations

import builtins
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

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
from hivegate.storage.sql.credential_tables import api_keys, users
from hivegate.storage.sql.engine import SqlStore

__all__ = ["SqlCredentialStore"]

_AGENT_KEY_LOCK_NAMESPACE = int.from_bytes(b"bak_", signed=True)
"""First key of PostgreSQL's two-key advisory lock taken while creating an agent's key."""

_USER_COLUMNS = (users.c.id, users.c.username, users.c.password_hash, users.c.disabled, users.c.created_at)
_KEY_COLUMNS = (
    api_keys.c.id,
    api_keys.c.prefix,
    api_keys.c.user_id,
    api_keys.c.agent_id,
    api_keys.c.name,
    api_keys.c.created_at,
    api_keys.c.last_used_at,
    api_keys.c.revoked_at,
)


class SqlCredentialStore(SqlStore, CredentialStore):
    """A :class:`CredentialStore` in a SQL database; the schema must already be migrated.

    Its :class:`~hivegate.storage.sql.engine.SqlDatabase` is shared with the other stores. Every
    method raises :class:`~hivegate.errors.StoreUnavailableError` when the database fails or does
    not answer within its limits (:class:`~hivegate.storage.sql.engine.SqlStore`); a failed
    write writes nothing.
    """

    async def create_user(self, username: str, password_hash: str) -> User:
        """See :meth:`CredentialStore.create_user`."""
        validate_username(username)
        user = User(new_id("usr"), username, password_hash, disabled=False, created_at=datetime.now(UTC))
        values = {
            "id": user.id,
            "username": username,
            "username_key": username.lower(),
            "password_hash": password_hash,
            "disabled": False,
            "created_at": user.created_at,
        }
        try:
            async with self._write_transaction() as conn:
                await conn.execute(insert(users).values(values))
        except IntegrityError as exc:  # the unique index on username_key
            raise UsernameTakenError(f"username {username!r} is taken") from exc
        return user

    async def get_user(self, user_id: str) -> User | None:
        """See :meth:`CredentialStore.get_user`."""
        return await self._one_user(select(*_USER_COLUMNS).where(users.c.id == user_id))

    async def get_user_by_username(self, username: str) -> User | None:
        """See :meth:`CredentialStore.get_user_by_username`."""
        return await self._one_user(select(*_USER_COLUMNS).where(users.c.username_key == username.lower()))

    async def list_users(self) -> builtins.list[User]:
        """See :meth:`CredentialStore.list_users`."""
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select(*_USER_COLUMNS).order_by(users.c.username_key, users.c.id))).all()
        return [_user(row) for row in rows]

    async def set_user_disabled(self, username: str, disabled: bool) -> User | None:
        """See :meth:`CredentialStore.set_user_disabled`."""
        async with self._write_transaction() as conn:
            query = update(users).where(users.c.username_key == username.lower()).values(disabled=disabled)
            if (await conn.execute(query)).rowcount == 0:
                return None
        return await self.get_user_by_username(username)

    async def set_password_hash(self, username: str, password_hash: str) -> User | None:
        """See :meth:`CredentialStore.set_password_hash`."""
        async with self._write_transaction() as conn:
            query = update(users).where(users.c.username_key == username.lower()).values(password_hash=password_hash)
            if (await conn.execute(query)).rowcount == 0:
                return None
        return await self.get_user_by_username(username)

    async def create_api_key(
        self, *, user_id: str, agent_id: str | None, name: str, key_hash: str, prefix: str
    ) -> ApiKey:
        """See :meth:`CredentialStore.create_api_key`; one transaction, locked per agent."""
        require_key_shape(agent_id, prefix)
        key = ApiKey(new_id("key"), prefix, user_id, agent_id, name, datetime.now(UTC), None, None)
        async with self._write_transaction() as conn:
            if (await conn.execute(select(users.c.id).where(users.c.id == user_id))).first() is None:
                raise UnknownUserError(f"no user with id {user_id!r}")
            if agent_id is not None:
                await _require_free_slot(conn, agent_id)
            values = {
                "id": key.id,
                "key_hash": key_hash,
                "prefix": prefix,
                "user_id": user_id,
                "agent_id": agent_id,
                "name": name,
                "created_at": key.created_at,
            }
            await conn.execute(insert(api_keys).values(values))
        return key

    async def get_api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        """See :meth:`CredentialStore.get_api_key_by_hash`; an indexed lookup of the digest."""
        return await self._one_key(select(*_KEY_COLUMNS).where(api_keys.c.key_hash == key_hash))

    async def list_api_keys(self, user_id: str | None = None) -> builtins.list[ApiKey]:
        """See :meth:`CredentialStore.list_api_keys`."""
        query = select(*_KEY_COLUMNS).order_by(api_keys.c.created_at, api_keys.c.id)
        if user_id is not None:
            query = query.where(api_keys.c.user_id == user_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_api_key(row) for row in rows]

    async def revoke_api_key(self, key_id: str) -> ApiKey | None:
        """See :meth:`CredentialStore.revoke_api_key`."""
        async with self._write_transaction() as conn:
            query = (
                update(api_keys)
                .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=datetime.now(UTC))
            )
            await conn.execute(query)
        return await self._one_key(select(*_KEY_COLUMNS).where(api_keys.c.id == key_id))

    async def touch_api_key(self, key_id: str, at: datetime) -> None:
        """See :meth:`CredentialStore.touch_api_key`."""
        if at.tzinfo is None:
            raise ValueError("touch_api_key needs an aware datetime")
        async with self._engine.begin() as conn:
            await conn.execute(update(api_keys).where(api_keys.c.id == key_id).values(last_used_at=at))

    async def ping(self) -> None:
        """See :meth:`CredentialStore.ping`: ``SELECT 1``."""
        await self._select_one()

    async def _one_user(self, query: Any) -> User | None:
        row = await self._first(query)
        return _user(row) if row is not None else None

    async def _one_key(self, query: Any) -> ApiKey | None:
        row = await self._first(query)
        return _api_key(row) if row is not None else None


async def _require_free_slot(conn: AsyncConnection, agent_id: str) -> None:
    """Lock ``agent_id``'s keys for this transaction and check it has room for one more.

    Raises:
        KeyLimitError: when it already has :data:`MAX_ACTIVE_AGENT_KEYS` active keys.
    """
    if conn.dialect.name == "postgresql":
        lock = text("SELECT pg_advisory_xact_lock(:namespace, hashtext(:agent_id))")
        await conn.execute(lock, {"namespace": _AGENT_KEY_LOCK_NAMESPACE, "agent_id": agent_id})
    count = select(func.count()).where(api_keys.c.agent_id == agent_id, api_keys.c.revoked_at.is_(None))
    active = (await conn.execute(count)).scalar_one()
    if active >= MAX_ACTIVE_AGENT_KEYS:
        raise KeyLimitError(f"agent {agent_id!r} already has {active} active keys")


def _user(row: Row[*tuple[Any, ...]]) -> User:
    return User(row.id, row.username, row.password_hash, bool(row.disabled), row.created_at)


def _api_key(row: Row[*tuple[Any, ...]]) -> ApiKey:
    return ApiKey(
        row.id, row.prefix, row.user_id, row.agent_id, row.name, row.created_at, row.last_used_at, row.revoked_at
    )
