"""Running a command's work on the stores named by the settings: opened (and migrated) once, closed after."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from hivegate.settings import Settings
from hivegate.storage import Storage, open_storage

__all__ = ["run_with_storage"]

T = TypeVar("T")


def run_with_storage(settings: Settings, action: Callable[[Storage], Awaitable[T]]) -> T:
    """Run ``action`` on the storage of ``settings.database`` in a new event loop, then close the storage.

    Raises:
        StoreUnavailableError: the database is unreachable or refuses the migration (or ``action``'s
            writes); :mod:`hivegate.cli` turns it into one line and exit status 4.
    """

    async def main() -> T:
        async with await open_storage(settings.database.url, settings.database.limits()) as storage:
            return await action(storage)

    return anyio.run(main)
