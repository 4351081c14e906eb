"""Migration 0007: the ``tasks`` table is exactly a2a-sdk's ``TaskModel`` (plus ``saved_at``), on SQLite and PostgreSQL.

An SDK upgrade that changes its model (a column, a type, a length, nullability, an index) fails here,
before the SDK's queries meet a table they do not expect. hivegate's own table object must match too.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from a2a.server.models import TaskModel
from alembic import command
from sqlalchemy import Connection, Table
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.storage.sql.migrate import alembic_config, upgrade
from hivegate.storage.sql.task_tables import SDK_ATTRIBUTES, tasks

HIVEGATE_ONLY = {"saved_at"}


def _describe(table_columns: list[dict[str, Any]], dialect: sa.Dialect) -> dict[str, tuple[str, bool, bool]]:
    return {
        column["name"]: (column["type"].compile(dialect=dialect), bool(column["nullable"]), bool(column["primary_key"]))
        for column in table_columns
    }


def _model_columns(table: Table, dialect: sa.Dialect) -> dict[str, tuple[str, bool, bool]]:
    return {
        column.name: (column.type.compile(dialect=dialect), bool(column.nullable), bool(column.primary_key))
        for column in table.columns
    }


def _reflect(connection: Connection) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    inspector = sa.inspect(connection)
    primary = set(inspector.get_pk_constraint("tasks")["constrained_columns"])
    columns = [dict(column) | {"primary_key": column["name"] in primary} for column in inspector.get_columns("tasks")]
    indexes = {str(index["name"]): [str(c) for c in index["column_names"]] for index in inspector.get_indexes("tasks")}
    return columns, indexes


def _normalise(type_text: str) -> str:
    # Reflection reads PostgreSQL's ``TIMESTAMP WITHOUT TIME ZONE`` back for ``TIMESTAMP``, SQLite's
    # ``DATETIME`` as is; both spell the same type.
    return type_text.replace(" WITHOUT TIME ZONE", "")


async def test_migrated_table_is_the_sdk_model(clean_sql_url: str) -> None:
    await upgrade(clean_sql_url)
    engine = create_async_engine(clean_sql_url)
    try:
        async with engine.connect() as connection:
            columns, indexes = await connection.run_sync(_reflect)
            dialect = connection.dialect
    finally:
        await engine.dispose()

    migrated = {name: (_normalise(t), n, p) for name, (t, n, p) in _describe(columns, dialect).items()}
    sdk_table = TaskModel.__table__
    assert isinstance(sdk_table, Table)
    sdk = {name: (_normalise(t), n, p) for name, (t, n, p) in _model_columns(sdk_table, dialect).items()}
    ours = {name: (_normalise(t), n, p) for name, (t, n, p) in _model_columns(tasks, dialect).items()}

    assert {name: migrated[name] for name in migrated if name not in HIVEGATE_ONLY} == sdk
    assert migrated == ours
    assert set(SDK_ATTRIBUTES) == set(sdk)
    for column in sdk:
        assert hasattr(TaskModel, SDK_ATTRIBUTES[column])

    sdk_indexes = {str(index.name): [str(c.name) for c in index.columns] for index in sdk_table.indexes}
    for name, index_columns in sdk_indexes.items():
        assert indexes.get(name) == index_columns, name
    assert indexes.get("ix_tasks_saved_at") == ["saved_at"]


async def test_downgrade_drops_the_table_and_upgrade_restores_it(clean_sql_url: str) -> None:
    await upgrade(clean_sql_url)

    def _down(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "0006")

    engine = create_async_engine(clean_sql_url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_down)
        async with engine.connect() as connection:
            names = await connection.run_sync(lambda c: sa.inspect(c).get_table_names())
        assert "tasks" not in names
    finally:
        await engine.dispose()
    await upgrade(clean_sql_url)
