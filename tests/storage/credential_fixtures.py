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

from hivegate.storage import open_storage
from hivegate.storage.credentials import CredentialStore
from tests.storage.cleanup import clean_database
from tests.storage.conftest import ALL_BACKENDS

__all__ = ["credential_store", "credential_url"]


@pytest.fixture(params=ALL_BACKENDS)
def credential_backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for ``open_storage`` on each backend.

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
    async with clean_database(credential_backend_url):
        yield credential_backend_url


@pytest.fixture
async def credential_store(credential_url: str) -> AsyncGenerator[CredentialStore]:
    """A fresh, empty credential store on each backend."""
    storage = await open_storage(credential_url)
    store = storage.credentials
    try:
        yield store
    finally:
        await storage.close()
