"""Every stored spec says ``a2a_enabled``: specs stored before the flag existed get ``true``.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

``AgentSpec.a2a_enabled`` (issue 9 item 5, default true) decodes as true from a spec that lacks it,
but the registry compares specs by their canonical JSON text (``encode_spec``), which now carries
the key: without this revision the next apply of an unchanged agent would count as an update and
bump the revision. The key is inserted with the text's keys kept sorted, as ``encode_spec`` writes
them. The downgrade removes it again (the older model forbids unknown keys).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FLAG = "a2a_enabled"


def _rewrite(add: bool) -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.text("SELECT id, spec FROM agents")).all()
    for agent_id, text in rows:
        document = json.loads(text)
        if add == (FLAG in document):
            continue
        if add:
            document[FLAG] = True
        else:
            del document[FLAG]
        updated = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        connection.execute(sa.text("UPDATE agents SET spec = :spec WHERE id = :id"), {"spec": updated, "id": agent_id})


def upgrade() -> None:
    """Give every stored spec without the flag ``a2a_enabled = true``."""
    _rewrite(add=True)


def downgrade() -> None:
    """Remove the flag from every stored spec."""
    _rewrite(add=False)
