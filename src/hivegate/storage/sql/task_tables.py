"""The A2A task table as a SQLAlchemy Core table on the registry's ``metadata``.

``tasks`` mirrors migration ``0007_a2a_tasks``, which mirrors a2a-sdk's ``TaskModel`` (tests compare
all three); change them together, never one alone. The SDK reads and lists rows through its own model;
hivegate writes them (:mod:`hivegate.storage.sql.tasks`) through this table, which adds ``saved_at``:
when the gateway last saved the row (the purge's clock).
"""

from __future__ import annotations

from sqlalchemy import JSON, Column, DateTime, Index, String, Table

from hivegate.storage.sql.tables import UtcDateTime, metadata

__all__ = ["SDK_ATTRIBUTES", "tasks"]

tasks = Table(
    "tasks",
    metadata,
    Column("id", String(36), primary_key=True, index=True),
    Column("context_id", String(36), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("owner", String(255), nullable=True),
    Column("last_updated", DateTime(), nullable=True),
    Column("status", JSON(), nullable=False),
    Column("artifacts", JSON(), nullable=True),
    Column("history", JSON(), nullable=True),
    Column("protocol_version", String(16), nullable=True),
    Column("metadata", JSON(), nullable=True),
    Column("saved_at", UtcDateTime, nullable=False),
    Index("idx_tasks_owner_last_updated", "owner", "last_updated"),
    Index("ix_tasks_saved_at", "saved_at"),
)

SDK_ATTRIBUTES = {column.name: column.name for column in tasks.columns if column.name != "saved_at"} | {
    "metadata": "task_metadata"
}
"""The SDK model's attribute for each column it shares with :data:`tasks` (``metadata`` is ``task_metadata``)."""
