"""Fixtures for end-to-end tests: a registry database URL per database kind.

``registry_url`` runs a test once on SQLite and once on PostgreSQL; the PostgreSQL run
needs ``HIVEGATE_TEST_POSTGRES_URL`` (``.ci/run`` sets it) and is skipped, naming the
variable, without it. Each PostgreSQL run gets a database of its own, dropped afterwards.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tests.conftest import POSTGRES_ENV, postgres_url


@pytest_asyncio.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def registry_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncGenerator[str]:
    """A database URL for a gateway's registry: a fresh SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'registry.db'}"
        return
    server = postgres_url()
    if server is None:
        pytest.skip(f"PostgreSQL runs need {POSTGRES_ENV} (e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/test)")
    name = f"hivegate_e2e_{secrets.token_hex(4)}"
    admin = create_async_engine(server, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()
