"""Issue 7 item 5: every database failure is one ``StoreUnavailableError``, within bounded time.

Real databases, really failing: a SQLite file locked by another connection (``BEGIN EXCLUSIVE``
in exclusive locking mode: reads and writes wait; ``BEGIN IMMEDIATE``: writes wait, reads go on),
a read-only SQLite file, an exhausted connection pool, and PostgreSQL behind a loopback proxy the
test controls (``tests/tcp_proxy.py``) that refuses connections or swallows every byte. Each
failure must surface as :class:`~hivegate.errors.StoreUnavailableError` (code
``store_unavailable``) naming the database without its password, within the configured limits.
"""

from __future__ import annotations

import contextlib
import inspect
import sqlite3
import subprocess
from collections.abc import AsyncGenerator, Generator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from hivegate.agents.model import AgentSpec
from hivegate.errors import StoreUnavailableError
from hivegate.settings import load_settings
from hivegate.storage import DatabaseLimits, open_storage
from hivegate.storage.sql.agents import SqlAgentStore
from hivegate.storage.sql.credentials import SqlCredentialStore
from hivegate.storage.sql.engine import SqlDatabase, SqlStore
from hivegate.storage.sql.oauth import SqlOAuthStore
from tests.read_only_file import read_only
from tests.storage.cleanup import clean_database
from tests.storage.time_bound import bounded
from tests.tcp_proxy import TcpProxy, running_proxy

LIMITS = DatabaseLimits(connect_timeout_seconds=1.0, statement_timeout_seconds=1.0, pool_timeout_seconds=1.0)
MARGIN_SECONDS = 3.0
"""Slack on top of the configured limits for a loaded test machine (the unbounded case took 85 s)."""


def _agent(agent_id: str) -> AgentSpec:
    return AgentSpec.model_validate(
        {"id": agent_id, "name": agent_id, "owner": "alice", "backend": {"type": "python", "callable": "m:f"}}
    )


@contextlib.contextmanager
def _sqlite_lock(path: Path, statement: str, *, exclusive_mode: bool = False) -> Generator[None]:
    """Hold a lock on the SQLite file at ``path`` from another connection for the block."""
    holder = sqlite3.connect(path, isolation_level=None, timeout=5)
    try:
        if exclusive_mode:
            holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute(statement)
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'faults.db'}"


@pytest.fixture
async def sqlite_store(sqlite_url: str) -> AsyncGenerator[SqlAgentStore]:
    storage = await open_storage(sqlite_url, LIMITS)
    store = storage.agents
    assert isinstance(store, SqlAgentStore)
    await store.apply([_agent("a")])
    try:
        yield store
    finally:
        await storage.close()


def _path(url: str) -> Path:
    return Path(make_url(url).database or "")


async def test_locked_sqlite_reads_and_writes_fail_within_the_statement_timeout(
    sqlite_url: str, sqlite_store: SqlAgentStore
) -> None:
    """Issue 7 item 5: a SQLite file another process holds exclusively: "database is locked" becomes 503, bounded.

    (An open WAL connection keeps a shared lock on the ``-shm`` file, so the lock can only be taken
    while the stores hold no connection: their pools are emptied first, as after a restart.)
    """
    database = SqlDatabase(sqlite_url, LIMITS)  # migrated with the agent store; a second pool, as another replica's
    credentials = SqlCredentialStore(database)
    try:
        await sqlite_store.engine.dispose()
        with _sqlite_lock(_path(sqlite_url), "BEGIN EXCLUSIVE", exclusive_mode=True):
            for call in (sqlite_store.get("a"), sqlite_store.apply([_agent("b")]), credentials.get_user("usr_x")):
                with (
                    bounded(LIMITS.statement_timeout_seconds + MARGIN_SECONDS),
                    pytest.raises(StoreUnavailableError) as caught,
                ):
                    await call
                assert caught.value.code == "store_unavailable"
                assert caught.value.http_status == 503
                assert "locked" in caught.value.reason
                assert caught.value.database == sqlite_url
        stored = await sqlite_store.get("a")  # the lock is gone: the same store serves again
        assert stored is not None
    finally:
        await database.close()


