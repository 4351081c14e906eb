"""SQL engines for the stores: driver set-up, time limits, and the one translation of database failures.

The SQL stores (``SqlAgentStore``, ``SqlCredentialStore``, ``SqlOAuthStore``) share one
:class:`SqlDatabase` (one engine, one pool) and derive from :class:`SqlStore`, which wraps each
public coroutine method of the store class so that a failure of the database raises one
:class:`~hivegate.errors.StoreUnavailableError` (503 ``store_unavailable`` on every wire plane):
a refused or dropped connection, no answer within a time limit, an exhausted connection pool,
SQLite's "database is locked", a read-only or full disk, any other driver error. ``IntegrityError``
is left alone: the stores turn it into their own errors (a duplicate id, a taken username), and one
that escapes is a bug, not an outage.

Time limits (:class:`DatabaseLimits`, the ``database.*_timeout_seconds`` settings):

=================  ==============================================  ==========================================
limit              PostgreSQL (asyncpg)                            SQLite (aiosqlite)
=================  ==============================================  ==========================================
connect            ``timeout`` of ``asyncpg.connect``               (a local file: not needed)
statement          server ``statement_timeout``, and the client's  busy timeout: how long a statement waits
                   ``command_timeout`` one second later (for a      for another connection's lock
                   server that does not answer at all)
pool               ``pool_timeout``: waiting for a free connection  the same
=================  ==============================================  ==========================================

A store call therefore fails within about pool + connect + statements × (statement + 1) seconds,
plus up to 2 s for SQLAlchemy to close a PostgreSQL connection that stopped answering.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import inspect
import logging
import operator
import sqlite3
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

import anyio.to_thread
from sqlalchemy import Connection, Engine, Row, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from hivegate.errors import StoreUnavailableError

__all__ = [
    "DEFAULT_LIMITS",
    "WRITE_TRANSACTION_OPTION",
    "DatabaseLimits",
    "SqlDatabase",
    "SqlStore",
    "create_sql_engine",
    "describe_database",
    "execute_many",
    "fetch_first",
    "settle_sqlite_threads",
    "store_unavailable",
]

logger = logging.getLogger(__name__)

WRITE_TRANSACTION_OPTION = "hivegate_write"
"""Connection execution option marking a write transaction (SQLite: ``BEGIN IMMEDIATE``)."""

CLIENT_TIMEOUT_MARGIN_SECONDS = 1.0
"""PostgreSQL: the client gives up this long after the server's ``statement_timeout`` would have fired."""

LOOP_CHECKPOINT_EVERY = 32
"""SQLite: a WAL checkpoint starts in the worker thread after this many write transactions committed on
the event loop (:meth:`SqlDatabase.run_write`; SQLite's own automatic checkpoint, off on the loop's
connection, comes at about 1,000 pages)."""

WAL_RESTART_FRAMES = 1024
"""SQLite: once a checkpoint beside the loop's writes finds this many frames in the WAL (4 MiB at 4 KiB
pages), the WAL is made to start over (:meth:`SqlDatabase._checkpoint_beside`)."""

CHECKPOINT_FINISH_COMMITS = 4
"""SQLite: a WAL checkpoint beside the loop's writes is repeated until at most this many commits came in
during one; the batch after it then finishes the checkpoint with no write running."""

PROBE_TIMEOUT_SECONDS = 1.0
"""How long the readiness write probe (:meth:`SqlStore._probe_write`) may wait for a lock."""

FAULT_LOG_INTERVAL_SECONDS = 10.0
"""A store logs a database failure at most once per this interval (an outage fails every request)."""

_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg"}

