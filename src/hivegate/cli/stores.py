"""The one place the CLI opens stores: settings from the command's options, a store opened for one
action and closed after it, and refusals found meanwhile reported after the store is closed."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol, TypeVar

import anyio

from hivegate.cli.options import fail, settings_from
from hivegate.settings import Settings
from hivegate.storage.engine import DatabaseLimits

__all__ = ["CommandError", "database_settings", "opened", "run", "run_on_store"]


class _Closable(Protocol):
    async def close(self) -> None: ...


S = TypeVar("S", bound=_Closable)
T = TypeVar("T")

OpenStore = Callable[[str, DatabaseLimits], Awaitable[S]]
"""A store factory (``create_credential_store``, ``create_agent_store``, ``create_oauth_store``): url, limits."""


class CommandError(Exception):
    """A refusal found while a store was open; :func:`run` reports it (exit status 1) after the store is closed."""


def database_settings(config: Path | None, database_url: str | None, *, announce: bool = True) -> Settings:
    """The settings of ``--config`` with ``--database-url`` over ``[database].url`` (see :func:`settings_from`)."""
    return settings_from(config, announce=announce, database={"url": database_url} if database_url else {})


@asynccontextmanager
async def opened(open_store: OpenStore[S], settings: Settings) -> AsyncGenerator[S]:
    """The store ``open_store`` makes for the settings' database (migrated first), closed on exit."""
    store = await open_store(settings.database.url, settings.database.limits())
    try:
        yield store
    finally:
        await store.close()


def run(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main`` to its end; a :class:`CommandError` it raises exits with status 1 and its message.

    Raises:
        typer.Exit: on a :class:`CommandError` (status 1).
    """
    try:
        return anyio.run(main)
    except CommandError as exc:
        raise fail(str(exc)) from None


def run_on_store(
    config: Path | None,
    database_url: str | None,
    open_store: OpenStore[S],
    action: Callable[[S], Awaitable[T]],
    *,
    announce: bool = True,
) -> T:
    """Run ``action`` on the store ``open_store`` makes for the command's database, then close it (:func:`run`)."""
    settings = database_settings(config, database_url, announce=announce)

    async def main() -> T:
        async with opened(open_store, settings) as store:
            return await action(store)

    return run(main)
