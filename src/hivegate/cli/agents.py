"""``hivegate agents``: apply an agents file, list, show and delete registered agents.

These write to the store named by the settings; a running server notices within
``database.poll_interval_seconds`` and updates the agents live.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from hivegate.agents.a2a_import import agent_from_card, card_url_of, fetch_card
from hivegate.agents.loader import AgentsFileError, load_agents_file
from hivegate.agents.model import A2ABackendSpec, AgentSpec, McpBackendSpec
from hivegate.backends.check import check_python_backends
from hivegate.cli.options import (
    FLAG,
    Command,
    ConfigOption,
    DatabaseOption,
    command_group,
    err_console,
    fail,
    stdout_console,
)
from hivegate.cli.stores import run_on_storage
from hivegate.errors import GatewayError
from hivegate.storage import AgentStore, ApplyReport, CredentialStore

__all__ = ["agents_app"]

agents_app = command_group("Register and inspect agents.")
console = stdout_console()
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


@agents_app.command("import-a2a", cls=Command)
def import_a2a(
    url: Annotated[str, typer.Argument(metavar="URL", help="The remote agent's card URL, or its base URL.")],
    agent_id: Annotated[
        str | None, typer.Option("--id", metavar="ID", help="The agent's id (default: from the card's name).")
    ] = None,
    owner: Annotated[
        str | None, typer.Option("--owner", metavar="USER", help="The owner (required for a new agent).")
    ] = None,
    bearer_env: Annotated[
        str | None,
        typer.Option("--bearer-env", metavar="NAME", help="Send the upstream the bearer token in this env variable."),
    ] = None,
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Create an agent that fronts the remote A2A agent at URL, or refresh one made before.

    The name, description, version and skills come from the agent card; a refresh (the same --id)
    keeps the agent's other settings and its backend's credentials. The card is fetched with the
    agent's upstream credentials (--bearer-env, or the existing agent's). Exit status 2 when the card
    cannot be fetched or does not make a valid agent.
    """
    card_url = card_url_of(url)

    async def write(store: AgentStore) -> tuple[AgentSpec, ApplyReport]:
        existing = None if agent_id is None else await store.get(agent_id)
        before = existing.spec if existing is not None else None
        backend = _import_backend(card_url, bearer_env, before)
        try:
            card = await fetch_card(agent_id or "import", backend)
        except GatewayError as exc:
            raise fail(f"the agent card at {card_url} cannot be used: {exc.message} (see the log above)", 2) from None
        if before is None and owner is None:
            raise fail("a new agent needs an owner: give --owner USER", 2)
        try:
            spec = agent_from_card(card, backend, agent_id=agent_id, owner=owner or "", existing=before)
        except ValueError as exc:
            raise fail(f"the agent card does not make a valid agent: {exc}", 2) from None
        if before is None and agent_id is None and await store.get(spec.id) is not None:
            raise fail(f"agent {spec.id!r} exists already: refresh it with --id {spec.id}", 2)
        return spec, await store.apply([spec])

    spec, report = _run(config, database_url, write)
    result = "created" if report.created else "updated" if report.updated else "unchanged"
    console.print(f"agent {spec.id!r} ({escape(spec.name)}, {len(spec.skills)} skills): {result}")
    console.print(f"registry revision {report.revision}")
    _warn_unknown_owners(config, database_url, {spec.owner})


def _import_backend(card_url: str, bearer_env: str | None, existing: AgentSpec | None) -> A2ABackendSpec:
    """The ``a2a`` backend of an imported agent: the existing agent's (credentials kept) with the new card
    URL, or a new one; ``--bearer-env`` replaces the credentials."""
    fields: dict[str, Any] = {"type": "a2a", "card_url": card_url}
    if existing is not None and isinstance(existing.backend, A2ABackendSpec):
        fields = {**existing.backend.model_dump(), **fields}
    if bearer_env is not None:
        headers: dict[str, str] = fields.get("headers") or {}
        fields.update(bearer_env=bearer_env, oauth=None)
        fields["headers"] = {name: value for name, value in headers.items() if name.lower() != "authorization"}
    try:
        return A2ABackendSpec.model_validate(fields)
    except ValueError as exc:
        raise fail(f"invalid a2a backend: {exc}", 2) from None


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


def _backend_label(spec: AgentSpec) -> str:
    """What ``agents list`` shows of an agent's backend: the python target, or ``a2a <card URL>``."""
    backend = spec.backend
    if backend is None:
        return "-"
    if isinstance(backend, A2ABackendSpec):
        return f"a2a {backend.card_url}"
    if isinstance(backend, McpBackendSpec):
        return f"mcp {backend.url}" if backend.url is not None else "mcp " + " ".join(backend.command or ())
    return backend.callable or backend.server or "-"


@agents_app.command("list", cls=Command)
def list_agents(config: ConfigOption = None, database_url: DatabaseOption = None) -> None:
    """List registered agents."""
    stored = _run(config, database_url, lambda store: store.list())
    table = Table("id", "name", "owner", "auth", "version", "mcp", "a2a", "visibility", "backend", "revision")
    for item in stored:
        spec = item.spec
        backend = _backend_label(spec)
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
