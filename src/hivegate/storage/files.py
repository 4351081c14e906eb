"""Uploaded files' metadata: the ``FileStore`` protocol, its record, and the per-user quota rule.

A file's bytes live in a blob store (:mod:`hivegate.files.blobs`); this store keeps one
:class:`FileRecord` per file and each owner's usage (bytes and count of the files it holds), so the
quota check and the insert are one atomic step (:meth:`FileStore.add`). Implementations:
:class:`hivegate.storage.memory.files.MemoryFileStore` and :class:`hivegate.storage.sql.files.SqlFileStore`
(tables ``files`` and ``file_usage``, migration ``0011_files``); one contract suite
(``tests/storage/test_file_store_contract.py``) runs over memory, SQLite and PostgreSQL.

Ownership is checked by the callers (:mod:`hivegate.files.uploads`): the store answers by id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

__all__ = ["FileQuotaExceeded", "FileRecord", "FileStore", "FileUsage"]


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One uploaded file.

    Attributes:
        id: ``file_`` + 32 hex digits (128 random bits: unguessable).
        owner: the user id of the uploader.
        agent_id: the agent the uploading ``bak_`` key is bound to (the file serves that agent only);
            None for a file uploaded with a user credential (``oag_``, OAuth).
        filename: the name given at upload (at most 512 characters).
        content_type: the MIME type given at upload (at most 255 characters).
        size: bytes.
        sha256: the lowercase hex SHA-256 of the bytes.
        created_at, expires_at: aware UTC.
    """

    id: str
    owner: str
    agent_id: str | None
    filename: str
    content_type: str
    size: int
    sha256: str
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class FileUsage:
    """What an owner holds: ``bytes`` and ``files`` of its stored (not yet purged) files."""

    bytes: int = 0
    files: int = 0


class FileQuotaExceeded(Exception):
    """Adding the file would pass the owner's byte or file-count quota (nothing was stored)."""


class FileStore(Protocol):
    """Where file records live. SQL stores raise :class:`~hivegate.errors.StoreUnavailableError` when the
    database fails."""

    async def add(self, record: FileRecord, max_bytes: int, max_files: int) -> None:
        """Store ``record`` and add it to its owner's usage, in one transaction, unless the owner's usage would
        then exceed ``max_bytes`` or ``max_files``.

        Raises:
            FileQuotaExceeded: over a quota (nothing stored).
        """
        ...

    async def get(self, file_id: str) -> FileRecord | None:
        """The record ``file_id``, or None (expired records are returned until purged: callers check)."""
        ...

    async def usage(self, owner: str) -> FileUsage:
        """The owner's current usage (a hint for an early refusal; :meth:`add` decides)."""
        ...

    async def delete(self, file_id: str, owner: str) -> bool:
        """Delete the owner's record ``file_id`` and subtract it from the usage; False when there is none."""
        ...

    async def purge_expired(self, now: datetime) -> list[str]:
        """Delete the records whose ``expires_at`` is at or before ``now`` (aware), subtracting them from their
        owners' usage, in one transaction; the ids deleted (their blobs are the caller's to remove)."""
        ...

    async def known(self, file_ids: Iterable[str]) -> set[str]:
        """Those of ``file_ids`` that have a record (the orphan-blob sweep keeps these)."""
        ...
