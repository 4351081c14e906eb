"""A2A tasks: the table of a2a-sdk's ``DatabaseTaskStore`` (``tasks``), plus ``saved_at`` for the purge.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

The columns, types and indexes are those of ``a2a.server.models.TaskModel`` (a2a-sdk 1.3.0), spelled
out here so this revision stays what it was; ``tests/storage/test_migration_a2a_tasks.py`` compares
the migrated table with the SDK's model, so an SDK upgrade that changes it fails loudly. hivegate
never lets the SDK create the table (``DatabaseTaskStore(create_table=False)``).

``saved_at`` is hivegate's own: when the gateway last wrote the row (aware UTC, set by every save).
The SDK's ``last_updated`` is the task status timestamp, which a task may lack; ``saved_at`` always
exists, so expired tasks are found by one indexed comparison on both databases.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``tasks`` with the SDK's indexes and ``ix_tasks_saved_at``."""
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("context_id", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.Column("last_updated", sa.DateTime(), nullable=True),
        sa.Column("status", sa.JSON(), nullable=False),
        sa.Column("artifacts", sa.JSON(), nullable=True),
        sa.Column("history", sa.JSON(), nullable=True),
        sa.Column("protocol_version", sa.String(16), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.Column("saved_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.current_timestamp()),
    )
    op.create_index("ix_tasks_id", "tasks", ["id"])
    op.create_index("idx_tasks_owner_last_updated", "tasks", ["owner", "last_updated"])
    op.create_index("ix_tasks_saved_at", "tasks", ["saved_at"])


def downgrade() -> None:
    """Drop ``tasks`` (and every task in it)."""
    op.drop_table("tasks")
