"""The registry's SQL schema as SQLAlchemy Core tables.

The tables mirror the Alembic migrations in ``migrations/versions`` (a test compares
them); change both together, never one alone. The spec rules both stores share
(``encode_spec``, ``plan_apply``, ...) live with the protocol, in :mod:`hivegate.storage.agents`.

``agents``
    One row per agent id ever stored. ``spec`` is the canonical JSON text of the
    spec (see :func:`encode_spec`); ``revision`` is the registry revision that last
    wrote the row (created, updated or deleted it); ``deleted_at`` is NULL for a live
    agent and set for a tombstone, which keeps the id for ``changes_since``.
``registry_state``
    Exactly one row (``id = 1``) holding the registry ``revision``; writers lock it
    (``SELECT ... FOR UPDATE`` on PostgreSQL) so revisions are handed out one at a time.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime, Dialect, Integer, MetaData, Table, Text, TypeDecorator
from sqlalchemy.sql.elements import KeyedColumnElement

__all__ = [
    "REGISTRY_STATE_ID",
    "UtcDateTime",
    "agents",
    "metadata",
    "record_columns",
    "record_values",
    "registry_state",
]

REGISTRY_STATE_ID = 1
"""The primary key of the single ``registry_state`` row."""


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp stored as UTC and always read back as an aware UTC ``datetime``.

    PostgreSQL stores ``timestamptz``; SQLite has no time zones and keeps the naive
    UTC wall time, which this type re-labels as UTC on the way out.

    Raises:
        ValueError: on binding a naive ``datetime`` (its zone would be a guess).
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("UtcDateTime needs an aware datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    @staticmethod
    def sqlite_text(value: datetime | None) -> str | None:
        """What :meth:`process_bind_param` and SQLAlchemy's SQLite ``DATETIME`` together bind (the naive
        UTC time as ``YYYY-MM-DD HH:MM:SS.ffffff``), in one C call: the bind of the hand-compiled
        statements (:func:`hivegate.storage.sql.engine.execute_many`).

        Raises:
            ValueError: a naive ``datetime``.
        """
        if value is None:
            return None
        zone = value.tzinfo
        if zone is UTC:  # "…+00:00" without its offset: one C call
            return value.isoformat(" ", "microseconds")[:-6]
        if zone is None:
            raise ValueError("UtcDateTime needs an aware datetime")
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = MetaData()

agents = Table(
    "agents",
    metadata,
    Column("id", Text, primary_key=True),
    Column("spec", Text, nullable=False),
    Column("revision", Integer, nullable=False, index=True),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("deleted_at", UtcDateTime, nullable=True),
)

registry_state = Table(
    "registry_state",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("revision", Integer, nullable=False),
)


def record_columns(table: Table, record: type[Any]) -> tuple[KeyedColumnElement[Any], ...]:
    """The columns of ``table`` named like the fields of the dataclass ``record``, in field order,
    so that ``record(*row)`` builds the record from a row selected with them.

    Raises:
        KeyError: when a field has no column of its name (the table no longer mirrors the record).
    """
    return tuple(table.c[field.name] for field in fields(record))


def record_values(record: Any) -> dict[str, Any]:
    """The dataclass ``record``'s fields as insert values for a table whose columns are named like them."""
    return {field.name: getattr(record, field.name) for field in fields(record)}