_FAILURES = (SQLAlchemyError, OSError, TimeoutError, sqlite3.Error)
"""What a database failure can surface as: SQLAlchemy's wrappers, socket errors the drivers raise
unwrapped while connecting, asyncpg's ``command_timeout`` (a bare ``TimeoutError``), sqlite3's own."""

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class DatabaseLimits:
    """How long the stores wait for the database, in seconds (see the module docstring for the mapping),
    and how durable a SQLite commit is (``sqlite_synchronous``, the ``database.sqlite_synchronous`` setting).

    ``sqlite_synchronous`` is SQLite's ``PRAGMA synchronous`` in WAL mode: ``"normal"`` (the default)
    syncs the write-ahead log at checkpoints, not at every commit: a committed transaction survives
    the process being killed at any point, and the database stays consistent after a power loss or
    an operating-system crash, which may undo the last commits before it. ``"full"`` syncs at every
    commit, so those survive too, at the cost of one ``fsync`` per write transaction (measured on
    this project's machines: 3.5 ms of wall time and 270 µs of CPU per commit, against 0.12 ms and
    43 µs; ``docs/performance.md``). Spec: https://sqlite.org/pragma.html#pragma_synchronous.
    """

    connect_timeout_seconds: float = 5.0
    statement_timeout_seconds: float = 10.0
    pool_timeout_seconds: float = 5.0
    sqlite_synchronous: Literal["normal", "full"] = "normal"


DEFAULT_LIMITS = DatabaseLimits()


def create_sql_engine(url: str, limits: DatabaseLimits = DEFAULT_LIMITS) -> AsyncEngine:
    """An async engine for ``url``, set up the way the stores need it.

    Args:
        url: ``sqlite+aiosqlite:///relative/or//absolute/path.db`` or
            ``postgresql+asyncpg://user@host:port/db``; the bare ``sqlite://`` and
            ``postgresql://`` schemes get those async drivers.
        limits: connect, statement and pool timeouts (module docstring).

    SQLite: the file's parent folder is created if missing; every connection gets WAL
    journaling, ``PRAGMA synchronous`` of ``limits.sqlite_synchronous``, foreign keys and a busy
    timeout of ``limits.statement_timeout_seconds``, and
    SQLAlchemy (not the driver) emits ``BEGIN`` (``BEGIN IMMEDIATE`` for write transactions).
    PostgreSQL: connections are pinged when checked out of the pool.

    Raises:
        sqlalchemy.exc.ArgumentError: when ``url`` cannot be parsed.
        ValueError: for an in-memory SQLite URL (each connection would see its own database).
    """
    parsed = _with_async_driver(make_url(url))
    statement = limits.statement_timeout_seconds
    if parsed.get_backend_name() != "sqlite":
        connect_args = {
            "timeout": limits.connect_timeout_seconds,
            "command_timeout": statement + CLIENT_TIMEOUT_MARGIN_SECONDS,
            "server_settings": {"statement_timeout": str(round(statement * 1000))},
        }
        return create_async_engine(
            parsed, connect_args=connect_args, pool_pre_ping=True, pool_timeout=limits.pool_timeout_seconds
        )
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:") or parsed.query.get("mode") == "memory":
        raise ValueError(f"a SQL store needs a SQLite file, not an in-memory database: {url!r}")
    Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(parsed, connect_args={"timeout": statement}, pool_timeout=limits.pool_timeout_seconds)
    on_connect = functools.partial(_on_sqlite_connect, round(statement * 1000), limits.sqlite_synchronous.upper())
    event.listen(engine.sync_engine, "connect", on_connect)
    event.listen(engine.sync_engine, "begin", _on_sqlite_begin)
    return engine


async def settle_sqlite_threads(timeout_seconds: float = 1.0) -> None:
    """Wait (bounded) for aiosqlite's worker threads to end, before the caller's event loop closes.

    A failed ``aiosqlite.connect`` queues its own clean-up on its worker thread without awaiting
    it; if the loop has closed by then (a CLI command ending on that very failure), the thread
    dies printing a traceback. Call this after a SQLite failure once the engine is disposed.
    """
    for thread in threading.enumerate():
        if thread.name.endswith("(_connection_worker_thread)"):
            await anyio.to_thread.run_sync(thread.join, timeout_seconds)


@dataclass(frozen=True, slots=True)
class _DriverPlan:
    """A statement compiled once for SQLite: its SQL, its parameters' names in order, their bind processors."""

    statement: Any  # kept so the id it is cached under is not reused
    sql: str
    names: tuple[str, ...]
    values: Callable[[Mapping[str, Any]], Any]
    """A row's values in parameter order (``operator.itemgetter`` of ``names``: a tuple when it names two or more)."""
    processed: tuple[tuple[int, Callable[[Any], Any]], ...]
    """The parameters with a bind processor: (position, processor)."""


_DRIVER_PLANS: dict[tuple[int, tuple[str, ...]], _DriverPlan] = {}


