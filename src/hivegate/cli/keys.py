"""``hivegate keys``: create (printing the key once), list (never printing keys) and revoke API keys."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from hivegate.auth.api_keys import KeyKind, mint_key
from hivegate.cli.options import (
    Command,
    ConfigOption,
    DatabaseOption,
    command_group,
    err_console,
    fail,
    id_column,
    stdout_console,
    timestamp,
)
from hivegate.cli.stores import CommandError, run_on_storage
from hivegate.cli.users import run_with_credentials
from hivegate.storage import AgentStore, Storage
from hivegate.storage.credentials import ApiKey, CredentialStore, KeyLimitError, User

__all__ = ["keys_app"]

keys_app = command_group("Manage API keys (`oag_` user keys, `bak_` agent keys).")
console = stdout_console()


@keys_app.command("create", cls=Command)
def create(
    user: Annotated[str, typer.Option("--user", metavar="USERNAME", help="The owner's username.")],
    agent: Annotated[
        str | None, typer.Option("--agent", metavar="ID", help="Bind a `bak_` key to this agent id.")
    ] = None,
    name: Annotated[str, typer.Option("--name", metavar="TEXT", help="A label for people.")] = "",
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Create a key: oag_ (all of the user's agents) or, with --agent, bak_ (that agent). Prints it once."""
    minted = mint_key(KeyKind.USER if agent is None else KeyKind.AGENT)

    async def action(storage: Storage) -> ApiKey:
        owner = await _require_user(storage.credentials, user)
        if agent is not None:
            await _require_own_agent(storage.agents, agent, owner.username)
        try:
            return await storage.credentials.create_api_key(
                user_id=owner.id, agent_id=agent, name=name, key_hash=minted.digest, prefix=minted.prefix
            )
        except KeyLimitError as exc:
            raise CommandError(f"{exc}; revoke one first") from None

    key = run_on_storage(config, database_url, action)
    err_console.print(f"created key {key.id} for {user}" + (f" bound to agent {agent}" if agent else ""))
    err_console.print("Store it now: it is shown only this once.")
    print(minted.plaintext)


@keys_app.command("list", cls=Command)
def list_keys(
    user: Annotated[str | None, typer.Option("--user", metavar="USERNAME", help="Only this user's keys.")] = None,
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """List keys by id and prefix (never the keys themselves)."""

    async def action(store: CredentialStore) -> tuple[list[ApiKey], dict[str, str]]:
        owner = await _require_user(store, user) if user is not None else None
        names = {u.id: u.username for u in await store.list_users()}
        return await store.list_api_keys(owner.id if owner else None), names

    keys, usernames = run_with_credentials(config, database_url, action)
    table = Table(id_column(), "key", "user", "agent", "name", "created", "last used", "revoked")
    for key in keys:
        table.add_row(
            key.id,
            f"{key.prefix}…",
            usernames.get(key.user_id, key.user_id),
            key.agent_id or "-",
            key.name,
            timestamp(key.created_at),
            timestamp(key.last_used_at),
            timestamp(key.revoked_at),
        )
    console.print(table)


@keys_app.command("revoke", cls=Command)
def revoke(
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID", help="The key's id (from `hivegate keys list`).")],
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Revoke a key; running gateways refuse it within security.credential_cache_seconds (1 s)."""
    key = run_with_credentials(config, database_url, lambda store: store.revoke_api_key(key_id))
    if key is None:
        raise fail(f"no key {key_id!r}")
    console.print(f"revoked {key.id} ({key.prefix}…)")


async def _require_own_agent(agents: AgentStore, agent_id: str, username: str) -> None:
    """Refuse a ``bak_`` key for an agent that is not registered or not owned by ``username``."""
    stored = await agents.get(agent_id)
    if stored is None:
        raise CommandError(f"no agent {agent_id!r} is registered (apply it first: hivegate agents apply)")
    if stored.spec.owner.casefold() != username.casefold():
        raise CommandError(f"agent {agent_id!r} is owned by {stored.spec.owner!r}, not {username!r}")


async def _require_user(store: CredentialStore, username: str) -> User:
    found = await store.get_user_by_username(username)
    if found is None:
        raise CommandError(f"no user {username!r}")
    return found
