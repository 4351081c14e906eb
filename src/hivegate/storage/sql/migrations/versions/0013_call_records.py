"""What calls leave behind: ``conversations``, their ``conversation_turns``, and ``idempotency_keys``.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04

Issue 10 items 1-2 (:mod:`hivegate.storage.calls`). ``conversation_turns.seq`` is the database's own
increasing key: SQLite's rowid with ``AUTOINCREMENT`` (never reused after a delete), PostgreSQL's
``bigserial``. Turns go with their conversation (``ON DELETE CASCADE``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the three tables and their indexes."""
    op.create_table(
        "conversations",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("turn_count", sa.Integer(), nullable=False),
    )
    op.create_index("ix_conversations_user_updated", "conversations", ["user_id", "updated_at", "id"])
    op.create_index("ix_conversations_updated_at", "conversations", ["updated_at"])
    op.create_table(
        "conversation_turns",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column(
            "conversation_id",
            sa.String(64),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("failed", sa.Boolean(), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_conversation_turns_conversation_seq", "conversation_turns", ["conversation_id", "seq"])
    op.create_table(
        "idempotency_keys",
        sa.Column("user_id", sa.Text(), primary_key=True),
        sa.Column("agent_id", sa.Text(), primary_key=True),
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("claim", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome_text", sa.Text(), nullable=True),
        sa.Column("outcome_failed", sa.Boolean(), nullable=False),
        sa.Column("context_id", sa.String(64), nullable=True),
        sa.Column("task_id", sa.String(64), nullable=True),
    )
    op.create_index("ix_idempotency_keys_expires_at", "idempotency_keys", ["expires_at"])


def downgrade() -> None:
    """Drop the three tables (every conversation, turn and idempotency record in them)."""
    op.drop_table("idempotency_keys")
    op.drop_table("conversation_turns")
    op.drop_table("conversations")
