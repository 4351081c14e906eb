"""Which database a command uses: a config file's relative SQLite path, and saying which database is in use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import hivegate

TIMEOUT_SECONDS = 60
SRC = Path(hivegate.__file__).resolve().parent.parent


def _cli(
    cwd: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None, expect: int = 0
) -> subprocess.CompletedProcess[str]:
    """``python -m hivegate ARGS`` run in ``cwd`` (this checkout's sources, wherever ``cwd`` is)."""
    result = subprocess.run(
        [sys.executable, "-m", "hivegate", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        env={**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "250", "NO_COLOR": "1", **(env or {})},
        check=False,
    )
    assert result.returncode == expect, result.stdout + result.stderr
    return result


def test_config_file_sqlite_path_is_relative_to_the_file(tmp_path: Path) -> None:
    """Issue 7 item 15: a relative SQLite path in a config file names one database from any working directory."""
    conf = tmp_path / "conf"
    conf.mkdir()
    config = conf / "hivegate.toml"
    config.write_text('[database]\nurl = "sqlite+aiosqlite:///data/hg.db"\n', encoding="utf-8")
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    database = (conf / "data" / "hg.db").resolve()

    created = _cli(here, "users", "create", "alice", "--password-stdin", "--config", str(config), stdin="pw\n")
    assert f"database: SQLite file {database} (new: no database there yet)" in created.stderr
    assert database.is_file()
    listed = _cli(there, "users", "list", "--config", str(config))
    assert "alice" in listed.stdout
    assert f"database: SQLite file {database}\n" in listed.stderr
    assert not (here / "data").exists()
    assert not (there / "data").exists()


def test_environment_sqlite_path_stays_relative_to_the_working_directory(tmp_path: Path) -> None:
    """Issue 7 item 15: a relative path from the environment (or --database-url) is the shell's, as documented."""
    config = tmp_path / "conf.toml"
    config.write_text('[database]\nurl = "sqlite+aiosqlite:///from-file.db"\n', encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    result = _cli(work, "agents", "list", "--config", str(config), env={"HIVEGATE_DATABASE__URL": "sqlite:///env.db"})
    assert f"database: SQLite file {(work / 'env.db').resolve()}" in result.stderr
    assert (work / "env.db").is_file()
    assert not (tmp_path / "from-file.db").exists()


def test_postgres_password_is_never_printed(tmp_path: Path) -> None:
    """Issue 7 item 15: the database line masks a PostgreSQL password (serve prints it at start-up too)."""
    url = "postgresql+asyncpg://app:topsecret@127.0.0.1:9/hivegate"
    # Without --dev and with the default secrets, serve stops (status 2) after naming its database.
    result = _cli(tmp_path, "serve", "--database-url", url, expect=2)
    assert "database: postgresql+asyncpg://app:***@127.0.0.1:9/hivegate" in result.stderr
    assert "topsecret" not in result.stdout + result.stderr
