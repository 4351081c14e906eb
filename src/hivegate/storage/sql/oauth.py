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

from sqlalchemy import Row, Table, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from hivegate.storage.oauth import (
    AuthorizationCodeRecord,
    AuthorizationRequestRecord,
    GrantRecord,
    OAuthClientRecord,
    OAuthStore,
    RefreshTokenRecord,
)
from hivegate.storage.sql.engine import SqlStore
from hivegate.storage.sql.oauth_tables import (
    oauth_clients,
    oauth_codes,
    oauth_grants,
    oauth_refresh_tokens,
    oauth_requests,
)

__all__ = ["SqlOAuthStore"]

_REQUEST_COLUMNS = (
    oauth_requests.c.id,
    oauth_requests.c.client_id,
    oauth_requests.c.redirect_uri,
    oauth_requests.c.redirect_uri_provided_explicitly,
    oauth_requests.c.state,
    oauth_requests.c.scopes,
    oauth_requests.c.code_challenge,
    oauth_requests.c.resource,
    oauth_requests.c.created_at,
    oauth_requests.c.expires_at,
    oauth_requests.c.user_id,
    oauth_requests.c.browser_binding,
)
_CODE_COLUMNS = (
    oauth_codes.c.code_hash,
    oauth_codes.c.client_id,
    oauth_codes.c.user_id,
    oauth_codes.c.redirect_uri,
    oauth_codes.c.redirect_uri_provided_explicitly,
    oauth_codes.c.code_challenge,
    oauth_codes.c.scopes,
    oauth_codes.c.agents,
    oauth_codes.c.resource,
    oauth_codes.c.expires_at,
    oauth_codes.c.redeemed_at,
    oauth_codes.c.grant_id,
)
_GRANT_COLUMNS = (
    oauth_grants.c.id,
    oauth_grants.c.user_id,
    oauth_grants.c.client_id,
    oauth_grants.c.client_name,
    oauth_grants.c.agents,
    oauth_grants.c.scopes,
    oauth_grants.c.resource,
    oauth_grants.c.created_at,
    oauth_grants.c.revoked_at,
)
_TOKEN_COLUMNS = (
    oauth_refresh_tokens.c.token_hash,
    oauth_refresh_tokens.c.grant_id,
    oauth_refresh_tokens.c.client_id,
    oauth_refresh_tokens.c.user_id,
    oauth_refresh_tokens.c.scopes,
    oauth_refresh_tokens.c.resource,
    oauth_refresh_tokens.c.created_at,
    oauth_refresh_tokens.c.expires_at,
    oauth_refresh_tokens.c.rotated_at,
)


