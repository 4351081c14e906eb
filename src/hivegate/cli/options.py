"""Options shared by the CLI commands, and the one place the CLI turns them into :class:`Settings`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Column

from hivegate.settings import Settings, SettingsError, load_settings

__all__ = ["DATABASE_UNAVAILABLE_EXIT", "ConfigOption", "DatabaseOption", "err_console", "id_column", "settings_from"]

DATABASE_UNAVAILABLE_EXIT = 4
"""Exit status of any command whose database is unreachable or refuses it (one line on stderr, no traceback)."""

err_console = Console(stderr=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help=r"TOML file with settings and \[\[agents]] (default: none).", exists=False),
]
DatabaseOption = Annotated[
    str | None,
    typer.Option("--database-url", help=r"Database URL (overrides \[database].url / HIVEGATE_DATABASE__URL)."),
]


def settings_from(config: Path | None, **groups: dict[str, Any]) -> Settings:
    """Load settings or exit with status 2 and a message naming the bad key."""
    overrides = {name: values for name, values in groups.items() if values}
    try:
        return load_settings(config, **overrides)
    except SettingsError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


def id_column(header: str = "id") -> Column:
    """A table column for ids (``key_…``, ``grt_…``, ``usr_…``): never wrapped or cut, so they can be
    copied into ``revoke``/``disable`` at any terminal width; the other columns give way."""
    return Column(header, no_wrap=True, min_width=20, overflow="ignore")
