"""The stores in one SQL database (SQLite via aiosqlite, PostgreSQL via asyncpg), on SQLAlchemy 2 async.

:mod:`~hivegate.storage.sql.engine` (one engine per database, time limits, the one translation of
database failures), :mod:`~hivegate.storage.sql.migrate` (Alembic, run once per opening), the
tables (``*tables.py``, mirrored by ``migrations/versions``) and one store module per protocol.
"""
