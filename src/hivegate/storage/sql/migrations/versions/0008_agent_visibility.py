"""Every stored spec says ``visibility``: specs stored before the field existed get ``"private"``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

``AgentSpec.visibility`` (issue 9 item 6, default ``"private"``) decodes as private from a spec that
lacks it, but the registry compares specs by their canonical JSON text (``encode_spec``), which now
carries the key: without this revision the next apply of an unchanged agent would count as an update
and bump the revision (as 0006 did for ``a2a_enabled``). The key is inserted with the text's keys kept
sorted, as ``encode_spec`` writes them. The downgrade removes it again (the older model forbids
unknown keys), whatever its value: a public agent becomes private, the only visibility before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FIELD = "visibility"
DEFAULT = "private"


def _rewrite(add: bool) -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.text("SELECT id, spec FROM agents")).all()
    for agent_id, text in rows:
        document = json.loads(text)
        if add == (FIELD in document):
            continue
        if add:
            document[FIELD] = DEFAULT
        else:
            del document[FIELD]
        updated = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        connection.execute(sa.text("UPDATE agents SET spec = :spec WHERE id = :id"), {"spec": updated, "id": agent_id})


def upgrade() -> None:
    """Give every stored spec without the field ``visibility = "private"``."""
    _rewrite(add=True)


def downgrade() -> None:
    """Remove the field from every stored spec."""
    _rewrite(add=False)
