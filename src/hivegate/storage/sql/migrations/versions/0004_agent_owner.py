"""Every agent has an owner: stored specs without one get the owner ``admin``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Before this revision ``owner`` was optional; it is now required (issue 3: an owner's keys and
OAuth grants are what reach an agent). Stored specs whose ``owner`` is missing or null are
given ``"admin"``, so the registry keeps loading; re-apply the agents with their real owner
(``hivegate agents apply``) — agents from a config file are re-applied at every start anyway.
A spec's canonical JSON keeps its keys sorted, so ``owner`` is re-inserted in order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PLACEHOLDER_OWNER = "admin"


def upgrade() -> None:
    """Give every stored spec without an owner the placeholder owner."""
    connection = op.get_bind()
    rows = connection.execute(sa.text("SELECT id, spec FROM agents")).all()
    for agent_id, text in rows:
        document = json.loads(text)
        if document.get("owner"):
            continue
        document["owner"] = PLACEHOLDER_OWNER
        updated = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        connection.execute(sa.text("UPDATE agents SET spec = :spec WHERE id = :id"), {"spec": updated, "id": agent_id})


def downgrade() -> None:
    """Nothing to undo: an owner is valid under the older model too."""
