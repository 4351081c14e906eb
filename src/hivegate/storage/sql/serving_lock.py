"""One gateway process serves a SQLite file: an advisory lock, held while a gateway serves, that tells a
second one it is not alone.

On SQLite the gateway keeps what replicas would share in its own memory: idempotency-key claims
(:attr:`hivegate.storage.calls.CallRecords.single_writer`) and rate-limit counters. Two ``hivegate serve``
processes on one file would each claim the same key and each run the call, and each count its own
limits (``docs/configuration.md``; replicas need PostgreSQL, DESIGN.md "Scale"). A gateway that serves
takes ``flock(LOCK_EX | LOCK_NB)`` on ``<database file>-serve.lock``; when another process holds it, a
warning is logged (serving is not refused: a second process kept by mistake should not take a service
down). The lock goes with the process, ``kill -9`` included. Without ``fcntl`` (Windows) nothing is checked.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Generator
from pathlib import Path

from sqlalchemy.engine import make_url

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["lock_path", "serving_alone"]

logger = logging.getLogger(__name__)


def lock_path(database_url: str) -> Path | None:
    """The lock file of a SQLite database URL (``<file>-serve.lock`` beside it); None for any other."""
    try:
        url = make_url(database_url)
    except Exception:  # memory:// and other URLs that are not SQLAlchemy's
        return None
    if url.get_backend_name() != "sqlite" or not url.database:
        return None
    database = Path(url.database).expanduser()
    return database.with_name(f"{database.name}-serve.lock")


@contextlib.contextmanager
def serving_alone(database_url: str) -> Generator[bool]:
    """Hold the serving lock of ``database_url`` (a SQLite file) while the block runs.

    Yields:
        True when this process holds the lock, or when it does not apply (not SQLite, no ``fcntl``, the
        lock file cannot be opened); False when another process holds it (a warning has been logged).
    """
    path = lock_path(database_url)
    if path is None or fcntl is None:
        yield True
        return
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        logger.warning("cannot open %s to check that one gateway serves the database: %s", path, exc)
        yield True
        return
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            logger.warning(
                "another hivegate process serves the SQLite database %s: each process claims idempotency "
                "keys and counts rate limits on its own, so a call can run twice; serve one process per "
                "SQLite file, or use PostgreSQL for replicas",
                path.with_name(path.name.removesuffix("-serve.lock")),
            )
            yield False
            return
        yield True
    finally:
        os.close(descriptor)
