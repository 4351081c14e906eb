"""The registry's SQL schema as SQLAlchemy Core tables, and the spec rules every store shares.

The tables mirror the Alembic migrations in ``migrations/versions`` (a test compares
them); change both together, never one alone.

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

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime, Dialect, Integer, MetaData, Table, Text, TypeDecorator

from hivegate.agents.model import AgentSpec
from hivegate.storage.base import ApplyReport

__all__ = [
    "REGISTRY_STATE_ID",
    "UtcDateTime",
    "agents",
    "decode_spec",
    "encode_spec",
    "metadata",
    "plan_apply",
    "registry_state",
    "require_unique_ids",
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


def encode_spec(spec: AgentSpec) -> str:
    """The canonical JSON text of ``spec``: ``model_dump(mode="json", by_alias=True)``, keys sorted, compact.

    Two specs are the same for the registry exactly when their texts are equal, so
    every store compares specs through this function (``1`` and ``true`` in a JSON
    schema differ here, although they compare equal as Python values).
    """
    document: dict[str, Any] = spec.model_dump(mode="json", by_alias=True)
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def decode_spec(text: str) -> AgentSpec:
    """The spec stored as ``text`` by :func:`encode_spec`.

    Raises:
        pydantic.ValidationError: when the stored document no longer validates
            (a model change without a data migration).
    """
    return AgentSpec.model_validate_json(text)


def require_unique_ids(specs: Sequence[AgentSpec]) -> None:
    """Check that no two of ``specs`` share an id, before a store writes any of them.

    Raises:
        ValueError: naming the duplicated ids.
    """
    duplicates = sorted(agent_id for agent_id, n in Counter(spec.id for spec in specs).items() if n > 1)
    if duplicates:
        raise ValueError(f"duplicate agent ids in one apply: {duplicates}")


def plan_apply(texts: Mapping[str, str], stored: Mapping[str, str | None], *, prune: bool) -> ApplyReport:
    """What an ``apply`` of ``texts`` does to ``stored``, before anything is written.

    Args:
        texts: id → :func:`encode_spec` text of each spec to apply, in the caller's order.
        stored: id → stored text of every stored id that ``texts`` names (and, with
            ``prune``, of every live id); None marks a tombstone.
        prune: delete live ids that ``texts`` does not name.

    Returns:
        The report with ``revision`` 0: ``created``/``updated``/``unchanged`` in the
        order of ``texts`` (a tombstoned id counts as created), ``deleted`` sorted.
    """
    created = tuple(i for i in texts if stored.get(i) is None)
    updated = tuple(i for i, text in texts.items() if stored.get(i) not in (None, text))
    unchanged = tuple(i for i, text in texts.items() if stored.get(i) == text)
    deleted = tuple(sorted(i for i, text in stored.items() if prune and text is not None and i not in texts))
    return ApplyReport(created=created, updated=updated, unchanged=unchanged, deleted=deleted)
