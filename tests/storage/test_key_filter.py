"""The idempotency key filter (``hivegate.storage.sql.key_filter``) and its use by the SQLite call records:
a key the filter does not hold is answered without a read, and no written key is ever missed, whether it
was written before the store opened, while the filter was being built, or after.

Real SQLite files; the reads are counted with the driver's trace callback on the event loop's connection.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import AsyncGenerator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection

import hivegate.storage.sql.calls as sql_calls
from hivegate.storage import DatabaseLimits, open_storage
from hivegate.storage.calls import CallWrite, IdempotencyRecord, KeyState, StoredOutcome
from hivegate.storage.sql.calls import SqlCallRecords
from hivegate.storage.sql.engine import fetch_first
from hivegate.storage.sql.key_filter import MIN_CAPACITY, KeyFilter

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
WAIT_SECONDS = 20.0

identities = st.tuples(st.text(max_size=40), st.text(max_size=40), st.text(min_size=1, max_size=255))


@settings(max_examples=300, deadline=None)
@given(st.lists(identities, max_size=200), st.integers(min_value=0, max_value=1 << 20))
def test_the_filter_holds_every_identity_added(added: list[tuple[str, str, str]], capacity: int) -> None:
    known = KeyFilter(capacity)
    for identity in added:
        known.add(*identity)
    assert all(known.may_hold(*identity) for identity in added)
    assert known.count == len(added)


def test_parts_are_not_confused_across_their_boundaries() -> None:
    known = KeyFilter(MIN_CAPACITY)
    known.add("ab", "c", "d")
    assert not known.may_hold("a", "bc", "d")
    assert not known.may_hold("ab", "cd", "")


def test_at_capacity_about_one_percent_of_other_keys_may_be_held() -> None:
    known = KeyFilter(MIN_CAPACITY)
    for i in range(MIN_CAPACITY):
        known.add("u-alice", "echo", f"written-{i}")
    assert not known.full
    false_positives = sum(known.may_hold("u-alice", "echo", f"fresh-{i}") for i in range(20_000))
    assert false_positives / 20_000 < 0.02
    known.add("u-alice", "echo", "one more")
    assert known.full


# --- the SQLite call records --------------------------------------------------------------------


def done(key: str, user_id: str = "u-alice", agent_id: str = "echo") -> IdempotencyRecord:
    return IdempotencyRecord(
        user_id,
        agent_id,
        key,
        "f" * 64,
        "c" * 32,
        KeyState.DONE,
        NOW,
        NOW + timedelta(hours=24),
        StoredOutcome(f"reply to {key}", False, None, None),
    )


def written(key: str, user_id: str = "u-alice") -> CallWrite:
    return CallWrite(None, (), done(key, user_id), claimed_in_store=False)


class KeyReads:
    """Counts the ``SELECT``s of ``idempotency_keys`` on the event loop's SQLite connection."""

    def __init__(self, records: SqlCallRecords) -> None:
        self.count = 0
        conn = records.sql_database._loop_connection()  # the connection SqlCallRecords.key reads on
        driver = conn.connection.driver_connection
        assert isinstance(driver, sqlite3.Connection)
        driver.set_trace_callback(self._traced)

    def _traced(self, statement: str) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "idempotency_keys" in statement:
            self.count += 1


async def built(records: SqlCallRecords) -> None:
    """Start the filter's build (a read does) and wait for it."""
    await records.key("nobody", "nothing", "warm-up")
    building = records._building
    if building is not None:
        with anyio.fail_after(WAIT_SECONDS):
            await building
    assert records._filter is not None


async def opened(path: Path, limits: DatabaseLimits | None = None) -> SqlCallRecords:
    storage = await open_storage(f"sqlite+aiosqlite:///{path}", *([] if limits is None else [limits]))
    records = storage.calls
    assert isinstance(records, SqlCallRecords)
    records_storage[id(records)] = storage
    return records


records_storage: dict[int, object] = {}


@pytest.fixture
async def path(tmp_path: Path) -> AsyncGenerator[Path]:
    yield tmp_path / "calls.db"
    for storage in list(records_storage.values()):
        await storage.close()  # type: ignore[attr-defined]
    records_storage.clear()


