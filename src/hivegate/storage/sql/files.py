"""Uploaded files' records in the gateway's database: tables ``files`` and ``file_usage`` (migration ``0011``).

Every write is one write transaction: :meth:`SqlFileStore.add` is a conditional upsert of the owner's
usage (``INSERT … ON CONFLICT (owner) DO UPDATE … WHERE bytes + :size <= :max_bytes AND files + 1 <=
:max_files``; no row changed means over quota) then the insert of the record; deletes use ``DELETE …
RETURNING`` and subtract exactly the rows they removed, so two replicas purging at once never subtract
a file twice. On PostgreSQL the upsert takes the owner's usage row lock, so concurrent uploads of one
owner are checked one after the other; on SQLite writers are serialized (``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from hivegate.storage.files import FileQuotaExceeded, FileRecord, FileUsage
from hivegate.storage.oauth import require_aware
from hivegate.storage.sql.engine import SqlStore
from hivegate.storage.sql.file_tables import file_usage, files
from hivegate.storage.sql.tables import record_columns, record_values

__all__ = ["SqlFileStore"]

_KNOWN_BATCH = 500
"""Ids per ``IN (…)`` query of :meth:`SqlFileStore.known`."""


class SqlFileStore(SqlStore):
    """:class:`~hivegate.storage.files.FileStore` in the database (module docstring)."""

    async def add(self, record: FileRecord, max_bytes: int, max_files: int) -> None:
        """See :meth:`FileStore.add`."""
        require_aware(record)
        if record.size > max_bytes or max_files < 1:
            raise FileQuotaExceeded(record.owner)
        async with self._write_transaction() as conn:
            dialect: Any = postgresql if conn.dialect.name == "postgresql" else sqlite
            insert = dialect.insert(file_usage).values(owner=record.owner, bytes=record.size, files=1)
            upsert = insert.on_conflict_do_update(
                index_elements=[file_usage.c.owner],
                set_={"bytes": file_usage.c.bytes + insert.excluded.bytes, "files": file_usage.c.files + 1},
                where=(file_usage.c.bytes + insert.excluded.bytes <= max_bytes) & (file_usage.c.files + 1 <= max_files),
            )
            if (await conn.execute(upsert)).rowcount != 1:
                raise FileQuotaExceeded(record.owner)
            await conn.execute(files.insert().values(record_values(record)))

    async def get(self, file_id: str) -> FileRecord | None:
        """See :meth:`FileStore.get`."""
        row = await self._first(select(*record_columns(files, FileRecord)).where(files.c.id == file_id))
        return None if row is None else FileRecord(*row)

    async def usage(self, owner: str) -> FileUsage:
        """See :meth:`FileStore.usage`."""
        row = await self._first(select(file_usage.c.bytes, file_usage.c.files).where(file_usage.c.owner == owner))
        return FileUsage() if row is None else FileUsage(int(row[0]), int(row[1]))

    async def delete(self, file_id: str, owner: str) -> bool:
        """See :meth:`FileStore.delete`."""
        async with self._write_transaction() as conn:
            statement = delete(files).where(files.c.id == file_id, files.c.owner == owner)
            removed = await _delete_returning(conn, statement)
        return bool(removed)

    async def purge_expired(self, now: datetime) -> list[str]:
        """See :meth:`FileStore.purge_expired`."""
        require_aware(now)
        async with self._write_transaction() as conn:
            return await _delete_returning(conn, delete(files).where(files.c.expires_at <= now))

    async def known(self, file_ids: Iterable[str]) -> set[str]:
        """See :meth:`FileStore.known`."""
        wanted = list(file_ids)
        found: set[str] = set()
        async with self._engine.connect() as conn:
            for start in range(0, len(wanted), _KNOWN_BATCH):
                batch = wanted[start : start + _KNOWN_BATCH]
                rows = await conn.execute(select(files.c.id).where(files.c.id.in_(batch)))
                found.update(row[0] for row in rows)
        return found


async def _delete_returning(conn: AsyncConnection, statement: Any) -> list[str]:
    """Run a ``DELETE`` on ``files`` and subtract the rows it removed from their owners' usage; their ids."""
    rows: list[Any] = list((await conn.execute(statement.returning(files.c.id, files.c.owner, files.c.size))).all())
    totals: dict[str, tuple[int, int]] = {}
    for row in rows:
        owner, size = str(row[1]), int(row[2])
        held = totals.get(owner, (0, 0))
        totals[owner] = (held[0] + size, held[1] + 1)
    for owner, (size, count) in totals.items():
        await conn.execute(
            update(file_usage)
            .where(file_usage.c.owner == owner)
            .values(bytes=file_usage.c.bytes - size, files=file_usage.c.files - count)
        )
    return [str(row[0]) for row in rows]
