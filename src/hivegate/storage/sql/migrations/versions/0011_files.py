"""Uploaded files: ``files`` (one row per file; the bytes are in the blob store) and ``file_usage`` (per owner).

Revision ID: 0011
Revises: 0008
Create Date: 2026-12-03

Issue 10 item 3. ``down_revision`` is ``0008`` on this branch: revisions 0009 and 0010 come from a parallel
branch, and the merge re-chains this one after them (change ``down_revision`` to ``"0010"``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``files`` (indexed by owner and expiry) and ``file_usage``."""
    op.create_table(
        "files",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=True),
        sa.Column("filename", sa.Text(), nullable=False),
        sa.Column("content_type", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_files_owner", "files", ["owner"])
    op.create_index("ix_files_expires_at", "files", ["expires_at"])
    op.create_table(
        "file_usage",
        sa.Column("owner", sa.Text(), primary_key=True),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    """Drop both tables (the blobs stay on disk; the orphan sweep of a newer version would remove them)."""
    op.drop_table("file_usage")
    op.drop_table("files")