def _row_values(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], Any]:
    """What takes a row's values in the order of ``names`` (a tuple)."""
    if len(names) > 1:
        return operator.itemgetter(*names)
    if names:
        only = names[0]
        return lambda row: (row[only],)
    return lambda _row: ()


def execute_many(conn: Connection, statement: Any, rows: Sequence[Mapping[str, Any]]) -> int:
    """Execute ``statement`` (Core, no ``RETURNING``) once per row of ``rows`` (each with the same keys) in
    ``conn``'s transaction; returns the rows changed (-1 when the driver does not say).

    On SQLite the statement, compiled once per set of keys, goes to the driver cursor's ``executemany``
    with the columns' bind processors applied (what ``conn.execute`` does, without its per-execution
    set-up: about 100 µs a statement on this project's machines, most of a group-committed batch's
    cost); elsewhere it is ``conn.execute``. For the group-committed writers (:meth:`SqlDatabase.run_write`).
    """
    if not rows:
        return 0
    if conn.dialect.name != "sqlite":
        return conn.execute(statement, list(rows)).rowcount
    keys = tuple(rows[0])
    plan = _DRIVER_PLANS.get((id(statement), keys))
    if plan is None or plan.statement is not statement:
        compiled = statement.compile(dialect=conn.dialect, column_keys=list(keys))
        names = tuple(compiled.positiontup or ())
        processors = [_sqlite_bind(compiled.binds[name].type, conn.dialect) for name in names]
        processed = tuple((at, process) for at, process in enumerate(processors) if process is not None)
        values = _row_values(names)
        plan = _DRIVER_PLANS[(id(statement), keys)] = _DriverPlan(statement, compiled.string, names, values, processed)
    params: list[Any] = []
    for row in rows:
        bound = plan.values(row)
        if plan.processed:
            bound = list(bound)
            for at, process in plan.processed:
                bound[at] = process(bound[at])
        params.append(bound)
    cursor = conn.connection.driver_connection.cursor()  # pyright: ignore[reportOptionalMemberAccess]
    try:
        cursor.executemany(plan.sql, params)
        return cursor.rowcount
    finally:
        cursor.close()


def fetch_first(conn: Connection, statement: Any, params: Mapping[str, Any]) -> Any | None:
    """The first row of a ``SELECT`` with named bind parameters (``bindparam``), or None.

    On SQLite the statement, compiled once, goes to the driver cursor, with the bind processors and the
    selected columns' result processors applied by hand (as :func:`execute_many` does for writes): a
    primary-key read costs tens of microseconds instead of SQLAlchemy's per-execution set-up. The row
    is a named tuple of the selected columns' keys. Elsewhere it is ``conn.execute(...).first()``.
    For the reads of :meth:`SqlDatabase.run_read`; the statement must be built once, not per call.
    """
    if conn.dialect.name != "sqlite":
        return conn.execute(statement, dict(params)).first()
    plan = _READ_PLANS.get(id(statement))
    if plan is None or plan.statement is not statement:
        dialect = conn.dialect
        compiled = statement.compile(dialect=dialect)
        names = tuple(compiled.positiontup or ())
        binds = tuple(_sqlite_bind(compiled.binds[name].type, dialect) for name in names)
        columns = list(statement.selected_columns)
        results = tuple(column.type.dialect_impl(dialect).result_processor(dialect, None) for column in columns)
        row = collections.namedtuple("Row", [column.key for column in columns], rename=True)  # pyright: ignore[reportUntypedNamedTuple]
        plan = _READ_PLANS[id(statement)] = _ReadPlan(statement, compiled.string, names, binds, results, row)
    values = tuple(
        params[name] if process is None else process(params[name])
        for name, process in zip(plan.names, plan.binds, strict=True)
    )
    cursor = conn.connection.driver_connection.cursor()  # pyright: ignore[reportOptionalMemberAccess]
    try:
        found = cursor.execute(plan.sql, values).fetchone()
    finally:
        cursor.close()
    if found is None:
        return None
    return plan.row(
        *(value if process is None else process(value) for value, process in zip(found, plan.results, strict=True))
    )


