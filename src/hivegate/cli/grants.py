"""``hivegate grants``: list and revoke what users granted OAuth clients at consent."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table

from hivegate.cli.options import (
    FLAG,
    Command,
    ConfigOption,
    DatabaseOption,
    command_group,
    fail,
    id_column,
    stdout_console,
    timestamp,
)
from hivegate.cli.stores import CommandError, run_on_storage
from hivegate.storage import Storage
from hivegate.storage.oauth import GrantRecord

__all__ = ["grants_app"]

grants_app = command_group("Manage OAuth grants (what a user allowed a client at consent).")
console = stdout_console()


@grants_app.command("list", cls=Command)
def list_grants(
    user: Annotated[str | None, typer.Option("--user", metavar="USERNAME", help="Only this user's grants.")] = None,
    all_grants: Annotated[bool, typer.Option("--all", metavar=FLAG, help="Include revoked grants.")] = False,
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """List grants: client, agents, scopes, when granted and (with --all) revoked."""

    async def action(storage: Storage) -> tuple[list[GrantRecord], dict[str, str]]:
        user_id: str | None = None
        if user is not None:
            found = await storage.credentials.get_user_by_username(user)
            if found is None:
                raise CommandError(f"no user {user!r}")
            user_id = found.id
        names = {u.id: u.username for u in await storage.credentials.list_users()}
        return await storage.oauth.list_grants(user_id), names

    grants, usernames = run_on_storage(config, database_url, action)
    table = Table(id_column(), "user", "client", "agents", "granted", "revoked")
    for grant in grants:
        if grant.revoked_at is not None and not all_grants:
            continue
        client = grant.client_id if grant.client_name is None else f"{grant.client_name} ({grant.client_id})"
        table.add_row(
            grant.id,
            usernames.get(grant.user_id, grant.user_id),
            client,
            " ".join(grant.agents),
            timestamp(grant.created_at),
            timestamp(grant.revoked_at),
        )
    console.print(table)


@grants_app.command("revoke", cls=Command)
def revoke(
    grant_id: Annotated[str, typer.Argument(metavar="GRANT_ID", help="The grant's id (from `hivegate grants list`).")],
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Revoke a grant: its refresh tokens stop working at once, its access tokens within
    security.credential_cache_seconds (1 s)."""

    async def action(storage: Storage) -> tuple[GrantRecord | None, bool]:
        before = await storage.oauth.get_grant(grant_id)
        return await storage.oauth.revoke_grant(grant_id, datetime.now(UTC)), before is not None and not before.active

    grant, already = run_on_storage(config, database_url, action)
    if grant is None:
        raise fail(f"no grant {grant_id!r}")
    if already and grant.revoked_at is not None:
        console.print(f"{grant.id} was already revoked at {timestamp(grant.revoked_at)}")
        return
    console.print(
        f"revoked {grant.id} (client {grant.client_name or grant.client_id}, agents {' '.join(grant.agents)})"
    )
