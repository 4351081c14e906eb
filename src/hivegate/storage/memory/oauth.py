"""``MemoryOAuthStore``: OAuth clients, requests, codes, grants and refresh tokens in process memory."""

from __future__ import annotations

import builtins
import copy
from dataclasses import fields, replace
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from hivegate.auth.api_keys import find_digest
from hivegate.storage.oauth import (
    AuthorizationCodeRecord,
    AuthorizationRequestRecord,
    GrantRecord,
    OAuthClientRecord,
    OAuthStore,
    RefreshTokenRecord,
    require_aware,
)

__all__ = ["MemoryOAuthStore"]


class MemoryOAuthStore(OAuthStore):
    """An :class:`OAuthStore` held in dicts; nothing survives the process.

    No method awaits, so each call (``redeem_code``, ``rotate_refresh_token``, ...) is atomic on
    its event loop, and a failed one changes nothing. Code and refresh-token lookups compare
    every stored digest in constant time. Datetimes are kept in UTC, tuples as tuples, and
    client metadata as a private deep copy, so records read back as the SQL store returns them. Not thread-safe.
    """

    def __init__(self) -> None:
        self._clients: dict[str, OAuthClientRecord] = {}
        self._requests: dict[str, AuthorizationRequestRecord] = {}
        self._codes: dict[str, AuthorizationCodeRecord] = {}
        self._grants: dict[str, GrantRecord] = {}
        self._tokens: dict[str, RefreshTokenRecord] = {}

    async def save_client(self, client: OAuthClientRecord) -> None:
        """See :meth:`OAuthStore.save_client`."""
        require_aware(client)
        if client.client_id in self._clients:
            raise ValueError(f"a client with id {client.client_id!r} already exists")
        self._clients[client.client_id] = replace(
            client, metadata=copy.deepcopy(client.metadata), created_at=_utc(client.created_at)
        )

    async def get_client(self, client_id: str) -> OAuthClientRecord | None:
        """See :meth:`OAuthStore.get_client`."""
        client = self._clients.get(client_id)
        return replace(client, metadata=copy.deepcopy(client.metadata)) if client is not None else None

    async def save_request(self, request: AuthorizationRequestRecord) -> None:
        """See :meth:`OAuthStore.save_request`; a duplicate id raises ``ValueError``."""
        require_aware(request)
        if request.id in self._requests:
            raise ValueError("an authorization request with this id already exists")
        self._requests[request.id] = _as_stored(request)

    async def get_request(self, request_id: str, now: datetime) -> AuthorizationRequestRecord | None:
        """See :meth:`OAuthStore.get_request`; a request expires once ``now`` reaches ``expires_at``."""
        require_aware(now)
        request = self._requests.get(request_id)
        return request if request is not None and request.expires_at > now else None

    async def take_request(self, request_id: str) -> AuthorizationRequestRecord | None:
        """See :meth:`OAuthStore.take_request`; returns the request even when expired (the caller checks)."""
        return self._requests.pop(request_id, None)

    async def save_code(self, code: AuthorizationCodeRecord) -> None:
        """See :meth:`OAuthStore.save_code`; a duplicate digest raises ``ValueError``."""
        require_aware(code)
        if code.code_hash in self._codes:
            raise ValueError("a code with this digest already exists")
        self._codes[code.code_hash] = _as_stored(code)

    async def get_code(self, code_hash: str) -> AuthorizationCodeRecord | None:
        """See :meth:`OAuthStore.get_code`; compares every digest in constant time."""
        found = find_digest(code_hash, self._codes)
        return self._codes[found] if found is not None else None

    async def redeem_code(
        self, code_hash: str, grant: GrantRecord, refresh_token: RefreshTokenRecord | None, at: datetime
    ) -> bool:
        """See :meth:`OAuthStore.redeem_code`; everything is checked before anything is written."""
        require_aware(at, grant, refresh_token)
        found = find_digest(code_hash, self._codes)
        code = self._codes[found] if found is not None else None
        if code is None or code.redeemed_at is not None:
            if code is not None and code.grant_id is not None:
                self._revoke(code.grant_id, at)
            return False
        if grant.id in self._grants or (refresh_token is not None and refresh_token.token_hash in self._tokens):
            raise ValueError("the grant or refresh token exists already")
        self._codes[code.code_hash] = replace(code, redeemed_at=_utc(at), grant_id=grant.id)
        await self.create_grant(grant)  # checked above: cannot fail, and awaits nothing
        if refresh_token is not None:
            await self.save_refresh_token(refresh_token)
        return True

    async def create_grant(self, grant: GrantRecord) -> None:
        """See :meth:`OAuthStore.create_grant`; a duplicate id raises ``ValueError``."""
        require_aware(grant)
        if grant.id in self._grants:
            raise ValueError(f"a grant with id {grant.id!r} already exists")
        self._grants[grant.id] = _as_stored(grant)

    async def get_grant(self, grant_id: str) -> GrantRecord | None:
        """See :meth:`OAuthStore.get_grant`."""
        return self._grants.get(grant_id)

    async def list_grants(self, user_id: str | None = None) -> builtins.list[GrantRecord]:
        """See :meth:`OAuthStore.list_grants`."""
        grants = [g for g in self._grants.values() if user_id is None or g.user_id == user_id]
        return sorted(grants, key=lambda g: (g.created_at, g.id))

    async def revoke_grant(self, grant_id: str, at: datetime) -> GrantRecord | None:
        """See :meth:`OAuthStore.revoke_grant`; the grant's refresh tokens get ``rotated_at`` (if unset)."""
        require_aware(at)
        return self._revoke(grant_id, at)

    def _revoke(self, grant_id: str, at: datetime) -> GrantRecord | None:
        grant = self._grants.get(grant_id)
        if grant is None:
            return None
        if grant.revoked_at is None:
            self._grants[grant_id] = grant = replace(grant, revoked_at=_utc(at))
        for token_hash, token in self._tokens.items():
            if token.grant_id == grant_id and token.rotated_at is None:
                self._tokens[token_hash] = replace(token, rotated_at=_utc(at))
        return grant

    async def save_refresh_token(self, token: RefreshTokenRecord) -> None:
        """See :meth:`OAuthStore.save_refresh_token`; a duplicate digest raises ``ValueError``."""
        require_aware(token)
        if token.token_hash in self._tokens:
            raise ValueError("a refresh token with this digest already exists")
        self._tokens[token.token_hash] = _as_stored(token)

    async def get_refresh_token(self, token_hash: str) -> RefreshTokenRecord | None:
        """See :meth:`OAuthStore.get_refresh_token`; compares every digest in constant time."""
        found = find_digest(token_hash, self._tokens)
        return self._tokens[found] if found is not None else None

    async def rotate_refresh_token(self, token_hash: str, successor: RefreshTokenRecord, at: datetime) -> bool:
        """See :meth:`OAuthStore.rotate_refresh_token`; everything is checked before anything is written."""
        require_aware(at, successor)
        found = find_digest(token_hash, self._tokens)
        if found is None or self._tokens[found].rotated_at is not None:
            return False
        if successor.token_hash in self._tokens:
            raise ValueError("a refresh token with this digest already exists")
        self._tokens[found] = replace(self._tokens[found], rotated_at=_utc(at))
        await self.save_refresh_token(successor)  # checked above: cannot fail, and awaits nothing
        return True

    async def purge_expired(self, now: datetime) -> int:
        """See :meth:`OAuthStore.purge_expired`; removes what has ``expires_at <= now``."""
        require_aware(now)
        removed = 0
        for table in (self._requests, self._codes, self._tokens):
            expired = [key for key, record in table.items() if record.expires_at <= now]
            for key in expired:
                del table[key]
            removed += len(expired)
        return removed

    async def ping(self) -> None:
        """See :meth:`OAuthStore.ping`; memory is always reachable."""


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


_Record = TypeVar("_Record", AuthorizationRequestRecord, AuthorizationCodeRecord, GrantRecord, RefreshTokenRecord)


def _as_stored(record: _Record) -> _Record:
    """``record`` as the SQL store reads it back: datetimes in UTC, sequences as tuples."""
    changes: dict[str, Any] = {}
    for field in fields(record):
        value = getattr(record, field.name)
        if isinstance(value, datetime):
            changes[field.name] = _utc(value)
        elif isinstance(value, list | tuple):
            changes[field.name] = tuple(cast("list[Any] | tuple[Any, ...]", value))
    return replace(record, **changes)
