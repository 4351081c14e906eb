"""Fixtures for the storage contract suite: a fresh store (or database URL) per backend.

Backends: ``memory``, ``sqlite`` (a file in a not-yet-existing folder under
``tmp_path``) and ``postgresql``, which runs only when ``HIVEGATE_TEST_POSTGRES_URL``
names a server (``postgresql+asyncpg://postgres@127.0.0.1:5432/test``). The
PostgreSQL tests use a private database created for the session (falling back to
the named one if the role may not create databases), with the registry tables
dropped before and after each test.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.storage import AgentStore, open_storage
from hivegate.storage.sql.agents import SqlAgentStore
from tests.storage.cleanup import clean_database

POSTGRES_URL_VARIABLE = "HIVEGATE_TEST_POSTGRES_URL"

ALL_BACKENDS = ["memory", "sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
SQL_BACKENDS = ALL_BACKENDS[1:]


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    """The server URL from ``HIVEGATE_TEST_POSTGRES_URL``; skips the test when it is unset."""
    url = os.environ.get(POSTGRES_URL_VARIABLE, "")
    if not url:
        pytest.skip(
            f"PostgreSQL tests need {POSTGRES_URL_VARIABLE} (e.g. postgresql+asyncpg://postgres@127.0.0.1/test)"
        )
    return url


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def postgres_database_url(postgres_server_url: str) -> AsyncGenerator[str]:
    """A database private to this test session, dropped at its end."""
    name = f"hivegate_storage_test_{secrets.token_hex(4)}"
    admin = create_async_engine(postgres_server_url, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
    except DBAPIError:  # no CREATEDB privilege: share the named database
        await admin.dispose()
        yield postgres_server_url
        return
    try:
        yield make_url(postgres_server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


def _url_for(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'missing-folder' / 'registry.db'}"
    url = request.getfixturevalue("postgres_database_url")
    assert isinstance(url, str)
    return url


@pytest.fixture(params=ALL_BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for ``open_storage``, one per backend."""
    return _url_for(request.param, tmp_path, request)


@pytest.fixture(params=SQL_BACKENDS)
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL, one per SQL backend."""
    return _url_for(request.param, tmp_path, request)


@pytest.fixture
async def store(store_url: str) -> AsyncGenerator[AgentStore]:
    """A fresh, empty store on each backend."""
    async with clean_database(store_url):
        storage = await open_storage(store_url)
        created = storage.agents
        try:
            yield created
        finally:
            await storage.close()


@pytest.fixture
async def sql_store(sql_url: str) -> AsyncGenerator[SqlAgentStore]:
    """A fresh, empty SQL store on each SQL backend."""
    async with clean_database(sql_url):
        storage = await open_storage(sql_url)
        created = storage.agents
        assert isinstance(created, SqlAgentStore)
        try:
            yield created
        finally:
            await storage.close()


@pytest.fixture
async def clean_sql_url(sql_url: str) -> AsyncGenerator[str]:
    """A database URL with no registry tables yet, on each SQL backend."""
    async with clean_database(sql_url):
        yield sql_url