def _sqlite_bind(type_: Any, dialect: Any) -> Callable[[Any], Any] | None:
    """The bind processor of a column type on SQLite: the type's own ``sqlite_text`` when it has one (a
    single C call instead of SQLAlchemy's chain of Python formatting), else SQLAlchemy's."""
    fast = getattr(type_, "sqlite_text", None)
    return fast if fast is not None else type_.dialect_impl(dialect).bind_processor(dialect)


@dataclass(frozen=True, slots=True)
class _ReadPlan:
    """A ``SELECT`` compiled once for SQLite: its SQL, its parameters' names and bind processors, its
    columns' result processors, and the named tuple of its rows."""

    statement: Any  # kept so the id it is cached under is not reused
    sql: str
    names: tuple[str, ...]
    binds: tuple[Callable[[Any], Any] | None, ...]
    results: tuple[Callable[[Any], Any] | None, ...]
    row: Any


_READ_PLANS: dict[int, _ReadPlan] = {}


def describe_database(url: URL) -> str:
    """``url`` as it may be printed or logged: the password masked (``***``)."""
    return url.render_as_string(hide_password=True)


def store_unavailable(exc: BaseException, database: str) -> StoreUnavailableError | None:
    """The :class:`StoreUnavailableError` for a database failure ``exc``; None when ``exc`` is not one.

    ``reason`` is one line naming the cause (the driver's message, never the SQL or its parameters).
    """
    if isinstance(exc, StoreUnavailableError):
        return exc
    if isinstance(exc, IntegrityError) or not isinstance(exc, _FAILURES):
        return None
    return StoreUnavailableError(database=database, reason=_reason(exc))


