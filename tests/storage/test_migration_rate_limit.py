"""Migration 0012: specs stored before ``rate_limit_per_minute`` existed gain ``null``, so re-applying them changes
nothing; the downgrade removes the key. On SQLite, and on PostgreSQL when ``HIVEGATE_TEST_POSTGRES_URL`` is set."""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import command
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.agents.model import AgentSpec
from hivegate.storage import open_storage
from hivegate.storage.agents import encode_spec
from hivegate.storage.sql.migrate import alembic_config, upgrade


def _without_rate_limit(spec: AgentSpec) -> str:
    return json.dumps(
        {k: v for k, v in json.loads(encode_spec(spec)).items() if k != "rate_limit_per_minute"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


async def _stored_text(url: str, agent_id: str) -> str:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            text = (
                await connection.execute(sa.text("SELECT spec FROM agents WHERE id = :id"), {"id": agent_id})
            ).scalar_one()
    finally:
        await engine.dispose()
    assert isinstance(text, str)
    return text


async def test_stored_specs_gain_no_limit_and_reapply_unchanged(clean_sql_url: str) -> None:
    await upgrade(clean_sql_url, "0011")
    spec = AgentSpec(id="legacy", name="Legacy", owner="carol")
    engine = create_async_engine(clean_sql_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                sa.text(
                    "INSERT INTO agents (id, spec, revision, updated_at) VALUES ('legacy', :spec, 1, CURRENT_TIMESTAMP)"
                ),
                {"spec": _without_rate_limit(spec)},
            )
    finally:
        await engine.dispose()

    async with await open_storage(clean_sql_url) as storage:  # migrates to head
        stored = await storage.agents.get("legacy")
        assert stored is not None
        assert stored.spec.rate_limit_per_minute is None
        report = await storage.agents.apply([spec])
    assert report.unchanged == ("legacy",)
    assert report.updated == ()
    assert json.loads(await _stored_text(clean_sql_url, "legacy"))["rate_limit_per_minute"] is None


async def test_downgrade_removes_the_key(clean_sql_url: str) -> None:
    public = AgentSpec(id="shown", name="Shown", owner="carol", rate_limit_per_minute=5)
    async with await open_storage(clean_sql_url) as storage:
        await storage.agents.apply([public])

    def _down(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "0011")

    engine = create_async_engine(clean_sql_url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_down)
    finally:
        await engine.dispose()
    assert "rate_limit_per_minute" not in json.loads(await _stored_text(clean_sql_url, "shown"))
    await upgrade(clean_sql_url)
    assert json.loads(await _stored_text(clean_sql_url, "shown"))["rate_limit_per_minute"] is None