async def test_a_fresh_key_is_answered_without_a_read_and_every_written_key_is_found(path: Path) -> None:
    first = await opened(path)
    for i in range(50):
        await first.record(written(f"before-{i}"))
    await records_storage.pop(id(first)).close()  # type: ignore[attr-defined]

    records = await opened(path)  # a restart: the filter is built from the table
    reads = KeyReads(records)
    await built(records)
    reads.count = 0
    for i in range(200):
        assert await records.key("u-alice", "echo", f"fresh-{i}") is None
    assert reads.count < 10  # about 1 % may be read; with no filter every one would be

    reads.count = 0
    for i in range(50):
        found = await records.key("u-alice", "echo", f"before-{i}")
        assert found is not None
        assert found.outcome is not None
        assert found.outcome.text == f"reply to before-{i}"
    assert reads.count == 50

    await records.record(written("after"))
    assert await records.key("u-alice", "echo", "after") == done("after")
    assert await records.key("u-bob", "echo", "after") is None  # another user's identity


async def test_keys_written_before_and_during_the_build_are_found(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = await opened(path)
    scanning, go_on = threading.Event(), threading.Event()
    real_scan = sql_calls._scan_keys

    def held_scan(conn: Connection) -> KeyFilter:
        scanned = real_scan(conn)  # the table as it is now; what is written from here on is not in it
        scanning.set()
        assert go_on.wait(WAIT_SECONDS)
        return scanned

    monkeypatch.setattr(sql_calls, "_scan_keys", held_scan)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(records.record, written("queued-before-the-build"))
        await records.key("u-alice", "echo", "starts-the-build")  # queued behind the write, read after it
        with anyio.fail_after(WAIT_SECONDS):
            await anyio.to_thread.run_sync(scanning.wait, WAIT_SECONDS)
        for i in range(20):  # written after the scan read the table, before the filter is handed over
            tasks.start_soon(records.record, written(f"during-{i}"))
        await anyio.wait_all_tasks_blocked()
        go_on.set()
    building = records._building
    if building is not None:
        with anyio.fail_after(WAIT_SECONDS):
            await building
    assert records._filter is not None
    assert await records.key("u-alice", "echo", "queued-before-the-build") == done("queued-before-the-build")
    for i in range(20):
        assert await records.key("u-alice", "echo", f"during-{i}") == done(f"during-{i}")


async def test_a_failed_build_leaves_the_reads_to_the_database(
    path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    records = await opened(path)
    await records.record(written("kept"))

    def failing_scan(conn: object) -> KeyFilter:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(sql_calls, "_scan_keys", failing_scan)
    with caplog.at_level(logging.WARNING, logger="hivegate.storage.sql.calls"):
        assert await records.key("u-alice", "echo", "kept") == done("kept")
        building = records._building
        assert building is not None
        with anyio.fail_after(WAIT_SECONDS):
            await building
    assert records._filter is None
    assert "key filter was not built" in caplog.text
    assert "disk I/O error" in caplog.text
    reads = KeyReads(records)
    assert await records.key("u-alice", "echo", "kept") == done("kept")
    assert await records.key("u-alice", "echo", "fresh") is None
    assert reads.count == 2
    assert records._building is None  # not retried before FILTER_RETRY_SECONDS


async def test_a_busy_read_on_the_loop_goes_to_the_worker_thread(path: Path) -> None:
    """``run_read`` falls back to the worker thread on ``SQLITE_BUSY``, also when the driver itself raised
    it (``fetch_first`` reads through the driver's cursor). The read here answers BUSY on the event
    loop's thread, as SQLite does to a reader that waits for no lock, and reads in any other thread."""
    records = await opened(path)
    await records.record(written("kept"))
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def read(conn: Connection) -> IdempotencyRecord | None:
        threads.append(threading.get_ident())
        if threading.get_ident() == loop_thread:
            raise sqlite3.OperationalError("database is locked")
        row = fetch_first(conn, sql_calls._KEY_RECORD, {"k_user_id": "u-alice", "k_agent_id": "echo", "k_key": "kept"})
        return None if row is None else sql_calls._record(row)

    with anyio.fail_after(WAIT_SECONDS):
        assert await records.sql_database.run_read(read) == done("kept")
    assert threads[0] == loop_thread
    assert threads[1] != loop_thread

    def broken(conn: Connection) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):  # not BUSY: raised, not retried
        await records.sql_database.run_read(broken)