class SqlDatabase:
    """One database: its engine (one pool for every store), its printable name, and the one
    translation of its failures into :class:`~hivegate.errors.StoreUnavailableError`.

    Building it connects nothing and migrates nothing (:func:`hivegate.storage.sql.migrate.migrate`
    does, :func:`hivegate.storage.open_storage` runs both).

    Args:
        url: a database URL, as for :func:`create_sql_engine`.
        limits: the time limits of its engine.

    Raises:
        sqlalchemy.exc.ArgumentError: when ``url`` cannot be parsed.
        ValueError: for an in-memory SQLite URL.
    """

    def __init__(self, url: str, limits: DatabaseLimits = DEFAULT_LIMITS) -> None:
        self.engine = create_sql_engine(url, limits)
        self.limits = limits
        self.name = describe_database(self.engine.url)
        """The database URL without its password."""
        self._quiet_until = 0.0
        self._batch_engine: Engine | None = None
        self._batch_limiter: anyio.CapacityLimiter | None = None
        self._loop_engine: Engine | None = None
        self._loop_conn: Connection | None = None
        self._loop_commits = 0
        self._checkpoint: asyncio.Task[None] | None = None
        self._finish_checkpoint = False

    async def run_write(self, write: Callable[[Connection], R]) -> R:
        """Run ``write`` (synchronous SQLAlchemy Core on the connection it is given) in one write
        transaction; it commits when ``write`` returns and rolls back when it raises.

        For the group-committed writers (:mod:`hivegate.storage.sql.group_commit`), whose batches must
        cost little however many statements they hold.

        - SQLite with ``synchronous = NORMAL`` (the default): the transaction runs on the event loop, on a
          connection of its own that never waits for a lock (``busy_timeout = 0``) and never checkpoints
          (a commit then only appends to the WAL, no ``fsync``: tens of microseconds, less than the
          hand-off to a thread it saves). When another connection holds the write lock, the attempt
          rolls back at once and the transaction runs in a worker thread instead, which waits for the
          lock up to the statement timeout. Every :data:`LOOP_CHECKPOINT_EVERY` commits on the loop, a
          ``PRAGMA wal_checkpoint(PASSIVE)`` runs in the worker thread beside the loop's writes (the
          ``fsync`` stays off the loop). Once the WAL holds :data:`WAL_RESTART_FRAMES` frames, the next
          batch runs in the thread and is followed there by a last checkpoint, with no batch written
          meanwhile, so it completes and the next commit starts the WAL over
          (:meth:`_checkpoint_beside`).
        - SQLite with ``synchronous = FULL`` (an ``fsync`` per commit): always the worker thread.
        - Either way, one worker thread at a time, on a connection of its own set up as the engine's
          (WAL, ``synchronous``, foreign keys, busy timeout, ``BEGIN IMMEDIATE``).
        - PostgreSQL: on a pooled connection, through ``AsyncConnection.run_sync``.

        ``write`` may run twice (rolled back on the loop, then in the thread): it must not act outside
        the transaction.

        Raises:
            Exception: what ``write`` or the driver raised (the stores translate database failures).
        """
        if self.engine.dialect.name != "sqlite":
            async with self.engine.connect() as conn:
                await conn.execution_options(**{WRITE_TRANSACTION_OPTION: True})
                async with conn.begin():
                    return await conn.run_sync(write)
        on_loop = self.limits.sqlite_synchronous == "normal"
        finish = on_loop and self._finish_checkpoint
        if on_loop and not finish:
            conn = self._loop_connection()
            try:
                with conn.begin():
                    written = write(conn)
            except OperationalError as exc:
                if not _is_busy(exc):
                    raise
            else:
                self._after_loop_commit()
                return written
        engine, limiter = self._thread_engine()

        def transaction() -> R:
            with engine.connect().execution_options(**{WRITE_TRANSACTION_OPTION: True}) as conn:
                with conn.begin():
                    written = write(conn)
                if finish:
                    _checkpoint_wal(conn)
                return written

        written = await anyio.to_thread.run_sync(transaction, limiter=limiter)
        if finish:
            self._finish_checkpoint = False
            self._loop_commits = 0
        return written

    def _after_loop_commit(self) -> None:
        """Count a commit on the loop; every :data:`LOOP_CHECKPOINT_EVERY`, start checkpointing the WAL in
        the worker thread (:meth:`_checkpoint_beside`)."""
        self._loop_commits += 1
        running = self._checkpoint
        if running is not None and running.get_loop() is not asyncio.get_running_loop():
            running = self._checkpoint = None  # left by an event loop that has ended
        if self._loop_commits >= LOOP_CHECKPOINT_EVERY and running is None and not self._finish_checkpoint:
            self._checkpoint = asyncio.get_running_loop().create_task(
                self._checkpoint_beside(), name="hivegate-sqlite-checkpoint"
            )

    async def _checkpoint_beside(self) -> None:
        """``wal_checkpoint(PASSIVE)`` in the worker thread while the loop goes on writing: it copies the
        WAL's committed pages into the database file, but cannot finish while commits come in, so the WAL
        file only grows. Once it holds :data:`WAL_RESTART_FRAMES` frames, the checkpoint is repeated (at
        most 8 times) until at most :data:`CHECKPOINT_FINISH_COMMITS` commits came in during one; then the
        next batch runs in the thread and checkpoints those few with no write running (:meth:`run_write`),
        so the checkpoint completes and the WAL starts over at the following commit. That batch waits for
        a checkpoint's ``fsync``, so it comes only when the WAL has grown. A failure is logged, and the
        next interval tries again."""
        engine, limiter = self._thread_engine()

        def checkpoint() -> int | None:
            with engine.connect() as conn:
                return _checkpoint_wal(conn)

        try:
            self._loop_commits = 0
            frames = await anyio.to_thread.run_sync(checkpoint, limiter=limiter)
            if frames is None or frames < WAL_RESTART_FRAMES:
                return
            for _ in range(8):
                if self._loop_commits <= CHECKPOINT_FINISH_COMMITS:
                    break
                self._loop_commits = 0
                await anyio.to_thread.run_sync(checkpoint, limiter=limiter)
            self._finish_checkpoint = True
        finally:
            self._checkpoint = None

    async def run_read(self, read: Callable[[Connection], R]) -> R:
        """Run ``read`` (synchronous SQLAlchemy Core, reads only) in one read transaction.

        For small reads on a call's path (a primary-key lookup). SQLite: on the event loop, on the
        connection :meth:`run_write` uses there (a WAL reader waits for no lock; should SQLite answer
        ``SQLITE_BUSY`` all the same, the read runs in the worker thread); PostgreSQL: on a pooled
        connection, through ``AsyncConnection.run_sync``.

        Raises:
            Exception: what ``read`` or the driver raised.
        """
        if self.engine.dialect.name != "sqlite":
            async with self.engine.connect() as conn:
                return await conn.run_sync(read)
        conn = self._loop_connection()
        try:
            return read(conn)
        except (OperationalError, sqlite3.OperationalError) as exc:  # the driver's own, from fetch_first
            if not _is_busy(exc):
                raise
        finally:
            if conn.in_transaction():  # a read through SQLAlchemy began one (fetch_first begins none)
                conn.rollback()
        engine, limiter = self._thread_engine()

        def transaction() -> R:
            with engine.connect() as conn:
                return read(conn)

        return await anyio.to_thread.run_sync(transaction, limiter=limiter)

    async def read_apart(self, read: Callable[[Connection], R]) -> R:
        """Run ``read`` (synchronous SQLAlchemy Core, reads only) on a connection of its own, for a long
        read (a scan) that must hold up neither the event loop nor the writes.

        SQLite: a new connection in a worker thread (not the writers' thread), closed afterwards; a WAL
        reader waits for no writer. PostgreSQL: a pooled connection, through ``AsyncConnection.run_sync``.

        Raises:
            Exception: what ``read`` or the driver raised.
        """
        if self.engine.dialect.name != "sqlite":
            async with self.engine.connect() as conn:
                return await conn.run_sync(read)
        timeout = self.limits.statement_timeout_seconds
        apart = create_engine(
            self.engine.url.set(drivername="sqlite+pysqlite"),
            poolclass=NullPool,
            connect_args={"timeout": timeout, "check_same_thread": False},
        )

        def run() -> R:
            try:
                with apart.connect() as conn:
                    return read(conn)
            finally:
                apart.dispose()

        return await anyio.to_thread.run_sync(run)

    def _loop_connection(self) -> Connection:
        """The SQLite connection of the event loop's writes and reads, opened once and kept (it never
        waits for a lock: :func:`_sqlite_loop_engine`)."""
        conn = self._loop_conn
        if conn is None or conn.closed or conn.invalidated:
            if self._loop_engine is None:
                self._loop_engine = _sqlite_loop_engine(self.engine, self.limits)
            conn = self._loop_conn = self._loop_engine.connect().execution_options(**{WRITE_TRANSACTION_OPTION: True})
        return conn

    def _close_loop_connection(self) -> None:
        conn, self._loop_conn = self._loop_conn, None
        if conn is not None:
            conn.close()
        if self._loop_engine is not None:
            self._loop_engine.dispose()

    def _thread_engine(self) -> tuple[Engine, anyio.CapacityLimiter]:
        """The SQLite worker thread's engine and the limiter that keeps it to one thread at a time."""
        if self._batch_engine is None or self._batch_limiter is None:
            self._batch_engine = _sqlite_batch_engine(self.engine, self.limits)
            self._batch_limiter = anyio.CapacityLimiter(1)
        return self._batch_engine, self._batch_limiter

    def unavailable(self, exc: BaseException) -> StoreUnavailableError | None:
        """:func:`store_unavailable` for this database; logs the first failure of an interval
        (:data:`FAULT_LOG_INTERVAL_SECONDS`: an outage fails every request of every store)."""
        error = store_unavailable(exc, self.name)
        if error is not None and error is not exc:
            now = time.monotonic()
            if now >= self._quiet_until:
                self._quiet_until = now + FAULT_LOG_INTERVAL_SECONDS
                logger.warning("%s", error)
        return error

    async def release_connections(self) -> None:
        """Close the idle connections of the pool and of the SQLite batch writer; later use opens new ones
        (so another process can take an exclusive lock on the SQLite file, as after a restart)."""
        await self.engine.dispose()
        self._close_loop_connection()
        if self._batch_engine is not None:
            await anyio.to_thread.run_sync(self._batch_engine.dispose, limiter=self._batch_limiter)

    async def close(self) -> None:
        """Close the pool's connections (and the SQLite batch writer's). Idempotent."""
        await self.engine.dispose()
        checkpoint, self._checkpoint = self._checkpoint, None
        if checkpoint is not None and checkpoint.get_loop() is asyncio.get_running_loop():
            with contextlib.suppress(Exception):
                await checkpoint
        self._close_loop_connection()
        self._loop_engine = None
        if self._batch_engine is not None:
            batch_engine, self._batch_engine = self._batch_engine, None
            await anyio.to_thread.run_sync(batch_engine.dispose)


