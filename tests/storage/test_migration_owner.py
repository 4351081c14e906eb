"""Migration 0004: specs stored before ``owner`` was required get a placeholder owner and load again."""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.storage import open_storage
from hivegate.storage.sql.migrate import upgrade


async def test_ownerless_specs_get_the_placeholder_owner(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    await upgrade(url, "0003")
    old_spec = {"id": "legacy", "name": "Legacy", "owner": None, "mcp_enabled": True}
    owned_spec = {"id": "kept", "name": "Kept", "owner": "carol", "mcp_enabled": True}
    engine = create_async_engine(url)
    async with engine.begin() as connection:
        for spec in (old_spec, owned_spec):
            await connection.execute(
                sa.text(
                    "INSERT INTO agents (id, spec, revision, updated_at) VALUES (:id, :spec, 1, '2026-11-01 00:00:00')"
                ),
                {"id": spec["id"], "spec": json.dumps(spec, sort_keys=True)},
            )
    await engine.dispose()

    async with await open_storage(url) as storage:  # migrates to head
        legacy = await storage.agents.get("legacy")
        kept = await storage.agents.get("kept")
    assert legacy is not None
    assert legacy.spec.owner == "admin"
    assert legacy.spec.auth == "required"
    assert kept is not None
    assert kept.spec.owner == "carol"
