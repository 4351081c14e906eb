"""What calls leave behind (:mod:`hivegate.storage.calls`) as SQLAlchemy Core tables on the registry's ``metadata``.

The tables mirror migration ``0013_call_records`` (a test compares them); change both together, never one alone.

``conversations``
    One row per conversation (:class:`~hivegate.storage.calls.Conversation`). Indexed by
    ``(user_id, updated_at, id)`` (a user's conversations, newest first, keyset pages) and by
    ``updated_at`` (the purge of idle conversations).
``conversation_turns``
    One row per turn (:class:`~hivegate.storage.calls.Turn`); ``seq`` is the database's own increasing
    key (SQLite: the rowid with ``AUTOINCREMENT``, never reused; PostgreSQL: ``bigserial``). Its
    conversation's deletion takes it (``ON DELETE CASCADE``; the stores also delete turns explicitly).
``idempotency_keys``
    One row per (user, agent, key) (:class:`~hivegate.storage.calls.IdempotencyRecord`); the outcome
    columns are set for a DONE record only. Indexed by ``expires_at`` (the purge).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, ForeignKey, Index, Integer, String, Table, Text

from hivegate.storage.sql.tables import UtcDateTime, metadata

__all__ = ["conversation_turns", "conversations", "idempotency_keys"]

conversations = Table(
    "conversations",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("user_id", Text, nullable=False),
    Column("agent_id", Text, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("turn_count", Integer, nullable=False),
    Index("ix_conversations_user_updated", "user_id", "updated_at", "id"),
    Index("ix_conversations_updated_at", "updated_at"),
)

conversation_turns = Table(
    "conversation_turns",
    metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("conversation_id", String(64), ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False),
    Column("role", String(16), nullable=False),
    Column("text", Text, nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Column("failed", Boolean, nullable=False),
    Index("ix_conversation_turns_conversation_seq", "conversation_id", "seq"),
    sqlite_autoincrement=True,
)

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("user_id", Text, primary_key=True),
    Column("agent_id", Text, primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("claim", String(32), nullable=False),
    Column("state", String(16), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("outcome_text", Text, nullable=True),
    Column("outcome_failed", Boolean, nullable=False),
    Column("context_id", String(64), nullable=True),
    Column("task_id", String(64), nullable=True),
    Index("ix_idempotency_keys_expires_at", "expires_at"),
)
