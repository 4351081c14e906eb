"""The local blob store (issue 10 item 3): a blob is whole under its id or absent, and what a crash leaves is swept."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hivegate.auth.principal import CredentialKind, Principal
from hivegate.errors import PayloadTooLargeError, QuotaExceededError
from hivegate.files.blobs import LocalBlobStore, blob_folder
from hivegate.files.uploads import ORPHAN_GRACE_SECONDS, FileLimits, Files
from hivegate.storage.memory.files import MemoryFileStore

BLOB = "file_" + "a" * 32
ALICE = Principal(kind=CredentialKind.USER_KEY, user_id="u-alice", username="alice", credential_id="k1", agents=None)


def _listing(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


async def _collect(store: LocalBlobStore, blob_id: str) -> bytes:
    return b"".join([chunk async for chunk in store.read(blob_id)])


async def _chunks(*parts: bytes):  # an async generator of the parts
    for part in parts:
        yield part


async def test_commit_makes_the_blob_and_abort_leaves_nothing(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    writer = await store.writer()
    await writer.write(b"hello ")
    await writer.write(b"world")
    assert not (tmp_path / "blobs" / BLOB).exists()  # invisible until committed
    await writer.commit(BLOB)
    assert await _collect(store, BLOB) == b"hello world"
    assert _listing(tmp_path / "blobs" / "tmp") == []
    aborted = await store.writer()
    await aborted.write(b"x" * 1000)
    await aborted.abort()
    await aborted.abort()
    assert _listing(tmp_path / "blobs") == [BLOB, "tmp"]
    assert _listing(tmp_path / "blobs" / "tmp") == []
    escaping = await store.writer()
    with pytest.raises(ValueError, match="not a blob id"):
        await escaping.commit("../escape")
    await escaping.abort()


async def test_sweep_removes_old_orphans_and_temporaries_only(tmp_path: Path) -> None:
    """A crash between the blob's rename and its row's insert leaves an orphan; one mid-write a temporary file."""
    store = LocalBlobStore(tmp_path)
    kept, orphan, young = "file_" + "1" * 32, "file_" + "2" * 32, "file_" + "3" * 32
    for blob_id in (kept, orphan, young):
        writer = await store.writer()
        await writer.write(blob_id.encode())
        await writer.commit(blob_id)
    (tmp_path / "tmp" / "0123.part").write_bytes(b"partial")  # a writer's file when the process died
    temporaries = [tmp_path / "tmp" / name for name in _listing(tmp_path / "tmp")]
    (tmp_path / "notes.txt").write_text("not ours", encoding="utf-8")
    for path in [tmp_path / kept, tmp_path / orphan, tmp_path / "notes.txt", *temporaries]:
        _age(path, ORPHAN_GRACE_SECONDS + 60)

    async def known(ids: list[str]) -> set[str]:
        assert young not in ids  # too young to be judged
        return {kept} & set(ids)

    assert await store.sweep(ORPHAN_GRACE_SECONDS, known) == [orphan]
    assert _listing(tmp_path) == sorted([kept, young, "notes.txt", "tmp"])
    assert _listing(tmp_path / "tmp") == []


async def test_upload_over_the_size_limit_or_quota_keeps_nothing(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path)
    files = Files(MemoryFileStore(), blobs, FileLimits(10, 25, 3, 3600, 100))
    with pytest.raises(PayloadTooLargeError):
        await files.upload(ALICE, "a.bin", "application/octet-stream", _chunks(b"12345", b"678901"))
    first = await files.upload(ALICE, "a.bin", "application/octet-stream", _chunks(b"1234567890"))
    await files.upload(ALICE, "b.bin", "application/octet-stream", _chunks(b"1234567890"))
    with pytest.raises(QuotaExceededError) as refused:  # 20 + 6 > 25: refused after the bytes arrived
        await files.upload(ALICE, "c.bin", "application/octet-stream", _chunks(b"123456"))
    assert refused.value.code == "quota_exceeded"
    blobs_left = [name for name in _listing(tmp_path) if name != "tmp"]
    assert len(blobs_left) == 2
    assert _listing(tmp_path / "tmp") == []
    assert first.size == 10
    assert first.sha256 == "c775e7b757ede630cd0aa1113bd102661ab38829ca52a6422ab782862f268646"


def test_blob_folder_defaults_next_to_the_database(tmp_path: Path) -> None:
    assert blob_folder(None, f"sqlite+aiosqlite:///{tmp_path}/db/hg.db") == (tmp_path / "db" / "files").resolve()
    assert blob_folder(None, "memory://") is None
    assert blob_folder(tmp_path, "memory://") == tmp_path
    assert blob_folder(None, "postgresql+asyncpg://u@h/db") == Path(".hivegate/files")
