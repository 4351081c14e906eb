"""Migration 0006: specs stored before ``a2a_enabled`` existed gain ``true``, so re-applying them changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.agents.model import AgentSpec
from hivegate.storage import open_storage
from hivegate.storage.agents import encode_spec
from hivegate.storage.sql.migrate import upgrade


async def test_stored_specs_gain_the_flag_and_reapply_unchanged(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    await upgrade(url, "0005")
    spec = AgentSpec(id="legacy", name="Legacy", owner="carol")
    old_text = json.dumps(
        {k: v for k, v in json.loads(encode_spec(spec)).items() if k != "a2a_enabled"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    engine = create_async_engine(url)
    async with engine.begin() as connection:
        await connection.execute(
            sa.text("INSERT INTO agents (id, spec, revision, updated_at) VALUES ('legacy', :spec, 1, '2026-11-01')"),
            {"spec": old_text},
        )
    await engine.dispose()

    async with await open_storage(url) as storage:  # migrates to head
        stored = await storage.agents.get("legacy")
        assert stored is not None
        assert stored.spec.a2a_enabled
        report = await storage.agents.apply([spec])
    assert report.unchanged == ("legacy",)
    assert report.updated == ()
