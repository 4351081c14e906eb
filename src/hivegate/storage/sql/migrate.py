"""Schema migrations: bring a registry database to the newest schema with Alembic, configured in code.

The migration scripts ship inside the package (``hivegate/storage/migrations``), so
no ``alembic.ini`` is needed at runtime.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text

from hivegate.storage.sql.engine import (
    DEFAULT_LIMITS,
    WRITE_TRANSACTION_OPTION,
    DatabaseLimits,
    SqlDatabase,
    settle_sqlite_threads,
    store_unavailable,
)

__all__ = ["SCRIPT_LOCATION", "alembic_config", "migrate", "upgrade"]

SCRIPT_LOCATION = Path(__file__).with_name("migrations")
"""The folder holding ``env.py`` and ``versions/``."""

_MIGRATION_LOCK_KEY = int.from_bytes(b"hivegate")
"""PostgreSQL advisory lock key serializing migrations of concurrently starting gateways."""


def alembic_config(url: str | None = None) -> Config:
    """An Alembic ``Config`` for the registry's migrations, without an ini file.

    Args:
        url: set as the ``sqlalchemy.url`` main option, for running ``alembic``
            commands (such as ``revision --autogenerate``) from code; :func:`upgrade`
            passes its connection instead.
    """
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    config.set_main_option("path_separator", "os")
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))  # ConfigParser interpolation
    return config


async def migrate(database: SqlDatabase, revision: str = "head") -> None:
    """Migrate ``database`` to ``revision`` (default: the newest), in one transaction on its engine.

    Idempotent: a database already at ``revision`` is left as it is. Concurrent
    callers are serialized (PostgreSQL: an advisory transaction lock; SQLite:
    ``BEGIN IMMEDIATE``), so gateways starting together do not race. Each migration statement
    is bounded by the database's ``statement_timeout_seconds`` (raise it for a long migration).

    Raises:
        StoreUnavailableError: when the database is unreachable, does not answer in time, or
            a migration fails on a database error (nothing is applied; both backends have
            transactional DDL here). The pool is closed first; the failure is not logged
            (the caller reports it, as one line).
        alembic.util.CommandError: for an unknown ``revision``.
    """
    engine = database.engine
    try:
        async with engine.connect() as connection:
            await connection.execution_options(**{WRITE_TRANSACTION_OPTION: True})
            async with connection.begin():
                if connection.dialect.name == "postgresql":
                    await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
                await connection.run_sync(_upgrade, revision)
    except Exception as exc:
        error = store_unavailable(exc, database.name)
        if error is None or error is exc:
            raise
        await database.close()
        if engine.dialect.name == "sqlite":
            await settle_sqlite_threads()
        raise error from exc


async def upgrade(url: str, revision: str = "head", *, limits: DatabaseLimits = DEFAULT_LIMITS) -> None:
    """:func:`migrate` the database at ``url`` on an engine of its own, closed afterwards (tools and tests;
    the gateway migrates on the engine its stores use, :func:`hivegate.storage.open_storage`).

    Raises:
        StoreUnavailableError, alembic.util.CommandError: as :func:`migrate`.
    """
    database = SqlDatabase(url, limits)
    try:
        await migrate(database, revision)
    finally:
        await database.close()


def _upgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)
