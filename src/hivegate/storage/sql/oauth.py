"""``SqlOAuthStore``: OAuth clients, requests, codes, grants and refresh tokens in SQLite or PostgreSQL.

The schema is created by the Alembic migrations (``0003_oauth``);
:func:`hivegate.storage.open_storage` runs them first.

Everything single-use is decided by one conditional statement, so it holds across replicas
sharing the database: ``take_request`` is ``DELETE ... RETURNING`` (SQLite ≥ 3.35, PostgreSQL);
``redeem_code`` is ``UPDATE ... WHERE redeemed_at IS NULL`` and ``rotate_refresh_token``
``UPDATE ... WHERE rotated_at IS NULL``, each judged by its row count, with what the code or
token is exchanged for (grant, refresh token; successor token) inserted in the same
transaction. On PostgreSQL (READ COMMITTED) a second concurrent statement waits for the
first's row lock, then no longer matches, and its next statement sees what the first
committed; on SQLite every write transaction starts with ``BEGIN IMMEDIATE``, so writers run
one at a time.
"""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Any

from sqlalchemy import Table, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from hivegate.storage.oauth import (
    AuthorizationCodeRecord,
    AuthorizationRequestRecord,
    GrantRecord,
    OAuthClientRecord,
    OAuthStore,
    RefreshTokenRecord,
    require_aware,
)
from hivegate.storage.sql.engine import SqlStore
from hivegate.storage.sql.oauth_tables import (
    oauth_clients,
    oauth_codes,
    oauth_grants,
    oauth_refresh_tokens,
    oauth_requests,
)
from hivegate.storage.sql.tables import record_columns, record_values

__all__ = ["SqlOAuthStore"]

_REQUEST_COLUMNS = record_columns(oauth_requests, AuthorizationRequestRecord)
_CODE_COLUMNS = record_columns(oauth_codes, AuthorizationCodeRecord)
_GRANT_COLUMNS = record_columns(oauth_grants, GrantRecord)
_TOKEN_COLUMNS = record_columns(oauth_refresh_tokens, RefreshTokenRecord)


