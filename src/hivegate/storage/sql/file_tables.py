"""The uploaded files' schema (``files``, ``file_usage``) as SQLAlchemy Core tables on the registry's ``metadata``.

The tables mirror migration ``0011_files`` (a test compares them); change both together, never one alone.

``files``
    One row per stored file (:class:`~hivegate.storage.files.FileRecord`): the bytes are in the blob store
    under the row's ``id``. Indexed by ``expires_at`` (the purge) and ``owner``.
``file_usage``
    One row per owner that ever stored a file: the ``bytes`` and ``files`` it holds now. Updated in the
    transaction that inserts or deletes a ``files`` row, so the quota check cannot race (one conditional
    upsert, :meth:`~hivegate.storage.sql.files.SqlFileStore.add`).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, Table, Text

from hivegate.storage.sql.tables import UtcDateTime, metadata

__all__ = ["file_usage", "files"]

files = Table(
    "files",
    metadata,
    Column("id", Text, primary_key=True),
    Column("owner", Text, nullable=False),
    Column("agent_id", Text, nullable=True),
    Column("filename", Text, nullable=False),
    Column("content_type", Text, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("sha256", Text, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Index("ix_files_owner", "owner"),
    Index("ix_files_expires_at", "expires_at"),
)

file_usage = Table(
    "file_usage",
    metadata,
    Column("owner", Text, primary_key=True),
    Column("bytes", BigInteger, nullable=False),
    Column("files", Integer, nullable=False),
)
