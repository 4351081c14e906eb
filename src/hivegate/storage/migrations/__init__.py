"""Alembic migrations for the registry schema (run by ``hivegate.storage.migrate``; not imported at runtime)."""
