"""``UtcDateTime``'s hand-written SQLite bind (``sqlite_text``) against SQLAlchemy's own processor chain,
and ``fetch_first``'s hand-compiled read against ``Connection.execute``, on a real SQLite file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Column, MetaData, Table, Text, bindparam, create_engine, insert, select
from sqlalchemy.dialects import sqlite

from hivegate.storage.sql.engine import fetch_first
from hivegate.storage.sql.tables import UtcDateTime

_DIALECT = sqlite.dialect()
_SQLALCHEMY_BIND = UtcDateTime().dialect_impl(_DIALECT).bind_processor(_DIALECT)


def _zoned(moment: datetime, minutes: int) -> datetime:
    return moment.replace(tzinfo=timezone(timedelta(minutes=minutes)))


aware = st.builds(
    _zoned,
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 30)),
    st.integers(min_value=-23 * 60, max_value=23 * 60),
)


@given(st.one_of(aware, st.datetimes(min_value=datetime(1, 1, 1), timezones=st.just(UTC))))
def test_sqlite_text_is_what_sqlalchemy_binds(value: datetime) -> None:
    assert _SQLALCHEMY_BIND is not None
    assert UtcDateTime.sqlite_text(value) == _SQLALCHEMY_BIND(value)


def test_sqlite_text_refuses_a_naive_datetime_and_passes_none() -> None:
    with pytest.raises(ValueError, match="aware"):
        UtcDateTime.sqlite_text(datetime(2026, 1, 1))
    assert UtcDateTime.sqlite_text(None) is None


def test_fetch_first_reads_what_execute_reads(tmp_path: Path) -> None:
    metadata = MetaData()
    table = Table("t", metadata, Column("id", Text, primary_key=True), Column("at", UtcDateTime, nullable=True))
    engine = create_engine(f"sqlite+pysqlite:///{tmp_path / 't.db'}")
    metadata.create_all(engine)
    at = datetime(2026, 12, 3, 18, 0, 1, 5, tzinfo=UTC)
    query = select(table.c.id, table.c.at).where(table.c.id == bindparam("wanted"))
    with engine.begin() as conn:
        conn.execute(insert(table), [{"id": "a", "at": at}, {"id": "b", "at": None}])
    with engine.connect() as conn:
        for wanted in ("a", "b", "missing"):
            expected = conn.execute(query, {"wanted": wanted}).first()
            got = fetch_first(conn, query, {"wanted": wanted})
            assert (None if got is None else tuple(got)) == (None if expected is None else tuple(expected))
        found = fetch_first(conn, query, {"wanted": "a"})
        assert found is not None
        assert found.at == at
        assert found.at.tzinfo is UTC
    engine.dispose()
