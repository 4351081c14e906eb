"""Issue 9 item 4 with issue 7 item 5: a database that fails under the A2A task stores is one
``StoreUnavailableError`` (503 ``store_unavailable``), within bounded time, and the stores recover.

Real failures: a SQLite file locked by another connection, PostgreSQL behind the loopback proxy
(``tests/tcp_proxy.py``) refusing connections.
"""

from __future__ import annotations

import inspect
import sqlite3
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import ListTasksRequest, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict
from sqlalchemy.engine import make_url

from hivegate.errors import StoreUnavailableError
from hivegate.storage import DatabaseLimits, Storage, open_storage
from hivegate.storage.sql.engine import SqlStore
from hivegate.storage.sql.tasks import SqlA2ATasks, SqlTaskStore
from hivegate.storage.tasks import GatewayTaskStore
from tests.storage.cleanup import clean_database
from tests.storage.time_bound import bounded
from tests.tcp_proxy import TcpProxy, running_proxy

LIMITS = DatabaseLimits(connect_timeout_seconds=1.0, statement_timeout_seconds=1.0, pool_timeout_seconds=1.0)
MARGIN_SECONDS = 3.0
OWNER = "usr_alice/echo"


def _context(_: ServerCallContext) -> str:
    return OWNER


def _task(task_id: str = "t-1") -> Task:
    return Task(id=task_id, context_id="c-1", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))


def _every_call(storage: Storage, store: GatewayTaskStore) -> list[Callable[[], Awaitable[object]]]:
    context = ServerCallContext()
    return [
        lambda: store.save(_task("t-2"), context),
        lambda: store.save_rendered(_task("t-3"), MessageToDict(_task("t-3")), context),
        lambda: store.get("t-1", context),
        lambda: store.list(ListTasksRequest(), context),
        lambda: store.delete("t-1", context),
        lambda: storage.tasks.purge_expired(datetime.now(UTC)),
    ]


@pytest.mark.parametrize("store_class", [SqlTaskStore, SqlA2ATasks])
def test_every_public_task_store_method_reports_database_failures(store_class: type[SqlStore]) -> None:
    methods = [
        name
        for name, member in vars(store_class).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    ]
    assert methods
    for name in methods:
        assert getattr(vars(store_class)[name], "__wrapped__", None) is not None, name
    if store_class is SqlTaskStore:
        assert sorted(methods) == ["delete", "get", "list", "save", "save_rendered"]


@pytest.fixture
async def sqlite_storage(tmp_path: Path) -> AsyncGenerator[tuple[Path, Storage]]:
    path = tmp_path / "tasks.db"
    storage = await open_storage(f"sqlite+aiosqlite:///{path}", LIMITS)
    try:
        yield path, storage
    finally:
        await storage.close()


async def test_locked_sqlite_is_store_unavailable_within_the_statement_timeout(
    sqlite_storage: tuple[Path, Storage],
) -> None:
    path, storage = sqlite_storage
    store = storage.tasks.open(_context)
    await store.save(_task(), ServerCallContext())
    tasks = storage.tasks
    assert isinstance(tasks, SqlA2ATasks)
    # An open WAL connection keeps a shared lock on the -shm file: empty the pool first, as after a restart.
    await tasks.release_connections()
    holder = sqlite3.connect(path, isolation_level=None, timeout=5)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        for call in _every_call(storage, store):
            with bounded(LIMITS.statement_timeout_seconds + MARGIN_SECONDS), pytest.raises(StoreUnavailableError):
                await call()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert await store.get("t-1", ServerCallContext()) == _task()  # recovers, nothing half-written


@pytest.fixture
def proxy(request: pytest.FixtureRequest) -> Iterator[tuple[str, TcpProxy]]:
    url = request.getfixturevalue("postgres_database_url")
    assert isinstance(url, str)
    with running_proxy(make_url(url).port or 5432) as running:
        yield url, running


@pytest.mark.postgres
async def test_postgres_refused_is_store_unavailable_and_recovers(proxy: tuple[str, TcpProxy]) -> None:
    url, tcp = proxy
    async with clean_database(url):
        storage = await open_storage(tcp.url_for(url), LIMITS)
        try:
            store = storage.tasks.open(_context)
            await store.save(_task(), ServerCallContext())
            tcp.refuse()
            for call in _every_call(storage, store):
                with bounded(MARGIN_SECONDS), pytest.raises(StoreUnavailableError) as caught:
                    await call()
                assert f"127.0.0.1:{tcp.port}" in caught.value.database
            tcp.forward()
            assert await store.get("t-1", ServerCallContext()) == _task()
            assert await store.get("t-2", ServerCallContext()) is None
        finally:
            await storage.close()