async def test_sqlite_refusing_writes_fails_ping_but_serves_reads(sqlite_url: str, sqlite_store: SqlAgentStore) -> None:
    """Issue 7 item 5: /readyz's probe reports a database that answers reads but refuses writes."""
    await sqlite_store.ping()
    with _sqlite_lock(_path(sqlite_url), "BEGIN IMMEDIATE"):
        assert await sqlite_store.get("a") is not None  # WAL: readers are not blocked by the writer
        with bounded(2 + MARGIN_SECONDS), pytest.raises(StoreUnavailableError, match="locked"):
            await sqlite_store.ping()
        with pytest.raises(StoreUnavailableError):
            await sqlite_store.delete("a")
    await sqlite_store.ping()
    assert await sqlite_store.get("a") is not None  # the probe wrote nothing


async def test_read_only_sqlite_file_refuses_writes_with_store_unavailable(sqlite_url: str) -> None:
    """Issue 7 item 5: a read-only database file: reads served, writes and the ping are 503 ``store_unavailable``."""
    storage = await open_storage(sqlite_url, LIMITS)
    setup = storage.agents
    await setup.apply([_agent("a")])
    await storage.close()
    with read_only(_path(sqlite_url)):
        database = SqlDatabase(sqlite_url, LIMITS)  # a new process's connections, opened on the read-only file
        store = SqlAgentStore(database)
        try:
            assert await store.get("a") is not None
            with pytest.raises(StoreUnavailableError, match="readonly"):
                await store.ping()
            with pytest.raises(StoreUnavailableError, match="readonly"):
                await store.apply([_agent("b")])
        finally:
            await database.close()


async def test_exhausted_pool_is_store_unavailable_within_the_pool_timeout(sqlite_store: SqlAgentStore) -> None:
    """Issue 7 item 5: no free pooled connection within ``database.pool_timeout_seconds`` → 503, not a hang."""
    async with contextlib.AsyncExitStack() as held:
        for _ in range(15):  # SQLAlchemy's default pool: 5 connections + 10 overflow
            await held.enter_async_context(sqlite_store.engine.connect())
        with (
            bounded(LIMITS.pool_timeout_seconds + MARGIN_SECONDS),
            pytest.raises(StoreUnavailableError, match="pool exhausted"),
        ):
            await sqlite_store.get("a")
    assert await sqlite_store.get("a") is not None


def test_database_settings_give_the_store_limits() -> None:
    """Issue 7 item 5: the timeouts are settings of the ``database`` group."""
    settings = load_settings(
        database={"connect_timeout_seconds": 2, "statement_timeout_seconds": 3, "pool_timeout_seconds": 4}
    )
    assert settings.database.limits() == DatabaseLimits(2, 3, 4)
    assert load_settings().database.limits() == DatabaseLimits()


# -- PostgreSQL behind a proxy ----------------------------------------------------------------------


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> str:
    """The session's private PostgreSQL database (skipped without HIVEGATE_TEST_POSTGRES_URL)."""
    url = request.getfixturevalue("postgres_database_url")
    assert isinstance(url, str)
    return url


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[TcpProxy]:
    with running_proxy(make_url(postgres_url).port or 5432) as running:
        yield running


@pytest.fixture
async def proxied(postgres_url: str, proxy: TcpProxy) -> AsyncGenerator[str]:
    """``postgres_url`` through the proxy, with a password in it (trust auth ignores it; it must never show)."""
    async with clean_database(postgres_url):
        yield make_url(proxy.url_for(postgres_url)).set(password="hunter2-secret").render_as_string(hide_password=False)


def _assert_names_database(error: StoreUnavailableError, proxy: TcpProxy) -> None:
    assert f"127.0.0.1:{proxy.port}" in error.database
    assert "hunter2" not in str(error)
    assert "hunter2" not in error.database


