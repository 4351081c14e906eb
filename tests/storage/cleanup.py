"""Clean-up shared by the storage suites: every table the migrations create, dropped on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

ALL_TABLES = (
    "oauth_refresh_tokens, oauth_grants, oauth_codes, oauth_requests, oauth_clients, "
    "api_keys, users, agents, registry_state, tasks, files, file_usage, conversation_turns, conversations, "
    "idempotency_keys, alembic_version"
)
"""Every table the migrations create, children first."""


async def drop_all_tables(url: str) -> None:
    """Drop :data:`ALL_TABLES` in the database at ``url``."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP TABLE IF EXISTS {ALL_TABLES}"))
    finally:
        await engine.dispose()


@asynccontextmanager
async def clean_database(url: str) -> AsyncGenerator[None]:
    """No tables before and after the block on PostgreSQL; other URLs (fresh files, memory) are left alone."""
    if not url.startswith("postgresql"):
        yield
        return
    await drop_all_tables(url)
    try:
        yield
    finally:
        await drop_all_tables(url)