class SqlOAuthStore(SqlStore, OAuthStore):
    """An :class:`OAuthStore` in a SQL database; the schema must already be migrated.

    Its :class:`~hivegate.storage.sql.engine.SqlDatabase` is shared with the other stores. Every
    method raises :class:`~hivegate.errors.StoreUnavailableError` when the database fails or does
    not answer within its limits (:class:`~hivegate.storage.sql.engine.SqlStore`); a failed
    write writes nothing. Saving a record whose key exists raises ``ValueError``.
    """

    async def save_client(self, client: OAuthClientRecord) -> None:
        """See :meth:`OAuthStore.save_client`."""
        require_aware(client)
        values = {
            "client_id": client.client_id,
            "client_metadata": client.metadata,
            "created_at": client.created_at,
        }
        await self._insert(oauth_clients, values, f"a client with id {client.client_id!r} already exists")

    async def get_client(self, client_id: str) -> OAuthClientRecord | None:
        """See :meth:`OAuthStore.get_client`."""
        query = select(oauth_clients).where(oauth_clients.c.client_id == client_id)
        row = await self._first(query)
        return OAuthClientRecord(row.client_id, row.client_metadata, row.created_at) if row is not None else None

    async def save_request(self, request: AuthorizationRequestRecord) -> None:
        """See :meth:`OAuthStore.save_request`; a duplicate id raises ``ValueError``."""
        require_aware(request)
        await self._insert(
            oauth_requests, record_values(request), "an authorization request with this id already exists"
        )

    async def get_request(self, request_id: str, now: datetime) -> AuthorizationRequestRecord | None:
        """See :meth:`OAuthStore.get_request`; a request expires once ``now`` reaches ``expires_at``."""
        require_aware(now)
        query = select(*_REQUEST_COLUMNS).where(oauth_requests.c.id == request_id, oauth_requests.c.expires_at > now)
        row = await self._first(query)
        return AuthorizationRequestRecord(*row) if row is not None else None

    async def take_request(self, request_id: str) -> AuthorizationRequestRecord | None:
        """See :meth:`OAuthStore.take_request`; one ``DELETE ... RETURNING``, expired or not (the caller checks)."""
        query = delete(oauth_requests).where(oauth_requests.c.id == request_id).returning(*_REQUEST_COLUMNS)
        async with self._write_transaction() as conn:
            row = (await conn.execute(query)).first()
        return AuthorizationRequestRecord(*row) if row is not None else None

    async def save_code(self, code: AuthorizationCodeRecord) -> None:
        """See :meth:`OAuthStore.save_code`; a duplicate digest raises ``ValueError``."""
        require_aware(code)
        await self._insert(oauth_codes, record_values(code), "a code with this digest already exists")

    async def get_code(self, code_hash: str) -> AuthorizationCodeRecord | None:
        """See :meth:`OAuthStore.get_code`; an indexed lookup of the digest."""
        row = await self._first(select(*_CODE_COLUMNS).where(oauth_codes.c.code_hash == code_hash))
        return AuthorizationCodeRecord(*row) if row is not None else None

    async def redeem_code(
        self, code_hash: str, grant: GrantRecord, refresh_token: RefreshTokenRecord | None, at: datetime
    ) -> bool:
        """See :meth:`OAuthStore.redeem_code`; ``UPDATE ... WHERE redeemed_at IS NULL``, then the inserts."""
        require_aware(at, grant, refresh_token)
        claim = (
            update(oauth_codes)
            .where(oauth_codes.c.code_hash == code_hash, oauth_codes.c.redeemed_at.is_(None))
            .values(redeemed_at=at, grant_id=grant.id)
        )
        try:
            async with self._write_transaction() as conn:
                if (await conn.execute(claim)).rowcount == 1:
                    await conn.execute(insert(oauth_grants).values(record_values(grant)))
                    if refresh_token is not None:
                        await conn.execute(insert(oauth_refresh_tokens).values(record_values(refresh_token)))
                    return True
                query = select(oauth_codes.c.grant_id).where(oauth_codes.c.code_hash == code_hash)
                produced = (await conn.execute(query)).scalar_one_or_none()
                if produced is not None:
                    await _revoke(conn, produced, at)
                return False
        except IntegrityError as exc:  # a primary key (grant id, token digest): rolled back, nothing redeemed
            raise ValueError("the grant or refresh token exists already") from exc

    async def create_grant(self, grant: GrantRecord) -> None:
        """See :meth:`OAuthStore.create_grant`; a duplicate id raises ``ValueError``."""
        require_aware(grant)
        await self._insert(oauth_grants, record_values(grant), f"a grant with id {grant.id!r} already exists")

    async def get_grant(self, grant_id: str) -> GrantRecord | None:
        """See :meth:`OAuthStore.get_grant`."""
        row = await self._first(select(*_GRANT_COLUMNS).where(oauth_grants.c.id == grant_id))
        return GrantRecord(*row) if row is not None else None

    async def list_grants(self, user_id: str | None = None) -> builtins.list[GrantRecord]:
        """See :meth:`OAuthStore.list_grants`."""
        query = select(*_GRANT_COLUMNS).order_by(oauth_grants.c.created_at, oauth_grants.c.id)
        if user_id is not None:
            query = query.where(oauth_grants.c.user_id == user_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [GrantRecord(*row) for row in rows]

    async def revoke_grant(self, grant_id: str, at: datetime) -> GrantRecord | None:
        """See :meth:`OAuthStore.revoke_grant`; one transaction, the grant's refresh tokens get ``rotated_at``."""
        require_aware(at)
        async with self._write_transaction() as conn:
            await _revoke(conn, grant_id, at)
            row = (await conn.execute(select(*_GRANT_COLUMNS).where(oauth_grants.c.id == grant_id))).first()
        return GrantRecord(*row) if row is not None else None

    async def save_refresh_token(self, token: RefreshTokenRecord) -> None:
        """See :meth:`OAuthStore.save_refresh_token`; a duplicate digest raises ``ValueError``."""
        require_aware(token)
        await self._insert(
            oauth_refresh_tokens, record_values(token), "a refresh token with this digest already exists"
        )

    async def get_refresh_token(self, token_hash: str) -> RefreshTokenRecord | None:
        """See :meth:`OAuthStore.get_refresh_token`; an indexed lookup of the digest."""
        query = select(*_TOKEN_COLUMNS).where(oauth_refresh_tokens.c.token_hash == token_hash)
        row = await self._first(query)
        return RefreshTokenRecord(*row) if row is not None else None

    async def rotate_refresh_token(self, token_hash: str, successor: RefreshTokenRecord, at: datetime) -> bool:
        """See :meth:`OAuthStore.rotate_refresh_token`; ``UPDATE ... WHERE rotated_at IS NULL``, then the insert."""
        require_aware(at, successor)
        query = (
            update(oauth_refresh_tokens)
            .where(oauth_refresh_tokens.c.token_hash == token_hash, oauth_refresh_tokens.c.rotated_at.is_(None))
            .values(rotated_at=at)
        )
        try:
            async with self._write_transaction() as conn:
                if (await conn.execute(query)).rowcount != 1:
                    return False
                await conn.execute(insert(oauth_refresh_tokens).values(record_values(successor)))
                return True
        except IntegrityError as exc:  # the successor's digest: rolled back, the token is not rotated
            raise ValueError("a refresh token with this digest already exists") from exc

    async def purge_expired(self, now: datetime) -> int:
        """See :meth:`OAuthStore.purge_expired`; removes what has ``expires_at <= now``, in one transaction."""
        require_aware(now)
        removed = 0
        async with self._write_transaction() as conn:
            for table in (oauth_requests, oauth_codes, oauth_refresh_tokens):
                removed += (await conn.execute(delete(table).where(table.c.expires_at <= now))).rowcount
        return removed

    async def ping(self) -> None:
        """See :meth:`OAuthStore.ping`: ``SELECT 1``."""
        await self._select_one()

    async def _insert(self, table: Table, values: dict[str, Any], duplicate: str) -> None:
        """Insert one row; ``ValueError(duplicate)`` when its primary key exists."""
        try:
            async with self._write_transaction() as conn:
                await conn.execute(insert(table).values(values))
        except IntegrityError as exc:  # the primary key (the tables have no other constraint that can fail)
            raise ValueError(duplicate) from exc


async def _revoke(conn: AsyncConnection, grant_id: str, at: datetime) -> None:
    """Revoke the grant (keeping an earlier ``revoked_at``) and spend its refresh tokens, in ``conn``'s transaction."""
    await conn.execute(
        update(oauth_grants)
        .where(oauth_grants.c.id == grant_id, oauth_grants.c.revoked_at.is_(None))
        .values(revoked_at=at)
    )
    await conn.execute(
        update(oauth_refresh_tokens)
        .where(oauth_refresh_tokens.c.grant_id == grant_id, oauth_refresh_tokens.c.rotated_at.is_(None))
        .values(rotated_at=at)
    )
