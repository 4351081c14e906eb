"""The credential schema (``users``, ``api_keys``) as SQLAlchemy Core tables on the registry's ``metadata``.

The tables mirror migration ``0002_credentials`` (a test compares them); change both
together, never one alone.

``users``
    One row per local account. ``username`` keeps the spelling given at creation;
    ``username_key`` is its lower-case form, uniquely indexed, so usernames are unique
    and looked up ignoring case. ``password_hash`` is an encoded argon2 hash.
``api_keys``
    One row per key ever created, never deleted: ``key_hash`` is the SHA-256 hex
    digest of the whole key (uniquely indexed), ``prefix`` its first 12 characters;
    ``agent_id`` is NULL for a user's ``oag_`` key and the bound agent for a ``bak_``
    key (no foreign key: agents are tombstoned and re-created by id);
    ``revoked_at`` is NULL while the key is active.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, ForeignKey, Index, Table, Text

from hivegate.storage.sql.tables import UtcDateTime, metadata

__all__ = ["api_keys", "users"]

users = Table(
    "users",
    metadata,
    Column("id", Text, primary_key=True),
    Column("username", Text, nullable=False),
    Column("username_key", Text, nullable=False),
    Column("password_hash", Text, nullable=False),
    Column("disabled", Boolean, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Index("ix_users_username_key", "username_key", unique=True),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Text, primary_key=True),
    Column("key_hash", Text, nullable=False),
    Column("prefix", Text, nullable=False),
    Column("user_id", Text, ForeignKey("users.id"), nullable=False),
    Column("agent_id", Text, nullable=True),
    Column("name", Text, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("last_used_at", UtcDateTime, nullable=True),
    Column("revoked_at", UtcDateTime, nullable=True),
    Index("ix_api_keys_key_hash", "key_hash", unique=True),
    Index("ix_api_keys_user_id", "user_id"),
    Index("ix_api_keys_agent_id", "agent_id"),
)
