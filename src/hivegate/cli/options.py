"""Options shared by the CLI commands, and the one place the CLI turns them into :class:`Settings`."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Column
from typer.core import TyperCommand, TyperGroup, TyperOption

from hivegate.settings import Settings, SettingsError, load_settings, sqlite_file

__all__ = [
    "DATABASE_UNAVAILABLE_EXIT",
    "FLAG",
    "MARKUP_MODE",
    "Command",
    "ConfigOption",
    "DatabaseOption",
    "Group",
    "announce_database",
    "command_group",
    "err_console",
    "fail",
    "id_column",
    "settings_from",
    "stdout_console",
    "timestamp",
]

DATABASE_UNAVAILABLE_EXIT = 4
"""Exit status of any command whose database is unreachable or refuses it (one line on stderr, no traceback)."""

err_console = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=4096)

PIPED_WIDTH = 4096
"""The line width of the commands' tables when stdout is not a terminal (a pipe, a file): wide enough that
no cell is cut short with an ellipsis (a table is only as wide as its cells)."""


def stdout_console() -> Console:
    """The console of a command's output: the terminal's width on a terminal, :data:`PIPED_WIDTH` otherwise."""
    return Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)


def fail(message: str, status: int = 1) -> typer.Exit:
    """Print ``error: <message>`` on stderr; returns the :class:`typer.Exit` (``status``) for the caller to raise."""
    err_console.print(f"[red]error:[/red] {message}")
    return typer.Exit(status)


MARKUP_MODE = "markdown"
"""Help text is Markdown: `code` renders as code and ``[[agents]]`` stays as written (Rich markup would eat it)."""


def _bare_help_option(option: TyperOption | None) -> TyperOption | None:
    if option is not None:
        option.metavar = ""  # a flag takes no value: no "<bool>" in the help table
    return option


class Command(TyperCommand):
    """A command whose ``--help`` is shown as the flag it is (typer labels it ``<bool>``)."""

    def get_help_option(self, ctx: typer.Context) -> TyperOption | None:  # pyright: ignore[reportIncompatibleMethodOverride]  # typer's Context is the click one it re-exports
        return _bare_help_option(super().get_help_option(ctx))


class Group(TyperGroup):
    """A command group whose ``--help`` is shown as the flag it is."""

    def get_help_option(self, ctx: typer.Context) -> TyperOption | None:  # pyright: ignore[reportIncompatibleMethodOverride]  # as above
        return _bare_help_option(super().get_help_option(ctx))


def command_group(help_text: str) -> typer.Typer:
    """A ``hivegate`` sub-command group: Markdown help, usage shown when called bare."""
    return typer.Typer(help=help_text, no_args_is_help=True, cls=Group, rich_markup_mode=MARKUP_MODE)


FLAG = ""
"""``metavar`` of boolean flags: they take no value, so the help shows no type."""

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", metavar="FILE", help="TOML file with settings and `[[agents]]` (default: none).", exists=False
    ),
]
DatabaseOption = Annotated[
    str | None,
    typer.Option(
        "--database-url", metavar="URL", help="Database URL (overrides `[database].url` and `HIVEGATE_DATABASE__URL`)."
    ),
]


def settings_from(config: Path | None, *, announce: bool = True, **groups: dict[str, Any]) -> Settings:
    """Load settings or exit with status 2 and a message naming the bad key.

    With ``announce`` (once per command), say on stderr which database the command uses
    (:func:`announce_database`).
    """
    overrides = {name: values for name, values in groups.items() if values}
    try:
        settings = load_settings(config, **overrides)
    except SettingsError as exc:
        raise fail(str(exc), 2) from None
    if announce:
        announce_database(settings)
    return settings


def announce_database(settings: Settings) -> None:
    """Print ``database: SQLite file /abs/path.db`` (or the masked URL) on stderr; a SQLite file that
    does not exist yet is flagged, since the command is about to create a new, empty database."""
    line = f"database: {settings.database.describe()}"
    path = sqlite_file(settings.database.url)
    if path is not None and not path.exists():
        line += " (new: no database there yet)"
    err_console.print(line, style="dim", highlight=False, soft_wrap=True, markup=False)


def id_column(header: str = "id") -> Column:
    """A table column for ids (``key_…``, ``grt_…``, ``usr_…``): never wrapped or cut, so they can be
    copied into ``revoke``/``disable`` at any terminal width; the other columns give way."""
    return Column(header, no_wrap=True, min_width=20, overflow="ignore")


def timestamp(at: datetime | None) -> str:
    """``at`` to the second for a table cell (``2026-08-22T10:00:00+00:00``), ``-`` for None."""
    return at.isoformat(timespec="seconds") if at is not None else "-"
