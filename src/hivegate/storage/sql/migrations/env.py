"""Alembic environment for the registry schema.

Run through :func:`hivegate.storage.sql.migrate.upgrade`, which passes an open
connection (already in a transaction) as ``config.attributes["connection"]``.
Used from the ``alembic`` command line (e.g. ``revision --autogenerate``) with a
config built by :func:`hivegate.storage.sql.migrate.alembic_config`, it reads the URL from
the ``sqlalchemy.url`` main option. It never reads the environment.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import Connection

from hivegate.storage.sql.call_tables import conversation_turns, conversations, idempotency_keys
from hivegate.storage.sql.credential_tables import api_keys, users
from hivegate.storage.sql.engine import create_sql_engine
from hivegate.storage.sql.file_tables import file_usage, files
from hivegate.storage.sql.oauth_tables import (
    oauth_clients,
    oauth_codes,
    oauth_grants,
    oauth_refresh_tokens,
    oauth_requests,
)
from hivegate.storage.sql.tables import metadata
from hivegate.storage.sql.task_tables import tasks

CREDENTIAL_TABLES = (users, api_keys)
"""Defined on ``metadata`` by importing them, so autogenerate and ``check`` see the whole schema."""

OAUTH_TABLES = (oauth_clients, oauth_requests, oauth_codes, oauth_grants, oauth_refresh_tokens)
"""Likewise for the OAuth tables."""

TASK_TABLES = (tasks,)
"""Likewise for the A2A task table (migration ``0007``)."""

FILE_TABLES = (files, file_usage)
"""Likewise for the uploaded files' tables (migration ``0011``)."""

CALL_TABLES = (conversations, conversation_turns, idempotency_keys)
"""Likewise for the calls' conversations and idempotency records (migration ``0013``)."""


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_engine(url: str) -> None:
    engine = create_sql_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


def _main() -> None:
    config = context.config
    connection = config.attributes.get("connection")
    url = config.get_main_option("sqlalchemy.url")
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=metadata, literal_binds=True, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    elif isinstance(connection, Connection):
        _run(connection)
    elif url is not None:
        asyncio.run(_run_with_own_engine(url))
    else:
        raise RuntimeError("no database: pass config.attributes['connection'] or set the sqlalchemy.url option")


_main()
