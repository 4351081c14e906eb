"""Agents and the registry revision.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Creates ``agents`` (one row per agent id, tombstoned by ``deleted_at``) and
``registry_state`` (one row, ``id = 1``, holding the registry revision, seeded at 0).
The schema is spelled out here rather than imported from ``hivegate.storage.sql.tables``
so this revision stays what it was when later revisions change the tables.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``agents`` and ``registry_state`` and seed the revision row."""
    op.create_table(
        "agents",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_agents_revision", "agents", ["revision"])
    registry_state = op.create_table(
        "registry_state",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("revision", sa.Integer(), nullable=False),
    )
    op.bulk_insert(registry_state, [{"id": 1, "revision": 0}])


def downgrade() -> None:
    """Drop both tables (and every stored agent)."""
    op.drop_table("registry_state")
    op.drop_index("ix_agents_revision", table_name="agents")
    op.drop_table("agents")
