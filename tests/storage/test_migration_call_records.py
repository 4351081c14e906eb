"""Migration 0013: ``conversations``, ``conversation_turns`` and ``idempotency_keys`` are created from 0012 with
their keys and indexes, match the tables the store writes, and go with the downgrade. On SQLite, and on
PostgreSQL when ``HIVEGATE_TEST_POSTGRES_URL`` is set."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.storage import open_storage
from hivegate.storage.calls import CallWrite, Conversation, Turn, TurnRole
from hivegate.storage.sql.call_tables import conversation_turns, conversations, idempotency_keys
from hivegate.storage.sql.migrate import alembic_config, upgrade
from hivegate.storage.sql.tables import metadata

TABLES = {"conversations", "conversation_turns", "idempotency_keys"}
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _schema(connection: Connection) -> dict[str, Any]:
    inspector = sa.inspect(connection)
    present = TABLES & set(inspector.get_table_names())
    return {
        "tables": present,
        "keys": {name: inspector.get_pk_constraint(name)["constrained_columns"] for name in sorted(present)},
        "indexes": {
            str(index["name"]): list(index["column_names"])
            for name in sorted(present)
            for index in inspector.get_indexes(name)
        },
        "foreign_keys": [
            (key["referred_table"], key["constrained_columns"], (key.get("options") or {}).get("ondelete"))
            for name in sorted(present)
            for key in inspector.get_foreign_keys(name)
        ],
        "seq_type": next(
            (str(c["type"]) for c in inspector.get_columns("conversation_turns") if c["name"] == "seq"), None
        )
        if "conversation_turns" in present
        else None,
    }


def _ours(name: str | None, kind: str, _parent: object) -> bool:
    return kind != "table" or name in TABLES


def _diff(connection: Connection) -> list[Any]:
    ours = sa.MetaData()
    for table in (conversations, conversation_turns, idempotency_keys):
        table.to_metadata(ours)
    context = MigrationContext.configure(connection, opts={"include_name": _ours})
    return list(compare_metadata(context, ours))


async def _inspect(url: str) -> tuple[dict[str, Any], list[Any]]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            schema = await connection.run_sync(_schema)
            diff = await connection.run_sync(_diff) if schema["tables"] else []
    finally:
        await engine.dispose()
    return schema, diff


def _downgrade_to_0012(connection: Connection) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.downgrade(config, "0012")


async def test_upgrade_from_0012_creates_the_tables_and_downgrade_drops_them(clean_sql_url: str) -> None:
    await upgrade(clean_sql_url, "0012")
    before, _ = await _inspect(clean_sql_url)
    assert before["tables"] == set()

    await upgrade(clean_sql_url)
    after, diff = await _inspect(clean_sql_url)
    assert after["tables"] == TABLES
    assert diff == []
    assert after["keys"] == {
        "conversation_turns": ["seq"],
        "conversations": ["id"],
        "idempotency_keys": ["user_id", "agent_id", "key"],
    }
    assert after["indexes"] == {
        "ix_conversations_user_updated": ["user_id", "updated_at", "id"],
        "ix_conversations_updated_at": ["updated_at"],
        "ix_conversation_turns_conversation_seq": ["conversation_id", "seq"],
        "ix_idempotency_keys_expires_at": ["expires_at"],
    }
    assert after["foreign_keys"] == [("conversations", ["conversation_id"], "CASCADE")]
    assert after["seq_type"] in ("INTEGER", "BIGINT")  # SQLite's rowid; PostgreSQL's bigserial

    async with await open_storage(clean_sql_url) as storage:  # rows in the tables do not stop the downgrade
        turn = Turn(TurnRole.USER, "hi", NOW)
        await storage.calls.record(CallWrite(Conversation("c1", "u1", "echo", NOW, NOW), [turn]))
    engine = create_async_engine(clean_sql_url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_downgrade_to_0012)
    finally:
        await engine.dispose()
    down, _ = await _inspect(clean_sql_url)
    assert down["tables"] == set()

    await upgrade(clean_sql_url)
    again, diff = await _inspect(clean_sql_url)
    assert again["tables"] == TABLES
    assert diff == []


def test_the_tables_are_on_the_shared_metadata() -> None:
    """Alembic's autogenerate and ``check`` (``migrations/env.py``) see the whole schema."""
    assert set(metadata.tables) >= TABLES
