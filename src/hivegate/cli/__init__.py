"""The ``hivegate`` command line: ``serve``, ``agents``, ``users``, ``keys`` and ``grants``."""

from __future__ import annotations

import typer

from hivegate.cli.agents import agents_app
from hivegate.cli.grants import grants_app
from hivegate.cli.keys import keys_app
from hivegate.cli.options import MARKUP_MODE, Command, Group
from hivegate.cli.serve import serve
from hivegate.cli.users import users_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="hivegate",
    help="hivegate: agents as MCP servers (both protocol eras) behind one self-hostable gateway.",
    no_args_is_help=True,
    add_completion=False,
    cls=Group,
    rich_markup_mode=MARKUP_MODE,
)
app.command(cls=Command)(serve)
app.add_typer(agents_app, name="agents")
app.add_typer(users_app, name="users")
app.add_typer(keys_app, name="keys")
app.add_typer(grants_app, name="grants")


def main() -> None:
    """Console-script entry point."""
    app()
