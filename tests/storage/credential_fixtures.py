"""Fixtures for the credential store contract: a fresh ``CredentialStore`` per backend.

Backends as in ``conftest.py``: ``memory``, ``sqlite`` (a file under ``tmp_path``) and
``postgresql`` (when ``HIVEGATE_TEST_POSTGRES_URL`` is set, in the session's private
database). On PostgreSQL every table the migrations create is dropped before and
after each test. Import the fixtures into a test module to use them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from hivegate.storage.credentials import CredentialStore, create_credential_store
from tests.storage.conftest import ALL_BACKENDS

__all__ = ["credential_store", "credential_url"]

_ALL_TABLES = (
    "oauth_refresh_tokens, oauth_grants, oauth_codes, oauth_requests, oauth_clients, "
    "api_keys, users, agents, registry_state, alembic_version"
)


@pytest.fixture(params=ALL_BACKENDS)
def credential_backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for ``create_credential_store`` on each backend.

    Synchronous on purpose: the session's PostgreSQL database (an async, session-loop fixture)
    is set up here, outside any test's event loop (else running this module alone fails).
    """
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'missing-folder' / 'credentials.db'}"
    url = request.getfixturevalue("postgres_database_url")
    assert isinstance(url, str)
    return url


@pytest.fixture
async def credential_url(credential_backend_url: str) -> AsyncGenerator[str]:
    """``credential_backend_url`` with no tables yet (PostgreSQL: dropped before and after the test)."""
    url = credential_backend_url
    if not url.startswith("postgresql"):
        yield url
        return
    await _drop_all_tables(url)
    try:
        yield url
    finally:
        await _drop_all_tables(url)


@pytest.fixture
async def credential_store(credential_url: str) -> AsyncGenerator[CredentialStore]:
    """A fresh, empty credential store on each backend."""
    store = await create_credential_store(credential_url)
    try:
        yield store
    finally:
        await store.close()


async def _drop_all_tables(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP TABLE IF EXISTS {_ALL_TABLES}"))
    finally:
        await engine.dispose()
