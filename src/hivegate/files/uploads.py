"""Uploaded files for their owners: store one, read its metadata and bytes, delete it, and expire them.

:class:`Files` joins a :class:`~hivegate.storage.files.FileStore` (records, usage) and a
:class:`~hivegate.files.blobs.BlobStore` (bytes). An upload (:meth:`Files.upload`):

1. refuses at once an owner already at a quota (``quota_exceeded``, 413);
2. streams the bytes into a blob writer, hashing and counting them; past ``files.max_file_bytes`` it
   aborts (``payload_too_large``, 413; nothing kept);
3. commits the blob under a new id (fsync + rename: whole or absent), then stores the record and the
   owner's usage in one transaction (:meth:`FileStore.add`); if that fails (a quota reached meanwhile,
   a database outage), the blob is deleted again. A crash between 3's two steps leaves a blob without a
   record, which the sweep (:meth:`Files.sweep_orphans`) deletes once older than
   :data:`ORPHAN_GRACE_SECONDS`.

**Who sees a file** (:meth:`Files.visible`): its owner (the uploader's user), before it expires; a file
uploaded with a ``bak_`` key belongs to that key's agent too, so it is seen only by credentials that reach
that agent, and attached only to calls of that agent; a ``bak_`` key sees only its agent's files. Anyone
else gets the answer of a file that does not exist (404 ``not_found``; ``invalid_params`` as an
attachment): existence does not leak.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import anyio

from hivegate.auth.principal import CredentialKind, Principal
from hivegate.errors import NotFoundError, PayloadTooLargeError, QuotaExceededError, StoreUnavailableError
from hivegate.files.blobs import BlobStore
from hivegate.settings import FilesSettings
from hivegate.storage.files import FileQuotaExceeded, FileRecord, FileStore

__all__ = ["MAX_CONTENT_TYPE_CHARS", "MAX_FILENAME_CHARS", "ORPHAN_GRACE_SECONDS", "FileLimits", "Files"]

logger = logging.getLogger(__name__)

MAX_FILENAME_CHARS = 512
MAX_CONTENT_TYPE_CHARS = 255
"""The original's bounds on a file's name and type (product surface §6.6)."""

ORPHAN_GRACE_SECONDS = 3600.0
"""A blob without a record is deleted by the sweep only once this old (an upload in progress is younger)."""


@dataclass(frozen=True, slots=True)
class FileLimits:
    """The ``files.*`` limits: per file, per owner (quota), per call, and the retention."""

    max_file_bytes: int
    max_bytes_per_user: int
    max_files_per_user: int
    retention_seconds: int
    max_attachment_bytes_per_call: int

    @classmethod
    def of(cls, settings: FilesSettings) -> FileLimits:
        """The limits of the ``files`` settings."""
        return cls(
            settings.max_file_bytes,
            settings.max_bytes_per_user,
            settings.max_files_per_user,
            settings.retention_seconds,
            settings.max_attachment_bytes_per_call,
        )


def _not_found() -> NotFoundError:
    return NotFoundError("File not found")


class Files:
    """Uploaded files (module docstring). One per gateway.

    Args:
        store: the records. blobs: the bytes. limits: ``files.*``.
    """

    def __init__(self, store: FileStore, blobs: BlobStore, limits: FileLimits) -> None:
        self.store = store
        self.blobs = blobs
        self.limits = limits

    @staticmethod
    def visible(principal: Principal, record: FileRecord, now: datetime) -> bool:
        """Whether ``principal`` may see ``record`` at ``now`` (module docstring)."""
        if principal.user_id is None or record.owner != principal.user_id or record.expires_at <= now:
            return False
        if principal.kind is CredentialKind.AGENT_KEY:
            return record.agent_id is not None and record.agent_id in (principal.agents or ())
        return record.agent_id is None or principal.agents is None or record.agent_id in principal.agents

    async def upload(
        self, principal: Principal, filename: str, content_type: str, chunks: AsyncIterable[bytes]
    ) -> FileRecord:
        """Store the bytes of ``chunks`` as a new file of ``principal``'s user (module docstring).

        Raises:
            QuotaExceededError: the user holds ``max_files_per_user`` files or ``max_bytes_per_user`` bytes,
                or would with this one (413).
            PayloadTooLargeError: more than ``max_file_bytes`` bytes (413).
            StoreUnavailableError: the database failed (nothing kept).
        """
        owner = principal.user_id
        assert owner is not None  # the route admits credentials of a user only
        limits = self.limits
        held = await self.store.usage(owner)
        if held.files >= limits.max_files_per_user:
            raise self._quota("files", limits.max_files_per_user)
        if held.bytes >= limits.max_bytes_per_user:
            raise self._quota("bytes", limits.max_bytes_per_user)
        writer = await self.blobs.writer()
        committed: str | None = None
        try:
            digest = hashlib.sha256()
            size = 0
            async for chunk in chunks:
                size += len(chunk)
                if size > limits.max_file_bytes:
                    raise PayloadTooLargeError(f"The file exceeds {limits.max_file_bytes} bytes")
                digest.update(chunk)
                await writer.write(chunk)
            now = datetime.now(UTC)
            agent_id = None
            if principal.kind is CredentialKind.AGENT_KEY and principal.agents:
                agent_id = min(principal.agents)
            record = FileRecord(
                id="file_" + secrets.token_hex(16),
                owner=owner,
                agent_id=agent_id,
                filename=filename,
                content_type=content_type,
                size=size,
                sha256=digest.hexdigest(),
                created_at=now,
                expires_at=now + timedelta(seconds=limits.retention_seconds),
            )
            await writer.commit(record.id)
            committed = record.id
            try:
                await self.store.add(record, limits.max_bytes_per_user, limits.max_files_per_user)
            except FileQuotaExceeded:
                raise self._quota("bytes", limits.max_bytes_per_user) from None
        except BaseException:
            with anyio.CancelScope(shield=True):
                if committed is not None:
                    await self.blobs.delete([committed])
                else:
                    await writer.abort()
            raise
        return record

    @staticmethod
    def _quota(quota: str, limit: int) -> QuotaExceededError:
        return QuotaExceededError(
            f"Storage quota reached: at most {limit} {quota} per user", data={"quota": quota, "limit": limit}
        )

    async def get(self, principal: Principal, file_id: str) -> FileRecord:
        """The record of ``file_id`` if ``principal`` may see it.

        Raises:
            NotFoundError: no such file, expired, or not the caller's (404 ``not_found``; the same answer).
        """
        record = await self.store.get(file_id) if len(file_id) <= 64 else None
        if record is None or not self.visible(principal, record, datetime.now(UTC)):
            raise _not_found()
        return record

    def content(self, record: FileRecord) -> AsyncIterator[bytes]:
        """The bytes of ``record`` (checked by :meth:`get`) in chunks."""
        return self.blobs.read(record.id)

    async def read(self, record: FileRecord) -> bytes:
        """The whole bytes of ``record``.

        Raises:
            NotFoundError: the blob is gone (a purge between the check and the read).
        """
        try:
            return b"".join([chunk async for chunk in self.blobs.read(record.id)])
        except FileNotFoundError:
            raise _not_found() from None

    async def delete(self, principal: Principal, file_id: str) -> None:
        """Delete the caller's file ``file_id`` (its record, then its bytes).

        Raises:
            NotFoundError: as :meth:`get`.
        """
        record = await self.get(principal, file_id)
        if not await self.store.delete(record.id, record.owner):
            raise _not_found()
        await self.blobs.delete([record.id])

    async def purge_expired(self) -> int:
        """Delete the expired files' records, then their bytes; the number deleted."""
        removed = await self.store.purge_expired(datetime.now(UTC))
        await self.blobs.delete(removed)
        return len(removed)

    async def sweep_orphans(self) -> int:
        """Delete blobs without a record (and stale temporary files) older than :data:`ORPHAN_GRACE_SECONDS`."""
        return len(await self.blobs.sweep(ORPHAN_GRACE_SECONDS, self.store.known))

    async def maintain(self, interval_seconds: float) -> None:
        """Every ``interval_seconds``: :meth:`purge_expired`, then :meth:`sweep_orphans`. Failures are logged and
        retried at the next interval; they never stop the server."""
        while True:
            await anyio.sleep(interval_seconds)
            try:
                purged = await self.purge_expired()
                swept = await self.sweep_orphans()
            except StoreUnavailableError as exc:  # an outage must not end the server; the store logs it
                logger.debug("purging expired files failed: %s", exc)
                continue
            except Exception:  # nor anything else
                logger.warning("purging expired files failed", exc_info=True)
                continue
            if purged or swept:
                logger.debug("purged %d expired files, swept %d orphan blobs", purged, swept)
