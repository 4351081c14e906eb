"""``hivegate agents``: apply an agents file, list, show and delete registered agents.

These write to the store named by the settings; a running server notices within
``database.poll_interval_seconds`` and updates the agents live.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hivegate.agents.loader import AgentsFileError, load_agents_file
from hivegate.backends.check import check_python_backends
from hivegate.cli.options import FLAG, Command, ConfigOption, DatabaseOption, command_group, err_console, fail
from hivegate.cli.stores import run_on_storage
from hivegate.storage import AgentStore, CredentialStore

__all__ = ["agents_app"]

agents_app = command_group("Register and inspect agents.")
console = Console()
T = TypeVar("T")


def _run(config: Path | None, database_url: str | None, action: Callable[[AgentStore], Awaitable[T]]) -> T:
    return run_on_storage(config, database_url, lambda storage: action(storage.agents))


@agents_app.command("apply", cls=Command)
def apply(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="TOML file with `[[agents]]` tables.")],
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
    prune: Annotated[
        bool,
        typer.Option("--prune", metavar=FLAG, help="Also delete registered agents that the file does not declare."),
    ] = False,
) -> None:
    """Create or update the agents declared in FILE (all or nothing).

    Every python backend is imported first, in a child process; if one cannot load, the import
    error is shown and nothing is written (exit status 2).
    """
    try:
        specs = load_agents_file(file)
    except AgentsFileError as exc:
        raise fail(str(exc), 2) from None
    problems = check_python_backends(specs)
    if problems:
        for problem in problems:
            err_console.print(f"[red]error:[/red] {escape(str(problem))}", highlight=False)
        err_console.print(
            f"nothing was written: fix {'this backend' if len(problems) == 1 else 'these backends'} first"
        )
        raise typer.Exit(2)
    report = _run(config or _config_beside(file), database_url, lambda store: store.apply(specs, prune=prune))
    table = Table("agent", "result")
    for label, ids in (
        ("created", report.created),
        ("updated", report.updated),
        ("unchanged", report.unchanged),
        ("deleted", report.deleted),
    ):
        for agent_id in ids:
            table.add_row(agent_id, label)
    console.print(table)
    console.print(f"registry revision {report.revision}")
    _warn_unknown_owners(config or _config_beside(file), database_url, {spec.owner for spec in specs})


def _warn_unknown_owners(config: Path | None, database_url: str | None, owners: set[str]) -> None:
    """Say which owners have no user yet: nobody's credentials reach their agents until they exist."""

    async def missing(store: CredentialStore) -> list[str]:
        return sorted([owner for owner in owners if await store.get_user_by_username(owner) is None])

    for owner in run_on_storage(config, database_url, lambda storage: missing(storage.credentials), announce=False):
        err_console.print(
            f"[yellow]warning:[/yellow] owner {owner!r} is not a user yet; create it with "
            f'`hivegate users create {owner}` (until then only auth = "none" agents of {owner!r} answer)'
        )


def _config_beside(file: Path) -> Path | None:
    """An agents file that also holds settings (``[database]``) is its own config."""
    return file if file.is_file() and "[database]" in file.read_text(encoding="utf-8") else None


@agents_app.command("list", cls=Command)
def list_agents(config: ConfigOption = None, database_url: DatabaseOption = None) -> None:
    """List registered agents."""
    stored = _run(config, database_url, lambda store: store.list())
    table = Table("id", "name", "owner", "auth", "version", "mcp", "a2a", "visibility", "backend", "revision")
    for item in stored:
        spec = item.spec
        backend = spec.backend.callable or spec.backend.server if spec.backend else "-"
        table.add_row(
            spec.id,
            spec.name,
            spec.owner,
            spec.auth,
            spec.version,
            "on" if spec.mcp_enabled else "off",
            "on" if spec.a2a_enabled else "off",
            spec.visibility,
            backend,
            str(item.revision),
        )
    console.print(table)


@agents_app.command("show", cls=Command)
def show(
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="The agent's id.")],
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Print one agent's stored spec as JSON."""
    stored = _run(config, database_url, lambda store: store.get(agent_id))
    if stored is None:
        raise fail(f"no agent {agent_id!r}")
    print(json.dumps(stored.spec.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2))


@agents_app.command("delete", cls=Command)
def delete(
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="The agent's id.")],
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Delete one agent."""
    if not _run(config, database_url, lambda store: store.delete(agent_id)):
        raise fail(f"no agent {agent_id!r}")
    console.print(f"deleted {agent_id}")