@pytest.mark.postgres
async def test_postgres_refused_is_store_unavailable_at_once(proxied: str, proxy: TcpProxy) -> None:
    """Issue 7 item 5: PostgreSQL gone (connection refused): 503 ``store_unavailable`` without waiting."""
    storage = await open_storage(proxied, LIMITS)
    store = storage.agents
    try:
        await store.apply([_agent("a")])
        proxy.refuse()
        with bounded(MARGIN_SECONDS), pytest.raises(StoreUnavailableError) as caught:
            await store.get("a")
        _assert_names_database(caught.value, proxy)
        with bounded(MARGIN_SECONDS), pytest.raises(StoreUnavailableError):
            await open_storage(proxied, LIMITS)  # start-up: the migration cannot connect
        proxy.forward()
        assert await store.get("a") is not None  # recovers once the database is back
    finally:
        await storage.close()


@pytest.mark.postgres
async def test_postgres_that_does_not_answer_fails_within_the_limits(proxied: str, proxy: TcpProxy) -> None:
    """Issue 7 item 5: PostgreSQL stops answering (accepts, never replies): bounded failure, not 85 s or never."""
    storage = await open_storage(proxied, LIMITS)
    store = storage.agents
    credentials = storage.credentials
    try:
        await store.apply([_agent("a")])
        await credentials.get_user("usr_x")  # a pooled connection exists on both stores
        proxy.blackhole()
        bound = LIMITS.connect_timeout_seconds + 2 * (LIMITS.statement_timeout_seconds + 1) + MARGIN_SECONDS
        for call in (store.get("a"), credentials.get_user("usr_x"), store.ping()):
            with bounded(bound), pytest.raises(StoreUnavailableError) as caught:
                await call
            _assert_names_database(caught.value, proxy)
        with bounded(LIMITS.connect_timeout_seconds + MARGIN_SECONDS), pytest.raises(StoreUnavailableError):
            await open_storage(proxied, LIMITS)  # start-up against a database that never answers
        proxy.forward()
        assert await store.get("a") is not None
    finally:
        await storage.close()


@pytest.mark.parametrize("store_class", [SqlAgentStore, SqlCredentialStore, SqlOAuthStore])
def test_every_public_store_method_reports_database_failures(store_class: type[SqlStore]) -> None:
    """Issue 7 item 5: the translation sits at the storage layer, on every public coroutine method
    (a method added later is covered too: :class:`SqlStore` wraps them when the class is defined)."""
    methods = [
        name
        for name, member in vars(store_class).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    ]
    assert "ping" in methods
    assert len(methods) > 5  # the store's data methods (``close`` moved to ``Storage``: issue 8 item 6)
    for name in methods:
        assert getattr(vars(store_class)[name], "__wrapped__", None) is not None, name


@contextlib.contextmanager
def _tiny_filesystem(folder: Path) -> Generator[Path]:
    """A 1 MiB tmpfs at ``folder`` (needs root; skipped elsewhere), unmounted afterwards."""
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root) to fill a disk")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


async def test_full_disk_is_store_unavailable(tmp_path: Path) -> None:
    """Issue 7 item 5: "database or disk is full" on a write is 503 ``store_unavailable``; reads go on."""
    with _tiny_filesystem(tmp_path / "tiny") as folder:
        url = f"sqlite+aiosqlite:///{folder / 'full.db'}"
        storage = await open_storage(url, LIMITS)
        credentials = storage.credentials
        try:
            user = await credentials.create_user("alice", "hash")
            with (folder / "filler").open("wb") as filler, contextlib.suppress(OSError):
                while True:  # until the file system is full
                    filler.write(b"\0" * 65536)
                    filler.flush()
            with pytest.raises(StoreUnavailableError, match="full"):
                await credentials.create_user("bob", "h" * 300_000)  # needs pages the disk no longer has
            assert await credentials.get_user(user.id) == user
        finally:
            await storage.close()