class SqlStore:
    """Base of the SQL stores: works on a shared :class:`SqlDatabase`, and reports database failures as one error.

    Every public coroutine method a subclass defines is wrapped: a database failure raised in it
    (see the module docstring) becomes :class:`~hivegate.errors.StoreUnavailableError`, logged at
    most once per :data:`FAULT_LOG_INTERVAL_SECONDS` per database with the database and the cause.
    The store does not own the database: whoever built it closes it (:class:`hivegate.storage.Storage`).
    """

    def __init__(self, database: SqlDatabase) -> None:
        self._db = database
        self._engine = database.engine
        self._busy_timeout_ms = round(database.limits.statement_timeout_seconds * 1000)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, member in list(vars(cls).items()):
            if not name.startswith("_") and inspect.iscoroutinefunction(member):
                setattr(cls, name, _reporting_failures(member))

    @property
    def engine(self) -> AsyncEngine:
        """The shared engine (for event hooks and diagnostics; its :class:`SqlDatabase` disposes it)."""
        return self._engine

    @property
    def database(self) -> str:
        """The database URL without its password."""
        return self._db.name

    @property
    def sql_database(self) -> SqlDatabase:
        """The database this store works on."""
        return self._db

    async def release_connections(self) -> None:
        """:meth:`SqlDatabase.release_connections` of this store's database."""
        await self._db.release_connections()

    def unavailable(self, exc: BaseException) -> StoreUnavailableError | None:
        """:meth:`SqlDatabase.unavailable` of this store's database."""
        return self._db.unavailable(exc)

    @asynccontextmanager
    async def _write_transaction(self) -> AsyncGenerator[AsyncConnection]:
        """A write transaction (SQLite: ``BEGIN IMMEDIATE``); commits on exit, rolls back on error."""
        async with self._engine.connect() as conn:
            await conn.execution_options(**{WRITE_TRANSACTION_OPTION: True})
            async with conn.begin():
                yield conn

    async def _first(self, query: Any) -> Row[*tuple[Any, ...]] | None:
        """The first row of ``query`` (None when there is none), on a connection of its own."""
        async with self._engine.connect() as conn:
            return (await conn.execute(query)).first()

    async def _select_one(self) -> None:
        """``SELECT 1``: the database answers (the ``ping`` of the stores without a write probe)."""
        async with self._engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    async def _probe_write(self, conn: AsyncConnection, statement: Any) -> None:
        """Run ``statement`` (a write that changes nothing) in a write transaction on ``conn``, then roll back.

        Shows that the database accepts writes (not read-only, not locked by another connection,
        writes permitted) without changing anything. The probe waits at most
        :data:`PROBE_TIMEOUT_SECONDS` for a lock (PostgreSQL: ``SET LOCAL statement_timeout``;
        SQLite: the connection's busy timeout, restored afterwards).
        """
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            await conn.run_sync(_set_busy_timeout, round(PROBE_TIMEOUT_SECONDS * 1000))
        try:
            await conn.execution_options(**{WRITE_TRANSACTION_OPTION: True})
            transaction = await conn.begin()
            try:
                if not sqlite:
                    await conn.exec_driver_sql(f"SET LOCAL statement_timeout = {round(PROBE_TIMEOUT_SECONDS * 1000)}")
                await conn.execute(statement)
            finally:
                await transaction.rollback()
        finally:
            if sqlite:
                await conn.run_sync(_set_busy_timeout, self._busy_timeout_ms)


