"""One gateway process per SQLite file (``hivegate.storage.sql.serving_lock``): a second gateway serving the
same file is warned; other databases are not checked. Real files and real ``flock``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hivegate.storage.sql.serving_lock import lock_path, serving_alone


def test_a_second_server_of_one_sqlite_file_is_warned_and_the_lock_is_released(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'h.db'}"
    caplog.set_level(logging.WARNING, logger="hivegate.storage.sql.serving_lock")
    with serving_alone(url) as first:
        assert first is True
        assert caplog.records == []
        with serving_alone(url) as second:  # another open file description: flock refuses it
            assert second is False
        assert "another hivegate process serves the SQLite database" in caplog.text
        assert str(tmp_path / "h.db") in caplog.text
    caplog.clear()
    with serving_alone(url) as again:
        assert again is True
    assert caplog.records == []


@pytest.mark.parametrize("url", ["memory://", "postgresql+asyncpg://postgres@127.0.0.1:5432/test", "not a url"])
def test_other_databases_are_not_checked(url: str) -> None:
    assert lock_path(url) is None
    with serving_alone(url) as alone, serving_alone(url) as also:
        assert alone is True
        assert also is True


def test_the_lock_file_sits_beside_the_database(tmp_path: Path) -> None:
    assert lock_path(f"sqlite:///{tmp_path / 'data' / 'h.db'}") == tmp_path / "data" / "h.db-serve.lock"
