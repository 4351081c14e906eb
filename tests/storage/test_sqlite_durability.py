"""``database.sqlite_synchronous``: every pooled SQLite connection runs with the configured
``PRAGMA synchronous`` in WAL mode (Spec: https://sqlite.org/pragma.html#pragma_synchronous; SQLite
reports NORMAL as 1 and FULL as 2), and a committed write survives the process being killed."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Literal

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
