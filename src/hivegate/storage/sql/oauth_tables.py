"""The OAuth schema as SQLAlchemy Core tables on the registry's ``metadata``.

The tables mirror migration ``0003_oauth`` (a test compares them); change both
together, never one alone. Tuples of strings and the client metadata are stored as
JSON text (:class:`JsonStrings`, :class:`JsonObject`), which reads back the same on
SQLite and PostgreSQL. There are no foreign keys: clients may be identified by a
metadata document URL and never stored, and the in-memory store enforces none either.

``oauth_clients``
    One row per dynamically registered client; ``client_metadata`` is the full client
    information as a JSON object.
``oauth_requests``
    Authorization requests a user has signed in for, waiting for consent; deleted when taken or
    purged after ``expires_at``. (Requests not yet signed in for are never stored.)
``oauth_codes``
    Issued authorization codes by the SHA-256 hex ``code_hash``; ``redeemed_at`` and
    ``grant_id`` are set together, once, when redeemed (a conditional ``UPDATE``, so single use;
    migration ``0005``); purged after ``expires_at``.
``oauth_grants``
    One row per redeemed code, never deleted; ``revoked_at`` is NULL while active.
``oauth_refresh_tokens``
    Refresh tokens by the SHA-256 hex ``token_hash``; ``rotated_at`` is set (once) when
    exchanged or when the grant is revoked; purged after ``expires_at``.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Boolean, Column, Dialect, Index, Table, Text, TypeDecorator

from hivegate.storage.sql.tables import UtcDateTime, metadata

__all__ = [
    "JsonObject",
    "JsonStrings",
    "oauth_clients",
    "oauth_codes",
    "oauth_grants",
    "oauth_refresh_tokens",
    "oauth_requests",
]


class JsonStrings(TypeDecorator[tuple[str, ...]]):
    """A tuple of strings stored as a JSON array in a ``TEXT`` column."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: tuple[str, ...] | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        return json.dumps(list(value), ensure_ascii=False, separators=(",", ":"))

    def process_result_value(self, value: str | None, dialect: Dialect) -> tuple[str, ...] | None:
        return None if value is None else tuple(json.loads(value))


class JsonObject(TypeDecorator[dict[str, Any]]):
    """A JSON object (``dict``) stored as JSON text in a ``TEXT`` column."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: dict[str, Any] | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)

    def process_result_value(self, value: str | None, dialect: Dialect) -> dict[str, Any] | None:
        return None if value is None else json.loads(value)


oauth_clients = Table(
    "oauth_clients",
    metadata,
    Column("client_id", Text, primary_key=True),
    Column("client_metadata", JsonObject, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

oauth_requests = Table(
    "oauth_requests",
    metadata,
    Column("id", Text, primary_key=True),
    Column("client_id", Text, nullable=False),
    Column("redirect_uri", Text, nullable=False),
    Column("redirect_uri_provided_explicitly", Boolean, nullable=False),
    Column("state", Text, nullable=True),
    Column("scopes", JsonStrings, nullable=False),
    Column("code_challenge", Text, nullable=False),
    Column("resource", Text, nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("user_id", Text, nullable=True),
    Column("browser_binding", Text, nullable=True),
    Index("ix_oauth_requests_expires_at", "expires_at"),
)

oauth_codes = Table(
    "oauth_codes",
    metadata,
    Column("code_hash", Text, primary_key=True),
    Column("client_id", Text, nullable=False),
    Column("user_id", Text, nullable=False),
    Column("redirect_uri", Text, nullable=False),
    Column("redirect_uri_provided_explicitly", Boolean, nullable=False),
    Column("code_challenge", Text, nullable=False),
    Column("scopes", JsonStrings, nullable=False),
    Column("agents", JsonStrings, nullable=False),
    Column("resource", Text, nullable=True),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("redeemed_at", UtcDateTime, nullable=True),
    Column("grant_id", Text, nullable=True),
    Index("ix_oauth_codes_expires_at", "expires_at"),
)

oauth_grants = Table(
    "oauth_grants",
    metadata,
    Column("id", Text, primary_key=True),
    Column("user_id", Text, nullable=False),
    Column("client_id", Text, nullable=False),
    Column("client_name", Text, nullable=True),
    Column("agents", JsonStrings, nullable=False),
    Column("scopes", JsonStrings, nullable=False),
    Column("resource", Text, nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("revoked_at", UtcDateTime, nullable=True),
    Index("ix_oauth_grants_user_id", "user_id"),
)

oauth_refresh_tokens = Table(
    "oauth_refresh_tokens",
    metadata,
    Column("token_hash", Text, primary_key=True),
    Column("grant_id", Text, nullable=False),
    Column("client_id", Text, nullable=False),
    Column("user_id", Text, nullable=False),
    Column("scopes", JsonStrings, nullable=False),
    Column("resource", Text, nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("rotated_at", UtcDateTime, nullable=True),
    Index("ix_oauth_refresh_tokens_grant_id", "grant_id"),
    Index("ix_oauth_refresh_tokens_user_id", "user_id"),
    Index("ix_oauth_refresh_tokens_expires_at", "expires_at"),
)
