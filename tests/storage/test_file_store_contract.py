"""The ``FileStore`` contract (issue 10 item 3) over memory, SQLite and PostgreSQL: records, the per-owner quota
(atomic under concurrency), deletes and the purge keep the usage exact."""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from hivegate.storage import open_storage
from hivegate.storage.files import FileQuotaExceeded, FileRecord, FileStore, FileUsage
from tests.storage.cleanup import clean_database

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def record(owner: str = "u1", size: int = 10, *, expires_in: timedelta = timedelta(hours=1)) -> FileRecord:
    return FileRecord(
        id="file_" + secrets.token_hex(16),
        owner=owner,
        agent_id=None,
        filename="a.txt",
        content_type="text/plain",
        size=size,
        sha256="0" * 64,
        created_at=NOW,
        expires_at=NOW + expires_in,
    )


@pytest.fixture
async def files(store_url: str) -> AsyncGenerator[FileStore]:
    async with clean_database(store_url):
        storage = await open_storage(store_url)
        try:
            yield storage.files
        finally:
            await storage.close()


async def test_add_get_and_usage(files: FileStore) -> None:
    first = record(size=7)
    await files.add(first, 100, 10)
    assert await files.get(first.id) == first
    assert await files.get("file_" + "0" * 32) is None
    assert await files.usage("u1") == FileUsage(7, 1)
    assert await files.usage("u2") == FileUsage()


async def test_quota_of_bytes_and_files_stores_nothing_beyond(files: FileStore) -> None:
    await files.add(record(size=60), 100, 2)
    too_big = record(size=41)
    with pytest.raises(FileQuotaExceeded):
        await files.add(too_big, 100, 2)
    assert await files.get(too_big.id) is None
    await files.add(record(size=40), 100, 2)
    with pytest.raises(FileQuotaExceeded):
        await files.add(record(size=0), 100, 2)
    with pytest.raises(FileQuotaExceeded):  # a single file over the byte quota, for a new owner
        await files.add(record("u2", size=101), 100, 2)
    assert await files.usage("u1") == FileUsage(100, 2)
    assert await files.usage("u2") == FileUsage()
    await files.add(record("u2", size=100), 100, 2)  # owners are independent


async def test_concurrent_adds_never_pass_the_quota(files: FileStore) -> None:
    stored: list[str] = []

    async def add(item: FileRecord) -> None:
        try:
            await files.add(item, 50, 100)
        except FileQuotaExceeded:
            return
        stored.append(item.id)

    async with anyio.create_task_group() as tg:
        for _ in range(12):
            tg.start_soon(add, record(size=10))
    assert len(stored) == 5
    assert await files.usage("u1") == FileUsage(50, 5)
    assert await files.known(stored) == set(stored)


async def test_delete_is_the_owners_and_frees_the_quota(files: FileStore) -> None:
    item = record(size=30)
    await files.add(item, 30, 1)
    assert not await files.delete(item.id, "u2")
    assert await files.get(item.id) == item
    assert await files.delete(item.id, "u1")
    assert not await files.delete(item.id, "u1")
    assert await files.usage("u1") == FileUsage(0, 0)
    await files.add(record(size=30), 30, 1)


async def test_purge_deletes_expired_records_and_their_usage(files: FileStore) -> None:
    old = record(size=5, expires_in=timedelta(minutes=-1))
    other_old = record("u2", size=6, expires_in=timedelta(0))
    live = record(size=7)
    for item in (old, other_old, live):
        await files.add(item, 100, 10)
    assert sorted(await files.purge_expired(NOW)) == sorted([old.id, other_old.id])
    assert await files.purge_expired(NOW) == []
    assert await files.get(old.id) is None
    assert await files.get(live.id) == live
    assert await files.usage("u1") == FileUsage(7, 1)
    assert await files.usage("u2") == FileUsage(0, 0)
    assert await files.known([old.id, live.id, "file_x"]) == {live.id}


async def test_naive_datetimes_are_refused(files: FileStore) -> None:
    with pytest.raises(ValueError, match="aware"):
        await files.purge_expired(datetime(2026, 1, 1))  # the naive datetime under test
