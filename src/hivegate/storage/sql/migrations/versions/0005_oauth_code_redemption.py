"""Authorization codes are redeemed in place: ``oauth_codes`` gets ``redeemed_at`` and ``grant_id``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

Before this revision a code was deleted when redeemed and the grant it produced was remembered
in the process only, so a replay arriving at another replica, after a restart, or while the
first redemption was still running revoked nothing (issue 7 item 8). Now the redemption marks
the row (``redeemed_at``, ``grant_id``) in the transaction that creates the grant, and a replay
finds the grant to revoke (RFC 6749 §4.1.2). Existing rows are unredeemed codes; both columns
start NULL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the two nullable columns."""
    with op.batch_alter_table("oauth_codes") as batch:
        batch.add_column(sa.Column("redeemed_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("grant_id", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop them; redeemed codes are deleted first, as the older schema held only unredeemed ones."""
    op.execute(sa.text("DELETE FROM oauth_codes WHERE redeemed_at IS NOT NULL"))
    with op.batch_alter_table("oauth_codes") as batch:
        batch.drop_column("grant_id")
        batch.drop_column("redeemed_at")
