"""Alembic migrations for the registry schema (run by ``hivegate.storage.sql.migrate``; not imported at runtime)."""
