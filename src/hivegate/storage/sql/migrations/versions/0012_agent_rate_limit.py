"""Every stored spec says ``rate_limit_per_minute``: specs stored before the field existed get ``null``.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03

``AgentSpec.rate_limit_per_minute`` (issue 10 item 4, default None: the settings' limit) decodes as None
from a spec that lacks it, but the registry compares specs by their canonical JSON text
(``encode_spec``), which now carries the key: without this revision the next apply of an unchanged agent
would count as an update and bump the revision (as 0006 and 0008 handled for their fields). The key is
inserted with the text's keys kept sorted. The downgrade removes it (the older model forbids unknown
keys), whatever its value: an agent's own limit is dropped for the settings' one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FIELD = "rate_limit_per_minute"


def _rewrite(add: bool) -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.text("SELECT id, spec FROM agents")).all()
    for agent_id, text in rows:
        document = json.loads(text)
        if add == (FIELD in document):
            continue
        if add:
            document[FIELD] = None
        else:
            del document[FIELD]
        updated = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        connection.execute(sa.text("UPDATE agents SET spec = :spec WHERE id = :id"), {"spec": updated, "id": agent_id})


def upgrade() -> None:
    """Give every stored spec without the field ``rate_limit_per_minute = null``."""
    _rewrite(add=True)


def downgrade() -> None:
    """Remove the field from every stored spec."""
    _rewrite(add=False)
