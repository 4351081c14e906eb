"""``database.sqlite_synchronous``: every pooled SQLite connection runs with the configured
``PRAGMA synchronous`` in WAL mode (Spec: https://sqlite.org/pragma.html#pragma_synchronous; SQLite
reports NORMAL as 1 and FULL as 2), and a committed write survives the process being killed."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Literal

import pytest
from sqlalchemy import text

from hivegate.settings import load_settings
from hivegate.storage import DatabaseLimits
from hivegate.storage.sql.engine import SqlDatabase


@pytest.mark.parametrize(("setting", "reported"), [("normal", 1), ("full", 2)])
async def test_each_connection_has_the_configured_synchronous(
    tmp_path: Path, setting: Literal["normal", "full"], reported: int
) -> None:
    database = SqlDatabase(f"sqlite:///{tmp_path / 'h.db'}", DatabaseLimits(sqlite_synchronous=setting))
    try:
        async with database.engine.connect() as first, database.engine.connect() as second:
            for conn in (first, second):
                assert (await conn.execute(text("PRAGMA synchronous"))).scalar() == reported
                assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
    finally:
        await database.close()


def test_the_default_is_normal_and_the_setting_is_read(tmp_path: Path) -> None:
    assert load_settings(None).database.limits().sqlite_synchronous == "normal"
    config = tmp_path / "h.toml"
    config.write_text('[database]\nsqlite_synchronous = "full"\n', encoding="utf-8")
    assert load_settings(config).database.limits().sqlite_synchronous == "full"


def test_a_commit_under_normal_survives_kill_9(tmp_path: Path) -> None:
    """WAL + NORMAL: the commit is in the log when the statement returns; a killed process loses nothing."""
    path = tmp_path / "h.db"
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal
        from sqlalchemy import text
        from hivegate.storage.sql.engine import SqlDatabase

        async def main():
            database = SqlDatabase("sqlite:///{path}")
            async with database.engine.connect() as conn:
                await conn.execute(text("CREATE TABLE t (v TEXT)"))
                await conn.execute(text("INSERT INTO t VALUES ('kept')"))
                await conn.commit()
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    result = subprocess.run([sys.executable, "-c", script], env=env, timeout=60, check=False)
    assert result.returncode == -signal.SIGKILL
    with sqlite3.connect(path) as check:
        assert check.execute("SELECT v FROM t").fetchall() == [("kept",)]


_RECORDING = """
import asyncio, secrets, sys, uuid
from datetime import UTC, datetime, timedelta
from hivegate.storage import open_storage
from hivegate.storage.calls import (
    CallWrite, Conversation, IdempotencyRecord, KeyState, StoredOutcome, Turn, TurnRole,
)

async def main():
    storage = await open_storage(sys.argv[1])
    written = 0

    async def caller():
        nonlocal written
        while True:
            now = datetime.now(UTC)
            cid = str(uuid.uuid4())
            done = IdempotencyRecord(
                "u", "a", cid, "f" * 64, secrets.token_hex(16), KeyState.DONE, now,
                now + timedelta(hours=1), StoredOutcome("r", False, cid, None),
            )
            turns = (Turn(TurnRole.USER, "m", now), Turn(TurnRole.AGENT, "r", now))
            await storage.calls.record(
                CallWrite(Conversation(cid, "u", "a", now, now), turns, done, claimed_in_store=False)
            )
            written += 1
            if written % 200 == 0:
                print(written, flush=True)

    await asyncio.gather(*(caller() for _ in range(16)))

asyncio.run(main())
"""


@pytest.mark.parametrize("progress_lines", [1, 3, 7])
def test_kill_9_during_loop_writes_leaves_every_call_record_whole(tmp_path: Path, progress_lines: int) -> None:
    """The calls' group-committed writes run on the event loop (``SqlDatabase.run_write``) with WAL
    checkpoints in a worker thread: a ``SIGKILL`` at any point leaves a database that passes
    ``integrity_check``, each conversation with both its turns and its key's DONE record (no half
    batch), and the next process goes on writing to it. The kill point varies with how many progress
    lines (200 records each) the test waits for."""
    path = tmp_path / "calls.db"
    url = f"sqlite+aiosqlite:///{path}"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    for _ in range(2):  # the second process writes on after the first was killed
        child = subprocess.Popen([sys.executable, "-c", _RECORDING, url], env=env, stdout=subprocess.PIPE)
        try:
            assert child.stdout is not None
            for _ in range(progress_lines):
                line = _read_line(child.stdout, timeout_seconds=60)
                assert line, "the writer stopped before its progress"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
            if child.stdout is not None:
                child.stdout.close()
        with contextlib.closing(sqlite3.connect(path)) as check:
            assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            conversations = check.execute("SELECT count(*) FROM conversations").fetchone()[0]
            assert conversations >= 200 * progress_lines
            assert check.execute("SELECT count(*) FROM conversation_turns").fetchone()[0] == 2 * conversations
            assert check.execute("SELECT count(*) FROM idempotency_keys").fetchone()[0] == conversations
            partial = check.execute(
                "SELECT count(*) FROM conversations c WHERE c.turn_count != 2 OR "
                "(SELECT count(*) FROM conversation_turns t WHERE t.conversation_id = c.id) != 2"
            ).fetchone()[0]
            assert partial == 0


def _read_line(stream: Any, timeout_seconds: float) -> bytes:
    """One line of a child's stdout, waiting at most ``timeout_seconds`` (b"" at its end)."""
    ready, _, _ = select.select([stream], [], [], timeout_seconds)
    if not ready:
        raise TimeoutError(f"no output within {timeout_seconds} s")
    return stream.readline()
