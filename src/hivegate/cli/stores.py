"""The one place the CLI opens storage: settings from the command's options, the storage opened (and
migrated) once for one action and closed after it, and refusals found meanwhile reported after it is closed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio

from hivegate.cli.options import fail, settings_from
from hivegate.settings import Settings
from hivegate.storage import Storage, open_storage

__all__ = ["CommandError", "database_settings", "run_on_storage", "run_with_storage"]

T = TypeVar("T")


class CommandError(Exception):
    """A refusal found while the storage was open; reported (exit status 1) after it is closed."""


def database_settings(config: Path | None, database_url: str | None, *, announce: bool = True) -> Settings:
    """The settings of ``--config`` with ``--database-url`` over ``[database].url`` (see :func:`settings_from`)."""
    return settings_from(config, announce=announce, database={"url": database_url} if database_url else {})


def run_with_storage(settings: Settings, action: Callable[[Storage], Awaitable[T]]) -> T:
    """Run ``action`` on the storage of ``settings.database`` in a new event loop, then close the storage.

    Raises:
        typer.Exit: ``action`` raised a :class:`CommandError` (status 1, its message on stderr).
        StoreUnavailableError: the database is unreachable or refuses the migration (or ``action``'s
            writes); :mod:`hivegate.cli` turns it into one line and exit status 4.
    """

    async def main() -> T:
        async with await open_storage(settings.database.url, settings.database.limits()) as storage:
            return await action(storage)

    try:
        return anyio.run(main)
    except CommandError as exc:
        raise fail(str(exc)) from None


def run_on_storage(
    config: Path | None,
    database_url: str | None,
    action: Callable[[Storage], Awaitable[T]],
    *,
    announce: bool = True,
) -> T:
    """:func:`run_with_storage` on the database the command's ``--config`` / ``--database-url`` name."""
    return run_with_storage(database_settings(config, database_url, announce=announce), action)