class SqlOAuthStore(SqlStore, OAuthStore):
    """An :class:`OAuthStore` in a SQL database; the schema must already be migrated.

    Its :class:`~hivegate.storage.sql.engine.SqlDatabase` is shared with the other stores. Every
    method raises :class:`~hivegate.errors.StoreUnavailableError` when the database fails or does
    not answer within its limits (:class:`~hivegate.storage.sql.engine.SqlStore`); a failed
    write writes nothing. Saving a record whose key exists raises ``ValueError``.
    """

    async def save_client(self, client: OAuthClientRecord) -> None:
        """See :meth:`OAuthStore.save_client`."""
        _require_aware(client.created_at)
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
        _require_aware(request.created_at, request.expires_at)
        values = {
            "id": request.id,
            "client_id": request.client_id,
            "redirect_uri": request.redirect_uri,
            "redirect_uri_provided_explicitly": request.redirect_uri_provided_explicitly,
            "state": request.state,
            "scopes": request.scopes,
            "code_challenge": request.code_challenge,
            "resource": request.resource,
            "created_at": request.created_at,
            "expires_at": request.expires_at,
            "user_id": request.user_id,
            "browser_binding": request.browser_binding,
        }
        await self._insert(oauth_requests, values, "an authorization request with this id already exists")

    async def get_request(self, request_id: str, now: datetime) -> AuthorizationRequestRecord | None:
        """See :meth:`OAuthStore.get_request`; a request expires once ``now`` reaches ``expires_at``."""
        _require_aware(now)
        query = select(*_REQUEST_COLUMNS).where(oauth_requests.c.id == request_id, oauth_requests.c.expires_at > now)
        row = await self._first(query)
        return _request(row) if row is not None else None

    async def take_request(self, request_id: str) -> AuthorizationRequestRecord | None:
        """See :meth:`OAuthStore.take_request`; one ``DELETE ... RETURNING``, expired or not (the caller checks)."""
        query = delete(oauth_requests).where(oauth_requests.c.id == request_id).returning(*_REQUEST_COLUMNS)
        async with self._write_transaction() as conn:
            row = (await conn.execute(query)).first()
        return _request(row) if row is not None else None

    async def save_code(self, code: AuthorizationCodeRecord) -> None:
        """See :meth:`OAuthStore.save_code`; a duplicate digest raises ``ValueError``."""
        _require_aware(code.expires_at, code.redeemed_at)
        values = {
            "code_hash": code.code_hash,
            "client_id": code.client_id,
            "user_id": code.user_id,
            "redirect_uri": code.redirect_uri,
            "redirect_uri_provided_explicitly": code.redirect_uri_provided_explicitly,
            "code_challenge": code.code_challenge,
            "scopes": code.scopes,
            "agents": code.agents,
            "resource": code.resource,
            "expires_at": code.expires_at,
            "redeemed_at": code.redeemed_at,
            "grant_id": code.grant_id,
        }
        await self._insert(oauth_codes, values, "a code with this digest already exists")

    async def get_code(self, code_hash: str) -> AuthorizationCodeRecord | None:
        """See :meth:`OAuthStore.get_code`; an indexed lookup of the digest."""
        row = await self._first(select(*_CODE_COLUMNS).where(oauth_codes.c.code_hash == code_hash))
        return _code(row) if row is not None else None

    async def redeem_code(
        self, code_hash: str, grant: GrantRecord, refresh_token: RefreshTokenRecord | None, at: datetime
    ) -> bool:
        """See :meth:`OAuthStore.redeem_code`; ``UPDATE ... WHERE redeemed_at IS NULL``, then the inserts."""
        _require_aware(at, grant.created_at, grant.revoked_at)
        if refresh_token is not None:
            _require_aware(refresh_token.created_at, refresh_token.expires_at, refresh_token.rotated_at)
        claim = (
            update(oauth_codes)
            .where(oauth_codes.c.code_hash == code_hash, oauth_codes.c.redeemed_at.is_(None))
            .values(redeemed_at=at, grant_id=grant.id)
        )
        try:
            async with self._write_transaction() as conn:
                if (await conn.execute(claim)).rowcount == 1:
                    await conn.execute(insert(oauth_grants).values(_grant_values(grant)))
                    if refresh_token is not None:
                        await conn.execute(insert(oauth_refresh_tokens).values(_token_values(refresh_token)))
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
        _require_aware(grant.created_at, grant.revoked_at)
        await self._insert(oauth_grants, _grant_values(grant), f"a grant with id {grant.id!r} already exists")

    async def get_grant(self, grant_id: str) -> GrantRecord | None:
        """See :meth:`OAuthStore.get_grant`."""
        row = await self._first(select(*_GRANT_COLUMNS).where(oauth_grants.c.id == grant_id))
        return _grant(row) if row is not None else None

    async def list_grants(self, user_id: str | None = None) -> builtins.list[GrantRecord]:
        """See :meth:`OAuthStore.list_grants`."""
        query = select(*_GRANT_COLUMNS).order_by(oauth_grants.c.created_at, oauth_grants.c.id)
        if user_id is not None:
            query = query.where(oauth_grants.c.user_id == user_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_grant(row) for row in rows]

    async def revoke_grant(self, grant_id: str, at: datetime) -> GrantRecord | None:
        """See :meth:`OAuthStore.revoke_grant`; one transaction, the grant's refresh tokens get ``rotated_at``."""
        _require_aware(at)
        async with self._write_transaction() as conn:
            await _revoke(conn, grant_id, at)
            row = (await conn.execute(select(*_GRANT_COLUMNS).where(oauth_grants.c.id == grant_id))).first()
        return _grant(row) if row is not None else None

    async def save_refresh_token(self, token: RefreshTokenRecord) -> None:
        """See :meth:`OAuthStore.save_refresh_token`; a duplicate digest raises ``ValueError``."""
        _require_aware(token.created_at, token.expires_at, token.rotated_at)
        await self._insert(
            oauth_refresh_tokens, _token_values(token), "a refresh token with this digest already exists"
        )

    async def get_refresh_token(self, token_hash: str) -> RefreshTokenRecord | None:
        """See :meth:`OAuthStore.get_refresh_token`; an indexed lookup of the digest."""
        query = select(*_TOKEN_COLUMNS).where(oauth_refresh_tokens.c.token_hash == token_hash)
        row = await self._first(query)
        if row is None:
            return None
        return RefreshTokenRecord(
            row.token_hash,
            row.grant_id,
            row.client_id,
            row.user_id,
            row.scopes,
            row.resource,
            row.created_at,
            row.expires_at,
            row.rotated_at,
        )

    async def rotate_refresh_token(self, token_hash: str, successor: RefreshTokenRecord, at: datetime) -> bool:
        """See :meth:`OAuthStore.rotate_refresh_token`; ``UPDATE ... WHERE rotated_at IS NULL``, then the insert."""
        _require_aware(at, successor.created_at, successor.expires_at, successor.rotated_at)
        query = (
            update(oauth_refresh_tokens)
            .where(oauth_refresh_tokens.c.token_hash == token_hash, oauth_refresh_tokens.c.rotated_at.is_(None))
            .values(rotated_at=at)
        )
        try:
            async with self._write_transaction() as conn:
                if (await conn.execute(query)).rowcount != 1:
                    return False
                await conn.execute(insert(oauth_refresh_tokens).values(_token_values(successor)))
                return True
        except IntegrityError as exc:  # the successor's digest: rolled back, the token is not rotated
            raise ValueError("a refresh token with this digest already exists") from exc

    async def purge_expired(self, now: datetime) -> int:
        """See :meth:`OAuthStore.purge_expired`; removes what has ``expires_at <= now``, in one transaction."""
        _require_aware(now)
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


