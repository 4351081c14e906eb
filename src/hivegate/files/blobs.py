"""Where uploaded files' bytes live: the ``BlobStore`` interface, on local disk and in memory.

A blob is written through a :class:`BlobWriter` and becomes visible under its id only when committed
whole (:meth:`BlobWriter.commit`); an aborted or interrupted write leaves at most a temporary file,
which :meth:`BlobStore.sweep` removes later. An S3-compatible store would implement the same four
operations (a multipart upload committed at the end; ``ListObjectsV2`` for the sweep).

:class:`LocalBlobStore` layout under its folder: ``<id>`` per committed blob, ``tmp/<random>.part`` while
one is written. Commit is write → ``fsync`` → ``rename`` into place → ``fsync`` of the folder, so after a
crash a blob is either whole under its id or absent.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import BinaryIO, Protocol

import anyio.to_thread

from hivegate.settings import sqlite_file

__all__ = [
    "BLOB_ID_PATTERN",
    "BlobStore",
    "BlobWriter",
    "LocalBlobStore",
    "MemoryBlobStore",
    "blob_folder",
    "open_blob_store",
]

BLOB_ID_PATTERN = re.compile(r"^file_[0-9a-f]{32}$")
"""The ids blobs are stored under (file ids); anything else found in the folder is left alone."""

READ_CHUNK_BYTES = 64 * 1024
_TMP = "tmp"


class BlobWriter(Protocol):
    """One blob being written: :meth:`write` its bytes, then :meth:`commit` or :meth:`abort` (exactly one)."""

    async def write(self, chunk: bytes) -> None:
        """Append ``chunk``."""
        ...

    async def commit(self, blob_id: str) -> None:
        """Make the bytes written the blob ``blob_id``, durably and at once (module docstring)."""
        ...

    async def abort(self) -> None:
        """Drop what was written. Idempotent; a no-op after :meth:`commit`."""
        ...


class BlobStore(Protocol):
    """Blobs by id (the files' ids)."""

    async def writer(self) -> BlobWriter:
        """A new writer (its temporary space is taken now)."""
        ...

    def read(self, blob_id: str) -> AsyncIterator[bytes]:
        """The blob's bytes in chunks.

        Raises:
            FileNotFoundError: no such blob (on the first iteration).
        """
        ...

    async def delete(self, blob_ids: Iterable[str]) -> None:
        """Delete these blobs; missing ones are skipped."""
        ...

    async def sweep(self, older_than_seconds: float, keep: Callable[[list[str]], Awaitable[set[str]]]) -> list[str]:
        """Remove temporary files and the blobs ``keep`` does not vouch for, both older than ``older_than_seconds``.

        Args:
            keep: an async function given candidate blob ids, returning the set of those to keep (those with a
                metadata row): ``FileStore.known``.

        Returns:
            The ids of the blobs removed.
        """
        ...


class _LocalWriter:
    def __init__(self, folder: Path, handle: BinaryIO, path: Path) -> None:
        self._folder = folder
        self._handle = handle
        self._path = path
        self._done = False

    async def write(self, chunk: bytes) -> None:
        await anyio.to_thread.run_sync(self._handle.write, chunk)

    async def commit(self, blob_id: str) -> None:
        if not BLOB_ID_PATTERN.fullmatch(blob_id):
            raise ValueError(f"not a blob id: {blob_id!r}")
        await anyio.to_thread.run_sync(self._commit, self._folder / blob_id)
        self._done = True

    def _commit(self, target: Path) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        os.replace(self._path, target)
        _fsync_folder(self._folder)

    async def abort(self) -> None:
        if self._done:
            return
        self._done = True
        await anyio.to_thread.run_sync(self._discard)

    def _discard(self) -> None:
        self._handle.close()
        self._path.unlink(missing_ok=True)


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX: fsync the directory)."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class LocalBlobStore:
    """:class:`BlobStore` in a folder on local disk (module docstring); the folder is created if missing."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        (self.folder / _TMP).mkdir(parents=True, exist_ok=True)

    async def writer(self) -> BlobWriter:
        path = self.folder / _TMP / f"{secrets.token_hex(16)}.part"
        handle = await anyio.to_thread.run_sync(_open_exclusive, path)
        return _LocalWriter(self.folder, handle, path)

    async def read(self, blob_id: str) -> AsyncIterator[bytes]:
        if not BLOB_ID_PATTERN.fullmatch(blob_id):
            raise FileNotFoundError(blob_id)
        handle = await anyio.to_thread.run_sync(open, self.folder / blob_id, "rb")
        try:
            while chunk := await anyio.to_thread.run_sync(handle.read, READ_CHUNK_BYTES):
                yield chunk
        finally:
            handle.close()

    async def delete(self, blob_ids: Iterable[str]) -> None:
        paths = [self.folder / blob_id for blob_id in blob_ids if BLOB_ID_PATTERN.fullmatch(blob_id)]
        await anyio.to_thread.run_sync(_unlink_all, paths)

    async def sweep(self, older_than_seconds: float, keep: Callable[[list[str]], Awaitable[set[str]]]) -> list[str]:
        cutoff = time.time() - older_than_seconds
        stale_tmp, candidates = await anyio.to_thread.run_sync(self._stale, cutoff)
        await anyio.to_thread.run_sync(_unlink_all, stale_tmp)
        if not candidates:
            return []
        kept = await keep(candidates)
        orphans = [blob_id for blob_id in candidates if blob_id not in kept]
        await self.delete(orphans)
        return orphans

    def _stale(self, cutoff: float) -> tuple[list[Path], list[str]]:
        stale_tmp = [path for path in (self.folder / _TMP).iterdir() if _older(path, cutoff)]
        candidates = [
            path.name for path in self.folder.iterdir() if BLOB_ID_PATTERN.fullmatch(path.name) and _older(path, cutoff)
        ]
        return stale_tmp, candidates


def _open_exclusive(path: Path) -> BinaryIO:
    return open(path, "xb")  # closed by the writer's commit or abort


def _older(path: Path, cutoff: float) -> bool:
    try:
        return path.stat().st_mtime < cutoff
    except FileNotFoundError:
        return False


def _unlink_all(paths: Iterable[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


class _MemoryWriter:
    def __init__(self, blobs: dict[str, bytes]) -> None:
        self._blobs = blobs
        self._chunks: list[bytes] = []

    async def write(self, chunk: bytes) -> None:
        self._chunks.append(chunk)

    async def commit(self, blob_id: str) -> None:
        self._blobs[blob_id] = b"".join(self._chunks)
        self._chunks = []

    async def abort(self) -> None:
        self._chunks = []


class MemoryBlobStore:
    """:class:`BlobStore` in process memory (with ``memory://`` storage: nothing persists)."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    async def writer(self) -> BlobWriter:
        return _MemoryWriter(self.blobs)

    async def read(self, blob_id: str) -> AsyncIterator[bytes]:
        data = self.blobs.get(blob_id)
        if data is None:
            raise FileNotFoundError(blob_id)
        for start in range(0, len(data), READ_CHUNK_BYTES):
            yield data[start : start + READ_CHUNK_BYTES]

    async def delete(self, blob_ids: Iterable[str]) -> None:
        for blob_id in blob_ids:
            self.blobs.pop(blob_id, None)

    async def sweep(self, older_than_seconds: float, keep: Callable[[list[str]], Awaitable[set[str]]]) -> list[str]:
        return []  # a memory writer leaves nothing behind, and a blob outlives its row only within a call


def blob_folder(configured: Path | None, database_url: str) -> Path | None:
    """The folder of the local blob store: ``configured`` (``files.folder``) when set; else ``files`` next to a
    SQLite database file, None for ``memory://`` (blobs in memory), ``.hivegate/files`` otherwise."""
    if configured is not None:
        return configured
    if database_url.startswith("memory://"):
        return None
    database = sqlite_file(database_url)
    return database.parent / "files" if database is not None else Path(".hivegate/files")


def open_blob_store(configured: Path | None, database_url: str) -> BlobStore:
    """The blob store for these settings (:func:`blob_folder`)."""
    folder = blob_folder(configured, database_url)
    return MemoryBlobStore() if folder is None else LocalBlobStore(folder)
