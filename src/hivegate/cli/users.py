"""``hivegate users``: create, list and disable local user accounts."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.table import Table

from hivegate.auth.api_keys import KeyKind, mint_key
from hivegate.auth.passwords import hash_password
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
from hivegate.cli.stores import run_on_storage
from hivegate.storage.credentials import (
    CredentialStore,
    User,
    UsernameTakenError,
    validate_username,
)

__all__ = ["run_with_credentials", "users_app"]

users_app = command_group("Manage local user accounts.")
console = stdout_console()
T = TypeVar("T")

UsernameArgument = Annotated[str, typer.Argument(metavar="USERNAME", help="The user's username (any case).")]
PasswordStdinOption = Annotated[
    bool, typer.Option("--password-stdin", metavar=FLAG, help="Read the password from stdin.")
]


def run_with_credentials(
    config: Path | None, database_url: str | None, action: Callable[[CredentialStore], Awaitable[T]]
) -> T:
    """Run ``action`` on the credential store named by the settings (migrated first), then close it."""
    return run_on_storage(config, database_url, lambda storage: action(storage.credentials))


def _password_hash(from_stdin: bool) -> str:
    """The hash of a password read from stdin (one line) or prompted for twice, hidden.

    Raises:
        typer.Exit: the password is empty (status 2).
    """
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise fail("the password is empty", 2)
    return hash_password(password)


def _found(user: User | None, username: str) -> User:
    if user is None:
        raise fail(f"no user {username!r}")
    return user


def _set_disabled(config: Path | None, database_url: str | None, username: str, disabled: bool) -> User:
    return _found(
        run_with_credentials(config, database_url, lambda store: store.set_user_disabled(username, disabled)), username
    )


@users_app.command("create", cls=Command)
def create(
    username: Annotated[
        str, typer.Argument(metavar="USERNAME", help="1-64 of `A-Z a-z 0-9 _ . -` (unique ignoring case).")
    ],
    password_stdin: PasswordStdinOption = False,
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Create a user; prompts for the password twice (hidden) unless --password-stdin."""
    try:
        validate_username(username)
    except ValueError as exc:
        raise fail(str(exc), 2) from None
    password_hash = _password_hash(password_stdin)
    try:
        user = run_with_credentials(config, database_url, lambda store: store.create_user(username, password_hash))
    except UsernameTakenError as exc:
        raise fail(str(exc)) from None
    console.print(f"created user {user.username} ({user.id})")


@users_app.command("list", cls=Command)
def list_users(config: ConfigOption = None, database_url: DatabaseOption = None) -> None:
    """List users."""
    users = run_with_credentials(config, database_url, lambda store: store.list_users())
    table = Table(id_column(), "username", "status", "created")
    for user in users:
        status = "disabled" if user.disabled else "active"
        table.add_row(user.id, user.username, status, timestamp(user.created_at))
    console.print(table)


@users_app.command("disable", cls=Command)
def disable(
    username: UsernameArgument,
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Disable a user: their keys and logins stop working."""
    user = _set_disabled(config, database_url, username, True)
    console.print(f"disabled {user.username}")


@users_app.command("enable", cls=Command)
def enable(
    username: UsernameArgument,
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Re-enable a disabled user: their keys, grants and sign-in work again."""
    user = _set_disabled(config, database_url, username, False)
    console.print(f"enabled {user.username}")


@users_app.command("set-password", cls=Command)
def set_password(
    username: UsernameArgument,
    password_stdin: PasswordStdinOption = False,
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Set a user's password (prompts twice, hidden, unless --password-stdin). Keys and grants are kept."""
    password_hash = _password_hash(password_stdin)
    user = _found(
        run_with_credentials(config, database_url, lambda store: store.set_password_hash(username, password_hash)),
        username,
    )
    console.print(f"password set for {user.username}")


@users_app.command("ensure-demo", cls=Command)
def ensure_demo(
    username: Annotated[str, typer.Option("--username", metavar="USERNAME", help="The demo user's username.")] = "demo",
    config: ConfigOption = None,
    database_url: DatabaseOption = None,
) -> None:
    """Create the demo user with a random password and an oag_ key, printing both once; no-op if it exists.

    ``make serve`` runs this before starting the gateway, so a fresh checkout has a user to
    sign in with (OAuth consent page) and a key to call the demo agents with.
    """

    async def action(store: CredentialStore) -> tuple[str, str] | None:
        if await store.get_user_by_username(username) is not None:
            return None
        password = secrets.token_urlsafe(12)
        user = await store.create_user(validate_username(username), hash_password(password))
        minted = mint_key(KeyKind.USER)
        await store.create_api_key(
            user_id=user.id, agent_id=None, name="demo key", key_hash=minted.digest, prefix=minted.prefix
        )
        return password, minted.plaintext

    created = run_with_credentials(config, database_url, action)
    if created is None:
        console.print(
            f"demo user [bold]{username}[/bold] exists (its password and key were printed when it was made; "
            f"`hivegate keys create --user {username}` makes another key)"
        )
        return
    password, key = created
    console.print(f"created demo user [bold]{username}[/bold]; shown only this once:")
    console.print(f"  password: {password}", soft_wrap=True, highlight=False)
    console.print(f"  user key: {key}", soft_wrap=True, highlight=False)