def _require_aware(*values: datetime | None) -> None:
    """Raise ``ValueError`` for a naive datetime among ``values`` (None is allowed)."""
    if any(value is not None and value.tzinfo is None for value in values):
        raise ValueError("the OAuth store needs aware datetimes")


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


def _grant_values(grant: GrantRecord) -> dict[str, Any]:
    return {
        "id": grant.id,
        "user_id": grant.user_id,
        "client_id": grant.client_id,
        "client_name": grant.client_name,
        "agents": grant.agents,
        "scopes": grant.scopes,
        "resource": grant.resource,
        "created_at": grant.created_at,
        "revoked_at": grant.revoked_at,
    }


def _token_values(token: RefreshTokenRecord) -> dict[str, Any]:
    return {
        "token_hash": token.token_hash,
        "grant_id": token.grant_id,
        "client_id": token.client_id,
        "user_id": token.user_id,
        "scopes": token.scopes,
        "resource": token.resource,
        "created_at": token.created_at,
        "expires_at": token.expires_at,
        "rotated_at": token.rotated_at,
    }


def _code(row: Row[*tuple[Any, ...]]) -> AuthorizationCodeRecord:
    return AuthorizationCodeRecord(
        code_hash=row.code_hash,
        client_id=row.client_id,
        user_id=row.user_id,
        redirect_uri=row.redirect_uri,
        redirect_uri_provided_explicitly=bool(row.redirect_uri_provided_explicitly),
        code_challenge=row.code_challenge,
        scopes=row.scopes,
        agents=row.agents,
        resource=row.resource,
        expires_at=row.expires_at,
        redeemed_at=row.redeemed_at,
        grant_id=row.grant_id,
    )


def _request(row: Row[*tuple[Any, ...]]) -> AuthorizationRequestRecord:
    return AuthorizationRequestRecord(
        id=row.id,
        client_id=row.client_id,
        redirect_uri=row.redirect_uri,
        redirect_uri_provided_explicitly=bool(row.redirect_uri_provided_explicitly),
        state=row.state,
        scopes=row.scopes,
        code_challenge=row.code_challenge,
        resource=row.resource,
        created_at=row.created_at,
        expires_at=row.expires_at,
        user_id=row.user_id,
        browser_binding=row.browser_binding,
    )


def _grant(row: Row[*tuple[Any, ...]]) -> GrantRecord:
    return GrantRecord(
        id=row.id,
        user_id=row.user_id,
        client_id=row.client_id,
        client_name=row.client_name,
        agents=row.agents,
        scopes=row.scopes,
        resource=row.resource,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )
