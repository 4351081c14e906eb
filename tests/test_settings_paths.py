"""How a config file's database URL is resolved (issue 7 item 15); CLI runs: tests/cli/test_database_path_cli.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivegate.settings import describe_database_url, load_settings, resolve_sqlite_path


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite+aiosqlite:///data/hg.db", "sqlite+aiosqlite:////etc/hg/data/hg.db"),
        ("sqlite:///hg.db?timeout=5", "sqlite:////etc/hg/hg.db?timeout=5"),
        ("sqlite+aiosqlite:///../shared/hg.db", "sqlite+aiosqlite:////etc/shared/hg.db"),
        ("sqlite+aiosqlite:////var/lib/hg.db", "sqlite+aiosqlite:////var/lib/hg.db"),
        ("sqlite+aiosqlite://", "sqlite+aiosqlite://"),
        ("sqlite+aiosqlite:///:memory:", "sqlite+aiosqlite:///:memory:"),
        ("postgresql+asyncpg://u:p@db:5432/hg", "postgresql+asyncpg://u:p@db:5432/hg"),
        ("memory://", "memory://"),
    ],
)
def test_relative_sqlite_paths_resolve_under_the_folder(url: str, expected: str) -> None:
    """Issue 7 item 15: only a relative SQLite file path changes; everything else is kept as written."""
    assert resolve_sqlite_path(url, Path("/etc/hg")) == expected


def test_only_the_config_files_url_is_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 7 item 15: the file's relative path is the file's; an override's stays the working directory's."""
    config = tmp_path / "conf" / "hivegate.toml"
    config.parent.mkdir()
    config.write_text('[database]\nurl = "sqlite+aiosqlite:///hg.db"\n', encoding="utf-8")
    monkeypatch.delenv("HIVEGATE_DATABASE__URL", raising=False)
    assert load_settings(config).database.url == f"sqlite+aiosqlite:///{config.parent.resolve() / 'hg.db'}"
    overridden = load_settings(config, database={"url": "sqlite:///here.db"})
    assert overridden.database.url == "sqlite:///here.db"


def test_described_urls_never_show_a_password() -> None:
    """Issue 7 item 15: what commands print about the database."""
    assert describe_database_url("postgresql+asyncpg://app:s3cret@db/hg") == "postgresql+asyncpg://app:***@db/hg"
    assert describe_database_url("sqlite:////var/lib/hg.db") == "SQLite file /var/lib/hg.db"
    assert describe_database_url("memory://").startswith("memory://")