def _reporting_failures(
    method: Callable[Concatenate[SqlStore, P], Awaitable[R]],
) -> Callable[Concatenate[SqlStore, P], Awaitable[R]]:
    @functools.wraps(method)
    async def reporting(self: SqlStore, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(self, *args, **kwargs)
        except _FAILURES as exc:
            error = self.unavailable(exc)
            if error is None:
                raise
            raise error from exc

    return reporting


def _reason(exc: BaseException) -> str:
    """One line naming the cause of a database failure (the driver's message, not the SQL)."""
    if isinstance(exc, PoolTimeoutError):
        return "no free connection in the pool in time (pool exhausted)"
    if isinstance(exc, TimeoutError):
        return "the database did not answer in time"
    cause = exc.orig if isinstance(exc, DBAPIError) and isinstance(exc.orig, BaseException) else exc
    lines = str(cause).strip().splitlines()
    return lines[0] if lines else type(cause).__name__


def _with_async_driver(url: URL) -> URL:
    driver = _ASYNC_DRIVERS.get(url.drivername)
    return url.set(drivername=driver) if driver is not None else url


def _on_sqlite_connect(busy_timeout_ms: int, synchronous: str, dbapi_connection: Any, _record: Any) -> None:
    # The driver's own implicit BEGIN is off: _on_sqlite_begin emits BEGIN itself,
    # so reads are transactions too and writers can take the lock up front.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
    finally:
        cursor.close()


def _sqlite_batch_engine(engine: AsyncEngine, limits: DatabaseLimits) -> Engine:
    """A synchronous engine on ``engine``'s SQLite file with one connection, set up as ``engine``'s
    connections are (:func:`create_sql_engine`), used by one worker thread at a time
    (:meth:`SqlDatabase.run_write`)."""
    statement = limits.statement_timeout_seconds
    url = engine.url.set(drivername="sqlite+pysqlite")
    batch = create_engine(
        url,
        connect_args={"timeout": statement, "check_same_thread": False},
        pool_size=1,
        max_overflow=0,
        pool_timeout=limits.pool_timeout_seconds,
    )
    on_connect = functools.partial(_on_sqlite_connect, round(statement * 1000), limits.sqlite_synchronous.upper())
    event.listen(batch, "connect", on_connect)
    event.listen(batch, "begin", _on_sqlite_begin)
    return batch


def _sqlite_loop_engine(engine: AsyncEngine, limits: DatabaseLimits) -> Engine:
    """A synchronous engine on ``engine``'s SQLite file with one connection, for write transactions on the
    event loop (:meth:`SqlDatabase.run_write`): set up as ``engine``'s connections are, except that it
    never waits for a lock (``busy_timeout = 0``) and never checkpoints the WAL (``wal_autocheckpoint = 0``)."""
    url = engine.url.set(drivername="sqlite+pysqlite")
    loop = create_engine(
        url, connect_args={"timeout": 0, "check_same_thread": False}, pool_size=1, max_overflow=0, pool_timeout=0
    )
    on_connect = functools.partial(_on_sqlite_connect, 0, limits.sqlite_synchronous.upper())
    event.listen(loop, "connect", on_connect)
    event.listen(loop, "connect", _no_autocheckpoint)
    event.listen(loop, "begin", _on_sqlite_begin)
    return loop


def _checkpoint_wal(conn: Connection) -> int | None:
    """``PRAGMA wal_checkpoint(PASSIVE)`` on ``conn``'s driver connection, outside any transaction (it
    copies the WAL's committed pages into the database file and waits for no one).

    Returns:
        The frames in the WAL file; None when the checkpoint failed (logged; the next one tries again,
        and the commit before it stands).
    """
    try:
        cursor = conn.connection.driver_connection.execute("PRAGMA wal_checkpoint(PASSIVE)")  # pyright: ignore[reportOptionalMemberAccess]
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
    except sqlite3.Error as exc:
        logger.debug("SQLite WAL checkpoint failed: %s", exc)
        return None
    return None if row is None else int(row[1])


def _no_autocheckpoint(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA wal_autocheckpoint=0")
    finally:
        cursor.close()


def _is_busy(exc: OperationalError | sqlite3.OperationalError) -> bool:
    """Whether ``exc`` (SQLAlchemy's, or the driver's own) is SQLite's ``SQLITE_BUSY`` (another
    connection holds the lock)."""
    orig = exc.orig if isinstance(exc, OperationalError) else exc
    return isinstance(orig, sqlite3.OperationalError) and (
        getattr(orig, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, _SQLITE_BUSY_SNAPSHOT)
        or "database is locked" in str(orig)
    )


_SQLITE_BUSY_SNAPSHOT = 517
"""``SQLITE_BUSY_SNAPSHOT``: a WAL snapshot went stale under a write (an extended ``SQLITE_BUSY``)."""


def _set_busy_timeout(conn: Connection, milliseconds: int) -> None:
    """Set the SQLite connection's busy timeout (on the driver's connection: no transaction is begun)."""
    dbapi_connection: Any = conn.connection.dbapi_connection
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={int(milliseconds)}")
    finally:
        cursor.close()


def _on_sqlite_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get(WRITE_TRANSACTION_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
