""":class:`~hivegate.storage.files.FileStore` in process memory (``memory://``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime

from hivegate.storage.files import FileQuotaExceeded, FileRecord, FileUsage
from hivegate.storage.oauth import require_aware

__all__ = ["MemoryFileStore"]


class MemoryFileStore:
    """Records and usage in dicts; every method is synchronous inside (no ``await``), so atomic on the loop."""

    def __init__(self) -> None:
        self._files: dict[str, FileRecord] = {}
        self._usage: dict[str, FileUsage] = {}

    def _account(self, owner: str, size: int, count: int) -> None:
        held = self._usage.get(owner, FileUsage())
        self._usage[owner] = replace(held, bytes=held.bytes + size, files=held.files + count)

    async def add(self, record: FileRecord, max_bytes: int, max_files: int) -> None:
        """See :meth:`FileStore.add`."""
        held = self._usage.get(record.owner, FileUsage())
        if held.bytes + record.size > max_bytes or held.files + 1 > max_files:
            raise FileQuotaExceeded(record.owner)
        if record.id in self._files:
            raise ValueError(f"duplicate file id {record.id}")
        self._files[record.id] = record
        self._account(record.owner, record.size, 1)

    async def get(self, file_id: str) -> FileRecord | None:
        """See :meth:`FileStore.get`."""
        return self._files.get(file_id)

    async def usage(self, owner: str) -> FileUsage:
        """See :meth:`FileStore.usage`."""
        return self._usage.get(owner, FileUsage())

    async def delete(self, file_id: str, owner: str) -> bool:
        """See :meth:`FileStore.delete`."""
        record = self._files.get(file_id)
        if record is None or record.owner != owner:
            return False
        del self._files[file_id]
        self._account(owner, -record.size, -1)
        return True

    async def purge_expired(self, now: datetime) -> list[str]:
        """See :meth:`FileStore.purge_expired`."""
        require_aware(now)
        expired = [record for record in self._files.values() if record.expires_at <= now]
        for record in expired:
            del self._files[record.id]
            self._account(record.owner, -record.size, -1)
        return [record.id for record in expired]

    async def known(self, file_ids: Iterable[str]) -> set[str]:
        """See :meth:`FileStore.known`."""
        return {file_id for file_id in file_ids if file_id in self._files}
